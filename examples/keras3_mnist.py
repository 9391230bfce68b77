"""Trains a small convolutional network on MNIST with Keras 3, ringlet.keras
and model.fit(), with Horovod's callbacks. Launch with
`ringletrun -np 2 python examples/keras3_mnist.py`.

Keras 3 runs on the backend KERAS_BACKEND names; ringlet.keras serves
TensorFlow, PyTorch and JAX (`KERAS_BACKEND=jax ringletrun -np 2 python
examples/keras3_mnist.py`). Without --data-dir
it trains on a synthetic MNIST-shaped set. --check makes it exit non-zero
unless the loss fell and every rank ends with the same weights."""

import argparse
import os
import sys

import keras
import numpy as np

import ringlet.keras as hvd  # after `import keras`: serves Keras 3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_data  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="ringlet.keras Keras 3 MNIST example")
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
    keras.utils.set_random_seed(hvd.rank())  # the broadcast makes the weights one

    images, labels = mnist_data.load(args.data_dir, train=True, seed=hvd.rank())
    images = images[:, 0, :, :, None]
    steps = args.steps_per_epoch // hvd.size()
    samples = min(len(images), steps * args.batch_size)
    rng = np.random.default_rng(hvd.rank())
    order = rng.permutation(len(images))[:samples]

    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax")])
    scaled_lr = args.lr * hvd.size()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(scaled_lr, momentum=0.9))
    # On TensorFlow, Ringlet's collectives run outside XLA: the step is compiled
    # without it. On JAX they run inside the jit-compiled step, Keras's default.
    model.compile(loss="sparse_categorical_crossentropy", optimizer=opt,
                  metrics=["accuracy"],
                  jit_compile="auto" if keras.backend.backend() == "jax" else False)

    callbacks = [
        # Every rank starts from rank 0's weights and optimizer state.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # The epoch's metrics are averaged over the ranks.
        hvd.callbacks.MetricAverageCallback(),
        # A gradual warmup to the scaled learning rate, then a step down.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=1),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=scaled_lr,
                                                   multiplier=lambda epoch: 0.5,
                                                   start_epoch=args.epochs - 1),
    ]
    if hvd.rank() == 0 and args.checkpoint:
        callbacks.append(keras.callbacks.ModelCheckpoint(args.checkpoint))

    history = model.fit(images[order], labels[order], batch_size=args.batch_size,
                        epochs=args.epochs, callbacks=callbacks,
                        verbose=2 if hvd.rank() == 0 else 0)
    if args.check:
        losses = history.history["loss"]
        weights = np.concatenate([w.ravel() for w in model.get_weights()])
        everyone = np.asarray(hvd.allgather(weights.reshape(1, -1), name="check.weights"))
        identical = bool((everyone == everyone[0]).all())
        print(f"rank {hvd.rank()}: loss {losses[0]:.4f} -> {losses[-1]:.4f}; weights identical "
              f"on every rank: {'yes' if identical else 'no'}", flush=True)
        if not (losses[-1] < losses[0] and identical):
            hvd.shutdown()
            sys.exit(1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
