"""ringlet.tensorflow on GPU tensors, for any number of ranks, each seeing one
GPU (tf.config.set_visible_devices(gpus[local_rank])): every collective
eagerly, allreduce and allgather inside a tf.function, and a Keras model.fit
with hvd.DistributedOptimizer, each result checked against arithmetic done
on the host. Rank 0's timeline must then show every collective between
start_timeline and stop_timeline (the checks' own, the gradients' and the
broadcast of the model's variables) run by a device algorithm (an NCCL_ or
CUDA_IPC_ step) and none by a host one: no tensor went through host memory.

Run by tests/gpu/device-check.sh under ringletrun, with
HOROVOD_GPU_OPERATIONS=NCCL (one rank per GPU) or RING (ranks may share a
GPU), with the op library or with RINGLET_TENSORFLOW_OPS=0 (the py_function
path), and by ctest, which reports it SKIPPED here with the reason.
Prints "tensorflow gpu collectives ok" when every check held; exit 77 (with
the reason) where TensorFlow or a GPU is missing.
"""

import ctypes
import json
import os
import sys
import tempfile

import numpy as np

# Its Keras part is written for tf.keras as tf-keras: chosen before TensorFlow
# is imported (docs/keras3.md).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

SKIP = 77
# Steps of the host algorithms (docs/timeline.md): none may run a GPU tensor.
HOST_STEPS = ("RING_", "DIRECT_", "ONESTEP_", "LOCAL_", "CROSS_", "HIERARCHICAL_", "MPI_",
              "STAGED_", "PRESCALE")
DEVICE_STEPS = ("NCCL_", "CUDA_IPC_")


