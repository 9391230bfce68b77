"""Trains a small convolutional network on MNIST with ringlet.tensorflow: a
GradientTape step inside tf.function, as Horovod's TensorFlow 2 example does.
Launch with `ringletrun -np 2 python examples/tensorflow2_mnist.py`.

Without --data-dir it trains on a synthetic MNIST-shaped set. --check makes
it exit non-zero unless the loss fell and every rank ends with the same
weights."""

import argparse
import os
import sys

# Horovod's script, written for tf.keras as tf-keras (the Keras 2 API): chosen
# before TensorFlow is imported (docs/keras3.md).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import ringlet.tensorflow as hvd  # noqa: E402
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_data  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="ringlet.tensorflow MNIST example")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=200, help="total steps, shared by the ranks")
    p.add_argument("--lr", type=float, default=0.001, help="learning rate for one rank")
    p.add_argument("--data-dir", default=None, help="directory with MNIST's idx files")
    p.add_argument("--checkpoint-dir", default=None, help="rank 0 saves checkpoints here")
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

    mnist_model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, [3, 3], activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(64, [3, 3], activation="relu"),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Dropout(0.25),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(10, activation="softmax")])
    loss = tf.losses.SparseCategoricalCrossentropy()
    # The learning rate grows with the number of ranks, as the batch does.
    opt = tf.optimizers.Adam(args.lr * hvd.size())
    checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            probs = mnist_model(images, training=True)
            loss_value = loss(labels, probs)
        # The tape averages the gradients over the ranks.
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss_value, mnist_model.trainable_variables)
        opt.apply_gradients(zip(grads, mnist_model.trainable_variables))
        # After the first step every rank takes rank 0's weights and optimizer state.
        if first_batch:
            hvd.broadcast_variables(mnist_model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss_value

    losses = []
    for batch, (images, labels) in enumerate(dataset.take(args.steps // hvd.size())):
        loss_value = training_step(images, labels, batch == 0)
        losses.append(float(loss_value))
        if batch % 10 == 0 and hvd.rank() == 0:
            print(f"step #{batch}\tloss: {loss_value:.6f}", flush=True)

    if hvd.rank() == 0 and args.checkpoint_dir:
        checkpoint.save(os.path.join(args.checkpoint_dir, "ckpt"))
    if args.check:
        check(mnist_model, losses)
    hvd.shutdown()


def check(model, losses):
    window = max(1, min(10, len(losses) // 4))
    first, last = sum(losses[:window]) / window, sum(losses[-window:]) / window
    flat = tf.concat([tf.reshape(v, [-1]) for v in model.variables], 0)
    everyone = hvd.allgather(tf.reshape(flat, [1, -1]), name="check.weights").numpy()
    identical = bool((everyone == everyone[0]).all())
    print(f"rank {hvd.rank()}: loss {first:.4f} -> {last:.4f}; weights identical on every "
          f"rank: {'yes' if identical else 'no'}", flush=True)
    if not (last < first and identical):
        hvd.shutdown()
        sys.exit(1)


if __name__ == "__main__":
    main()
