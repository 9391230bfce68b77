"""Trains a small multilayer perceptron on MNIST with JAX, optax and
ringlet.jax: launch with `ringletrun -np 2 python examples/jax_mnist.py`.

Every rank starts from rank 0's parameters (broadcast_parameters), trains on
its own share of the data with a jit-compiled step whose gradients
ringlet.jax's DistributedOptimizer averages over the ranks, and reports the
test set's loss and accuracy averaged over the ranks. Without --data-dir it
trains on a synthetic MNIST-shaped set. --check makes it exit non-zero unless
the loss fell and every rank ends with the same parameters (what CI runs)."""

import argparse
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import ringlet.jax as hvd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_data  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="ringlet.jax MNIST example")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01, help="learning rate for one rank")
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--data-dir", default=None, help="directory with MNIST's idx files")
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many")
    p.add_argument("--check", action="store_true",
                   help="fail unless the loss fell and the ranks agree on the parameters")
    return p.parse_args()


def init_params(key, sizes):
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, sub = jax.random.split(key)
        params[f"dense{i}"] = {"w": jax.random.normal(sub, (fan_in, fan_out)) * np.sqrt(2 / fan_in),
                               "b": jnp.zeros(fan_out)}
    return params


def log_probabilities(params, images):
    h = images.reshape(images.shape[0], -1)
    layers = sorted(params)
    for name in layers[:-1]:
        h = jax.nn.relu(h @ params[name]["w"] + params[name]["b"])
    last = params[layers[-1]]
    return jax.nn.log_softmax(h @ last["w"] + last["b"])


def loss_fn(params, images, labels):
    return -jnp.mean(jnp.take_along_axis(log_probabilities(params, images), labels[:, None], 1))


def main():
    args = parse_args()
    hvd.init()
    if hvd.rank() == 0:
        print(f"training on {jax.devices()[0].platform} with {hvd.size()} rank(s)", flush=True)

    x, y = mnist_data.load(args.data_dir, train=True)
    # Each rank reads its own part of the data.
    x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()].astype(np.int32)
    tx_, ty_ = mnist_data.load(args.data_dir, train=False)
    tx_, ty_ = tx_[hvd.rank()::hvd.size()], ty_[hvd.rank()::hvd.size()].astype(np.int32)

    # Each rank would start elsewhere: every rank takes rank 0's parameters.
    params = init_params(jax.random.PRNGKey(args.seed + hvd.rank()), [28 * 28, args.hidden, 10])
    params = hvd.broadcast_parameters(params, root_rank=0)
    # The learning rate grows with the number of ranks, as the batch does.
    optimizer = hvd.DistributedOptimizer(optax.sgd(args.lr * hvd.size(), momentum=args.momentum))
    opt_state = optimizer.init(params)

    @jax.jit
    def train_step(params, opt_state, images, labels):
        loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    rng = np.random.default_rng(args.seed + hvd.rank())
    steps_per_epoch = len(x) // args.batch_size
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x))
        for step in range(steps_per_epoch):
            if args.max_steps and step >= args.max_steps:
                break
            batch = order[step * args.batch_size:(step + 1) * args.batch_size]
            params, opt_state, loss = train_step(params, opt_state, jnp.asarray(x[batch]),
                                                 jnp.asarray(y[batch]))
            losses.append(float(loss))
            if step % args.log_interval == 0 and hvd.rank() == 0:
                print(f"train epoch {epoch} [{step * args.batch_size}/{len(x)}] "
                      f"loss {losses[-1]:.4f}", flush=True)
        evaluate(params, tx_, ty_)

    if args.check:
        check(params, losses)
    hvd.shutdown()


def evaluate(params, images, labels):
    log_p = log_probabilities(params, jnp.asarray(images))
    loss = -jnp.mean(jnp.take_along_axis(log_p, jnp.asarray(labels)[:, None], 1))
    accuracy = jnp.mean(jnp.argmax(log_p, 1) == jnp.asarray(labels))
    # The averages over every rank's share of the test set.
    loss, accuracy = hvd.allreduce(loss, name="avg_loss"), hvd.allreduce(accuracy,
                                                                          name="avg_accuracy")
    if hvd.rank() == 0:
        print(f"test set: average loss {float(loss):.4f}, accuracy {100 * float(accuracy):.1f}%",
              flush=True)


def check(params, losses):
    window = max(1, min(10, len(losses) // 4))
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    flat = jnp.concatenate([leaf.reshape(-1) for leaf in jax.tree_util.tree_leaves(params)])
    everyone = hvd.allgather(flat[None], name="check.parameters")
    identical = bool(jnp.all(everyone == everyone[0]))
    print(f"rank {hvd.rank()}: loss {first:.4f} -> {last:.4f}; parameters identical on every "
          f"rank: {'yes' if identical else 'no'}", flush=True)
    if not (last < first and identical):
        hvd.shutdown()
        sys.exit(1)


if __name__ == "__main__":
    main()
