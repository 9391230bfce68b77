"""MNIST for the examples: the real set when a directory holding it is
given, otherwise a synthetic set of the same shape (28x28 grey images, ten
classes) that a small network learns within an epoch, so that the examples
run where nothing can be downloaded."""

import os

import numpy as np


def synthetic(samples, seed):
    """Images of one of ten fixed coarse patterns (7x7 blocks of 4x4 pixels)
    under as much noise as signal, and their labels."""
    coarse = np.random.default_rng(1234).standard_normal((10, 7, 7)).astype(np.float32)
    templates = 2.0 * np.kron(coarse, np.ones((4, 4), dtype=np.float32))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, samples)
    noise = rng.standard_normal((samples, 28, 28), dtype=np.float32)
    images = templates[labels] + noise
    return images[:, None, :, :].astype(np.float32), labels.astype(np.int64)


def _read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, train, synthetic_samples=6000, seed=0):
    """(images float32 N x 1 x 28 x 28, normalized; labels int64 N)."""
    if data_dir:
        prefix = "train" if train else "t10k"
        for sub in ("", "MNIST/raw", "raw"):
            images = os.path.join(data_dir, sub, f"{prefix}-images-idx3-ubyte")
            labels = os.path.join(data_dir, sub, f"{prefix}-labels-idx1-ubyte")
            if os.path.exists(images) and os.path.exists(labels):
                x = _read_idx(images).astype(np.float32) / 255.0
                x = ((x - 0.1307) / 0.3081)[:, None, :, :]
                return x.astype(np.float32), _read_idx(labels).astype(np.int64)
        raise FileNotFoundError(f"no MNIST idx files under {data_dir}")
    return synthetic(synthetic_samples if train else synthetic_samples // 6, seed + (0 if train
                                                                                   else 1))
