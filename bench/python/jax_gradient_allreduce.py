"""What ringlet.jax adds to a gradient allreduce: an optax step of a
multilayer perceptron of about 10 million float32 parameters (784-2048-2048-
2048-10, 8 leaves), its gradients averaged by ``allreduce_gradients()``,
against the bare C++ allreduce of the same bytes (ringlet-bench), in the same
run:

    ringletrun -np 2 python bench/python/jax_gradient_allreduce.py --steps 30
    ringletrun -np 2 build/bin/ringlet-bench allreduce -b 40083496 -e 40083496 -n 30 -w 5 \
        --per-op-barrier

It prints, per step (medians over the steps, each step at its slowest rank,
in ms), each after a barrier and alternating within each step:
- eager: the gradients of a jit-compiled step reduced outside jit, timed
  around ``tx.update`` (the arrays go in and out through DLPack, no copy);
- runtime: the runtime's own in-place allreduce of as many bytes from a
  warm buffer (ringlet.numpy), the reference within the same job;
- jit alone: the same reduction as the whole of a jit-compiled function;
then, alternating step by step:
- jit: a whole jit-compiled step with ``DistributedOptimizer(optax.sgd)``
  less the same step with ``optax.sgd`` alone, alternating, so that the
  difference is what the allreduce costs inside a step (with the wait for
  the slower rank's backward pass, which a step without it does not have).
and the parameter bytes to give ringlet-bench.
"""

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import ringlet.jax as hvd  # noqa: E402
import ringlet.numpy as hvd_numpy  # noqa: E402

SIZES = [784, 2048, 2048, 2048, 10]


def init_params(key):
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        key, sub = jax.random.split(key)
        params[f"dense{i}"] = {
            "w": jax.random.normal(sub, (fan_in, fan_out), jnp.float32) / float(np.sqrt(fan_in)),
            "b": jnp.zeros(fan_out, jnp.float32)}
    return params


def loss_fn(params, x, y):
    h = x
    for i in range(len(SIZES) - 2):
        h = jax.nn.relu(h @ params[f"dense{i}"]["w"] + params[f"dense{i}"]["b"])
    last = params[f"dense{len(SIZES) - 2}"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(h @ last["w"] + last["b"]),
                                         y[:, None], 1))


def slowest(times):
    """Each step's time at its slowest rank."""
    return np.asarray(hvd.allreduce(jnp.asarray(times, jnp.float64), op=hvd.Max,
                                    name="bench.times"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    jax.config.update("jax_enable_x64", True)  # the times' float64
    hvd.init()
    params = hvd.broadcast_parameters(init_params(jax.random.PRNGKey(0)), root_rank=0)
    nbytes = sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(params))
    rng = np.random.default_rng(hvd.rank())
    x = jnp.asarray(rng.standard_normal((args.batch, SIZES[0]), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, SIZES[-1], args.batch).astype(np.int32))
    grad_fn = jax.jit(jax.grad(loss_fn))

    # Each step alternates: the gradients reduced outside jit, the same reduction as
    # the whole of a jit-compiled function (buffer_callback: XLA's own buffers in
    # and out), and, as the reference within the same job, one in-place allreduce
    # of as many bytes from a buffer touched before (ringlet.numpy: the C++
    # runtime's entry point with one Python call around it).
    reduce_tx = hvd.allreduce_gradients()
    reduce_jit = jax.jit(lambda grads: reduce_tx.update(grads, optax.EmptyState())[0])
    state = reduce_tx.init(params)
    flat = np.ones(nbytes // 4, np.float32)
    eager, in_jit, reference = [], [], []
    for step in range(args.warmup + args.steps):
        grads = jax.block_until_ready(grad_fn(params, x, y))
        for times, run in ((eager, lambda: reduce_tx.update(grads, state)[0]),
                           (in_jit, lambda: reduce_jit(grads)),
                           (reference, lambda: hvd_numpy.allreduce_(flat, name="bench.bare"))):
            hvd.barrier()
            start = time.perf_counter()
            jax.block_until_ready(run())
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
        del grads

    # jit: whole steps with and without the allreduce, alternating
    def step_of(tx):
        @jax.jit
        def step(params, opt_state):
            grads = jax.grad(loss_fn)(params, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state
        return step

    distributed, local = hvd.DistributedOptimizer(optax.sgd(1e-3)), optax.sgd(1e-3)
    runs = {"distributed": [step_of(distributed), params, distributed.init(params), []],
            "local": [step_of(local), params, local.init(params), []]}
    for step in range(args.warmup + args.steps):
        for name, run in runs.items():
            hvd.barrier()
            start = time.perf_counter()
            run[1], run[2] = jax.block_until_ready(run[0](run[1], run[2]))
            if step >= args.warmup:
                run[3].append(time.perf_counter() - start)

    eager = slowest(eager) * 1e3
    in_jit = slowest(in_jit) * 1e3
    reference = slowest(reference) * 1e3
    with_allreduce = slowest(runs["distributed"][3]) * 1e3
    without = slowest(runs["local"][3]) * 1e3
    if hvd.rank() == 0:
        print(f"# ringlet.jax gradient allreduce, np={hvd.size()}, {nbytes} bytes of float32 "
              f"gradients in {len(jax.tree_util.tree_leaves(params))} leaves, {args.steps} steps "
              f"(ms, median at the slowest rank)")
        print(f"eager_allreduce_ms {np.median(eager):.3f} (mean {eager.mean():.3f})")
        print(f"runtime_allreduce_ms {np.median(reference):.3f} (mean {reference.mean():.3f})")
        print(f"jit_allreduce_alone_ms {np.median(in_jit):.3f} (mean {in_jit.mean():.3f})")
        print(f"jit_step_with_allreduce_ms {np.median(with_allreduce):.3f}")
        print(f"jit_step_without_ms {np.median(without):.3f}")
        print(f"jit_allreduce_ms {np.median(with_allreduce - without):.3f}")
        print(f"ringlet-bench: allreduce -b {nbytes} -e {nbytes}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
