"""Keras 3 `model.fit` on the TensorFlow backend: ringlet.keras against
TensorFlow's own `tf.distribute.MultiWorkerMirroredStrategy` (its CPU
collectives over gRPC), the same model, per-rank batch and data. One mode per
job; run both in turn:

    for mode in ringlet mwms ringlet mwms; do
      ringletrun -np 2 python bench/python/keras3_fit_bench.py --mode $mode
    done

Each rank trains on its own synthetic batches (MWMS with auto-sharding off,
so that both modes see the same data per rank). The first epoch compiles
and warms up; a step's time is the median of the later epochs' steps on rank
0, and steps/s its inverse. ringletrun gives every rank RINGLET_RANK and
RINGLET_SIZE; MWMS takes its cluster from TF_CONFIG, which this script writes
from them (workers on localhost from --port up).
"""

import argparse
import json
import os
import statistics
import time

import numpy as np


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["ringlet", "mwms"], required=True)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=30, help="per epoch")
    p.add_argument("--epochs", type=int, default=3, help="the first one is not measured")
    p.add_argument("--width", type=int, default=256, help="the dense layer's width")
    p.add_argument("--port", type=int, default=23456)
    return p.parse_args()


def model_of(keras, width):
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(width, activation="relu"),
        keras.layers.Dense(10, activation="softmax")])


def data_of(rank, samples):
    rng = np.random.default_rng(rank)
    return (rng.random((samples, 28, 28, 1), dtype=np.float32),
            rng.integers(0, 10, samples).astype(np.int64))


class StepTimes:
    """The wall time of each training step (batch end to batch end), by epoch."""

    def __init__(self, keras):
        class Callback(keras.callbacks.Callback):
            def on_epoch_begin(cb, epoch, logs=None):
                self.epochs.append([])
                self.last = time.perf_counter()

            def on_train_batch_end(cb, batch, logs=None):
                now = time.perf_counter()
                self.epochs[-1].append(now - self.last)
                self.last = now

        self.epochs = []
        self.last = None
        self.callback = Callback()


def main():
    args = parse_args()
    rank = int(os.environ.get("RINGLET_RANK", "0"))
    size = int(os.environ.get("RINGLET_SIZE", "1"))
    samples = args.batch * args.steps
    x, y = data_of(rank, samples)

    if args.mode == "mwms":
        os.environ["TF_CONFIG"] = json.dumps({
            "cluster": {"worker": [f"localhost:{args.port + r}" for r in range(size)]},
            "task": {"type": "worker", "index": rank}})
        import keras
        import tensorflow as tf
        keras.config.disable_traceback_filtering()
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = \
            tf.data.experimental.AutoShardPolicy.OFF
        # MWMS splits the global batch over the workers: each gets args.batch.
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(
            args.batch * size).repeat().with_options(options)
        with strategy.scope():
            model = model_of(keras, args.width)
            model.compile(optimizer=keras.optimizers.SGD(0.01 * size, momentum=0.9),
                          loss="sparse_categorical_crossentropy", jit_compile=False)
            # Keras 3.15 builds a model under a strategy from the first batch
            # reduced over the replicas, which fails for an (x, y) pair under
            # MWMS (PerReplica values in a tuple); built here from a local batch
            # instead, the same variables.
            model._symbolic_build(data_batch=(x[:args.batch], y[:args.batch]))
        model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None
        callbacks = []
        fit_input = {"x": dataset, "steps_per_epoch": args.steps}
    else:
        import keras
        import ringlet.keras as hvd
        hvd.init()
        model = model_of(keras, args.width)
        model.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.01 * size, momentum=0.9)),
            loss="sparse_categorical_crossentropy", jit_compile=False)
        callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
        fit_input = {"x": x, "y": y, "batch_size": args.batch}

    times = StepTimes(keras)
    model.fit(epochs=args.epochs, verbose=0, shuffle=False,
              callbacks=callbacks + [times.callback], **fit_input)
    measured = [t for epoch in times.epochs[1:] for t in epoch]
    step = statistics.median(measured)
    if rank == 0:
        parameters = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        print(f"{args.mode}: np={size}, {parameters} parameters, batch {args.batch} per rank: "
              f"median step {step * 1e3:.1f} ms, {1 / step:.2f} steps/s "
              f"({len(measured)} steps)", flush=True)


if __name__ == "__main__":
    main()
