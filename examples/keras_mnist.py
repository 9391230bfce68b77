"""Trains a small convolutional network on MNIST with ringlet.keras and
model.fit(), with Horovod's callbacks. Launch with
`ringletrun -np 2 python examples/keras_mnist.py`.

Without --data-dir it trains on a synthetic MNIST-shaped set. --check makes
it exit non-zero unless the loss fell and every rank ends with the same
weights."""

import argparse
import os
import sys

import numpy as np

# Horovod's script, written for tf.keras as tf-keras (the Keras 2 API): chosen
# before TensorFlow is imported (Keras 3: keras3_mnist.py, docs/keras3.md).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import ringlet.keras as hvd  # noqa: E402
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_data  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="ringlet.keras MNIST example")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps-per-epoch", type=int, default=50, help="for all ranks together")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate for one rank")
    p.add_argument("--data-dir", default=None, help="directory with MNIST's idx files")
    p.add_argument("--checkpoint", default=None, help="rank 0 saves the model here (.keras)")
    p.add_argument("--check", action="store_true")
    return p.parse_args()


def main():
    args = parse_args()
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    # One GPU per local rank where there are GPUs; more ranks than GPUs share
    # them in turn.
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")

    images, labels = mnist_data.load(args.data_dir, train=True, seed=hvd.rank())
    dataset = tf.data.Dataset.from_tensor_slices(
        (images[:, 0, :, :, None], labels)).repeat().shuffle(1000, seed=hvd.rank()).batch(
        args.batch_size)

    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(16, [3, 3], activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax")])
    scaled_lr = args.lr * hvd.size()
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(scaled_lr, momentum=0.9))
    model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt,
                  metrics=["accuracy"])

    callbacks = [
        # Every rank starts from rank 0's weights and optimizer state.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # The epoch's metrics are averaged over the ranks.
        hvd.callbacks.MetricAverageCallback(),
        # A gradual warmup to the scaled learning rate, then a step down (a function:
        # a number multiplier would decay exponentially from start_epoch on).
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=1),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=scaled_lr,
                                                   multiplier=lambda epoch: 0.5,
                                                   start_epoch=args.epochs - 1),
    ]
    if hvd.rank() == 0 and args.checkpoint:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(args.checkpoint))

    history = model.fit(dataset, steps_per_epoch=args.steps_per_epoch // hvd.size(),
                        epochs=args.epochs, callbacks=callbacks,
                        verbose=2 if hvd.rank() == 0 else 0)
    if args.check:
        losses = history.history["loss"]
        weights = np.concatenate([w.ravel() for w in model.get_weights()])
        everyone = hvd.allgather(weights.reshape(1, -1), name="check.weights").numpy()
        identical = bool((everyone == everyone[0]).all())
        print(f"rank {hvd.rank()}: loss {losses[0]:.4f} -> {losses[-1]:.4f}; weights identical "
              f"on every rank: {'yes' if identical else 'no'}", flush=True)
        if not (losses[-1] < losses[0] and identical):
            hvd.shutdown()
            sys.exit(1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