def cuda_reason():
    """Why CUDA's driver offers no device here, in its own words."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"CUDA's driver library cannot be loaded: {e}"
    rc = cuda.cuInit(0)
    count = ctypes.c_int(0)
    if rc == 0:
        rc = cuda.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        text = ctypes.c_char_p()
        cuda.cuGetErrorString(rc, ctypes.byref(text))
        return f"CUDA: {(text.value or b'error %d' % rc).decode()}"
    return f"CUDA lists {count.value} device(s), none usable by TensorFlow"


def skip(why):
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


def main():
    try:
        import tensorflow as tf
    except ImportError as e:
        skip(f"TensorFlow is not installed: {e}")
    if not tf.test.is_built_with_cuda():
        skip("this TensorFlow is built without CUDA")
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        skip(f"TensorFlow sees no GPU ({cuda_reason()})")

    import ringlet.tensorflow as hvd
    import ringlet.tensorflow.keras as hvd_keras

    hvd.init()
    r, n = hvd.rank(), hvd.size()
    ops = os.environ.get("HOROVOD_GPU_OPERATIONS", "NCCL").upper()
    if ops == "NCCL" and hvd.local_size() > len(gpus):
        skip(f"NCCL runs one rank per GPU: {len(gpus)} GPU(s) here for "
             f"{hvd.local_size()} ranks")
    # Each process sees one GPU: TensorFlow's /GPU:0 is CUDA's device local_rank.
    tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    timeline = os.environ.get("RINGLET_TEST_TIMELINE") or os.path.join(
        tempfile.gettempdir(), f"ringlet-tf-gpu-{os.getpid()}.json")
    timeline = hvd.broadcast_object(timeline, root_rank=0, name="timeline path")
    hvd.start_timeline(timeline)
    ranks = np.arange(n, dtype=np.float64)

    def check(got, want, what):
        assert "GPU" in got.device, f"{what}: the result is on {got.device}, not the GPU"
        np.testing.assert_array_equal(got.numpy(), want, err_msg=what)

    with tf.device("/GPU:0"):
        # ---- eagerly
        base = np.arange(1 << 18, dtype=np.float32)
        x = tf.constant(base + r)
        check(hvd.allreduce(x, op=hvd.Sum, name="tf.eager.sum"), base * n + ranks.sum(),
              "allreduce")
        check(hvd.allreduce(x, op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5,
                            name="tf.eager.avg"), base + ranks.mean(), "allreduce with scales")
        parts = [tf.fill([m], float(r + 1)) for m in (1, 3, 4097)]
        for got, m in zip(hvd.grouped_allreduce(parts, op=hvd.Sum, name="tf.eager.grouped"),
                          (1, 3, 4097)):
            check(got, np.full(m, (ranks + 1).sum(), np.float32), "grouped allreduce")
        h = tf.constant((base[:4099] + r).astype(np.float16))
        check(hvd.allreduce(h, op=hvd.Max, name="tf.eager.max"),
              (base[:4099] + n - 1).astype(np.float16), "float16 max")
        rows = tf.fill([r + 1, 3], float(r))
        want = np.concatenate([np.full((i + 1, 3), float(i), np.float32) for i in range(n)])
        check(hvd.allgather(rows, name="tf.eager.allgather"), want, "allgather")
        flags = tf.constant([True, r % 2 == 0])
        check(hvd.allgather(flags, name="tf.eager.allgather.bool"),
              np.array([v for i in range(n) for v in (True, i % 2 == 0)]), "bool allgather")
        check(hvd.broadcast(tf.fill([1001], float(r + 7)), root_rank=n - 1,
                            name="tf.eager.broadcast"), np.full(1001, n + 6, np.float32),
              "broadcast")
        rs = tf.constant(np.tile(np.arange(2 * n, dtype=np.float32)[:, None], (1, 5)) * (r + 1))
        full = np.tile(np.arange(2 * n, dtype=np.float32)[:, None], (1, 5)) * (ranks + 1).sum()
        check(hvd.reducescatter(rs, op=hvd.Sum, name="tf.eager.reducescatter"),
              full[2 * r:2 * r + 2], "reducescatter")
        sent = tf.constant(np.arange(n * 2, dtype=np.float32) + 100 * r)
        got, received = hvd.alltoall(sent, splits=[2] * n, name="tf.eager.alltoall")
        check(got, np.concatenate([np.arange(2 * r, 2 * r + 2) + 100 * i
                                   for i in range(n)]).astype(np.float32), "alltoall")
        np.testing.assert_array_equal(np.asarray(received), [2] * n)

        # ---- inside a tf.function
        @tf.function
        def step(t):
            return (hvd.allreduce(t, op=hvd.Sum, name="tf.function.sum"),
                    hvd.allgather(t[:2], name="tf.function.allgather"))
        for i in range(3):
            summed, gathered = step(x + i)
            check(summed, base * n + ranks.sum() + n * i, f"tf.function allreduce {i}")
            check(gathered, np.concatenate([base[:2] + k + i for k in range(n)]),
                  f"tf.function allgather {i}")

        # ---- Keras model.fit
        keras = tf.keras  # tf-keras: chosen with TF_USE_LEGACY_KERAS at the top
        keras.utils.set_random_seed(1234 + r)  # the broadcast must make them equal
        model = keras.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                                  keras.layers.Dense(1)])
        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)),
                      loss="mse")
        data = np.random.default_rng(r).normal(size=(64, 8)).astype(np.float32)
        history = model.fit(data, data.sum(axis=1, keepdims=True), batch_size=16, epochs=2,
                            verbose=0,
                            callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0)])
        assert np.isfinite(history.history["loss"]).all(), history.history
        for i, w in enumerate(model.get_weights()):
            every = hvd.allgather(tf.constant(w[None]), name=f"tf.keras.weight.{i}").numpy()
            assert (every == every[0]).all(), f"weight {i} differs between ranks after fit"

    hvd.stop_timeline()
    hvd.barrier()
    if r == 0:
        check_timeline(timeline)
    hvd.shutdown()
    print("tensorflow gpu collectives ok", flush=True)


def check_timeline(path):
    """Every row ran a device step and no host step."""
    with open(path) as f:
        events = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    steps = {}
    for e in events:
        if e.get("ph") == "B":
            steps.setdefault(names.get(e["pid"], str(e["pid"])), set()).add(e["name"])
    ours = steps
    assert any("tf." in name for name in ours), f"no collective of ours in {path}: {sorted(ours)}"
    for name, s in sorted(ours.items()):
        host = sorted(x for x in s if x.startswith(HOST_STEPS))
        assert not host, f"{name} ran host steps {host} (all: {sorted(s)})"
        assert any(x.startswith(DEVICE_STEPS) for x in s), \
            f"{name} ran no NCCL_ or CUDA_IPC_ step: {sorted(s)}"
    print(f"timeline: {len(ours)} tensors, all on the device "
          f"({sorted({x for s in ours.values() for x in s if x.startswith(DEVICE_STEPS)})})",
          flush=True)


if __name__ == "__main__":
    main()
