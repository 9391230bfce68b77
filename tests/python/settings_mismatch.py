"""Ranks that disagree on a setting every rank of a job must share (run by
ringletrun with 3 ranks: rank 2 sets its own HOROVOD_FUSION_THRESHOLD,
RINGLET_ALGORITHM and RINGLET_CUDA_IPC_DIRECT_BYTES, which would make it run
other collectives than its peers, on the host and on GPUs): init() must fail
on every rank with a ConfigError that names each setting, the ranks and
their values, never hang or start.
Exits 0 when it did."""

import os

import ringlet.numpy as hvd
from ringlet.common import exceptions


def main():
    if os.environ["RINGLET_RANK"] == "2":
        os.environ["HOROVOD_FUSION_THRESHOLD"] = "0"
        os.environ["RINGLET_ALGORITHM"] = "ring"
        os.environ["RINGLET_CUDA_IPC_DIRECT_BYTES"] = "0"
    try:
        hvd.init()
    except exceptions.ConfigError as e:
        for expected in ("HOROVOD_FUSION_THRESHOLD is 134217728 on rank 0 but 0 on rank 2",
                         "RINGLET_ALGORITHM is auto on rank 0 but ring on rank 2",
                         "RINGLET_CUDA_IPC_DIRECT_BYTES is 4194304 on rank 0 but 0 on rank 2"):
            assert expected in str(e), f"{expected!r} missing from: {e}"
        assert not hvd.is_initialized()
        print("settings mismatch reported", flush=True)
        return
    raise AssertionError("init succeeded although the ranks' settings differ")


if __name__ == "__main__":
    main()
