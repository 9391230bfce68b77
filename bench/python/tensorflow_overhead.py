"""ringlet.tensorflow's costs: hvd.allreduce per call (eager and inside
tf.function) at the sizes given, and a training step with
DistributedGradientTape run eagerly against the same step in tf.function:

    ringletrun -np 2 python bench/python/tensorflow_overhead.py 4K 1M 64M
"""

import sys
import time

import numpy as np

import ringlet.tensorflow as hvd  # tf.keras: Keras 3 unless tf-keras is chosen (docs/keras3.md)
import tensorflow as tf

UNITS = {"K": 1 << 10, "M": 1 << 20}


def parse_size(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def slowest_rank_times(times):
    """Each call's time at its slowest rank, in us."""
    return hvd.allreduce(tf.constant(times, tf.float64), op=hvd.Max, name="times").numpy() * 1e6


def timed(fn, iterations, warmup):
    times = []
    for i in range(warmup + iterations):
        start = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return slowest_rank_times(times)


def main():
    sizes = [parse_size(s) for s in (sys.argv[1:] or ["4K", "1M", "64M"])]
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    say = print if hvd.rank() == 0 else (lambda *a, **k: None)
    say(f"# hvd.allreduce (float32 sum) per call, np={hvd.size()}, us at the slowest rank")
    say(f"{'bytes':>12} {'iters':>6} {'eager_p50':>10} {'eager_mean':>11} {'graph_p50':>10} "
        f"{'graph_mean':>11}")
    for nbytes in sizes:
        x = tf.ones([nbytes // 4])
        graph = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="g"))
        iterations = max(10, min(500, (1 << 30) // nbytes // 4))
        eager = timed(lambda: hvd.allreduce(x, op=hvd.Sum, name="e").numpy(), iterations, 3)
        in_graph = timed(lambda: graph(x).numpy(), iterations, 3)
        say(f"{nbytes:>12} {iterations:>6} {np.percentile(eager, 50):>10.1f} {eager.mean():>11.1f} "
            f"{np.percentile(in_graph, 50):>10.1f} {in_graph.mean():>11.1f}", flush=True)

    model = tf.keras.Sequential([tf.keras.layers.Dense(512, activation="relu", input_shape=(784,)),
                                 tf.keras.layers.Dense(512, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    opt = tf.optimizers.SGD(0.01)
    loss_fn = tf.losses.SparseCategoricalCrossentropy(from_logits=True)
    images = tf.random.normal([64, 784])
    labels = tf.random.uniform([64], 0, 10, tf.int64)

    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    compiled = tf.function(step)
    eager = timed(lambda: step().numpy(), 50, 5)
    graph = timed(lambda: compiled().numpy(), 50, 5)
    say(f"# training step (MLP 784-512-512-10, batch 64, DistributedGradientTape), us at the "
        f"slowest rank: eager p50 {np.percentile(eager, 50):.0f} mean {eager.mean():.0f}; "
        f"tf.function p50 {np.percentile(graph, 50):.0f} mean {graph.mean():.0f}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
