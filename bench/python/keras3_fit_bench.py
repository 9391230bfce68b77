"""Keras 3 training steps on the TensorFlow backend: ringlet.keras against
TensorFlow's own `tf.distribute.MultiWorkerMirroredStrategy` (its CPU
collectives over gRPC), the same model, per-rank batch and data, the same
tf.function step (a tape, then the Keras optimizer's `apply`, which reduces
the gradients). One mode per job; run them in turn:

    for mode in ringlet mwms ringlet mwms; do
      ringletrun -np 2 python bench/python/keras3_fit_bench.py --mode $mode
    done
    ringletrun -np 2 python bench/python/keras3_fit_bench.py --mode ringlet --fit
    ringletrun -np 2 python bench/python/keras3_fit_bench.py --mode ringlet --jit-compile

A custom loop, because Keras 3.15's `model.fit` fails under MWMS (its
metrics' reduction asks for axis 0 of a scalar); `--fit` times ringlet.keras
in `model.fit` as well. Each rank trains on its own synthetic batches (MWMS
with auto-sharding off, so that both modes see the same data per rank). The
first epoch compiles and warms up; a step's time is the median of the later
epochs' steps on rank 0, and steps/s its inverse. ringletrun gives every
rank RINGLET_RANK and RINGLET_SIZE; MWMS takes its cluster from TF_CONFIG,
which this script writes from them (workers on localhost from --port up).
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
    p.add_argument("--fit", action="store_true",
                   help="ringlet only: model.fit instead of the custom loop")
    p.add_argument("--jit-compile", action="store_true",
                   help="ringlet only: the step XLA-compiled (Ringlet's XLA kernels)")
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


def custom_step(tf, model, optimizer):
    """One training step as a tf.function: the loss's gradients applied by
    ``optimizer`` (which reduces them over the ranks)."""
    loss_of = tf.keras.losses.SparseCategoricalCrossentropy()

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss
    return step


def timed(run_step, steps, epochs):
    """Every step's wall time, by epoch."""
    times = []
    for _ in range(epochs):
        times.append([])
        for _ in range(steps):
            started = time.perf_counter()
            run_step()
            times[-1].append(time.perf_counter() - started)
    return times


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
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = \
            tf.data.experimental.AutoShardPolicy.OFF
        # MWMS splits the global batch over the workers: each gets args.batch.
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(
            args.batch * size).repeat().with_options(options)
        batches = iter(strategy.experimental_distribute_dataset(dataset))
        with strategy.scope():
            model = model_of(keras, args.width)
            optimizer = keras.optimizers.SGD(0.01 * size, momentum=0.9)
            step = custom_step(tf, model, optimizer)

        @tf.function
        def distributed_step(batch):
            return strategy.run(step, args=batch)

        epochs = timed(lambda: distributed_step(next(batches)), args.steps, args.epochs)
        mode = "MultiWorkerMirroredStrategy, custom loop"
    else:
        import keras
        import tensorflow as tf
        import ringlet.keras as hvd
        hvd.init()
        model = model_of(keras, args.width)
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * size, momentum=0.9))
        if args.fit:
            model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                          jit_compile=args.jit_compile)
            times = StepTimes(keras)
            model.fit(x, y, batch_size=args.batch, epochs=args.epochs, verbose=0,
                      shuffle=False, callbacks=[
                          hvd.callbacks.BroadcastGlobalVariablesCallback(0), times.callback])
            epochs = times.epochs
            mode = "ringlet.keras, model.fit" + (", XLA" if args.jit_compile else "")
        else:
            step = tf.function(custom_step(tf, model, optimizer), jit_compile=args.jit_compile)
            dataset = iter(tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch)
                           .repeat())
            hvd.broadcast_variables(model.variables, root_rank=0)
            epochs = timed(lambda: step(*next(dataset)), args.steps, args.epochs)
            mode = "ringlet.keras, custom loop" + (", XLA" if args.jit_compile else "")

    # Both modes keep the ranks' weights one: the sums agree on every rank.
    checksum = sum(float(np.asarray(w, np.float64).sum()) for w in model.get_weights())
    print(f"rank {rank}: weights sum to {checksum:.6f}", flush=True)
    measured = [t for epoch in epochs[1:] for t in epoch]
    step_time = statistics.median(measured)
    if rank == 0:
        parameters = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        print(f"{mode}: np={size}, {parameters} parameters, batch {args.batch} per rank: "
              f"median step {step_time * 1e3:.1f} ms, {1 / step_time:.2f} steps/s "
              f"({len(measured)} steps)", flush=True)


if __name__ == "__main__":
    main()
