"""The functions the Spark and Ray suites run as Ringlet jobs (each rank
calls hvd.init() itself, as a Horovod training function does), what the
suites expect of their results, worked out here from the ranks' inputs, and
the Spark suites' session."""

import os
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def local_spark_session(master, name):
    """A SparkSession of ``master`` (local mode) on loopback, its UI off and
    its log quiet."""
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master(master).appName(name)
               .config("spark.ui.enabled", "false")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def collectives_job(salt):
    """Allreduce, allgather, broadcast and alltoall of values only this rank
    knows; returns what this rank saw."""
    import numpy as np
    import ringlet.numpy as hvd

    hvd.init()
    try:
        rank, size = hvd.rank(), hvd.size()
        mine = np.array([rank + 1, salt * (rank + 1)], dtype=np.int64)
        return {
            "rank": rank,
            "size": size,
            "local_rank": hvd.local_rank(),
            "local_size": hvd.local_size(),
            "pid": os.getpid(),
            "sum": hvd.allreduce(mine, op=hvd.Sum).tolist(),
            "average": hvd.allreduce(mine.astype(np.float64), op=hvd.Average).tolist(),
            "gathered": hvd.allgather(np.full((rank + 1,), rank, dtype=np.int32)).tolist(),
            "broadcast": hvd.broadcast(np.array([salt + rank]), root_rank=size - 1).tolist(),
            "alltoall": hvd.alltoall(np.arange(size, dtype=np.int32) + 10 * rank).tolist(),
        }
    finally:
        hvd.shutdown()


def expected_collectives(size, salt):
    """What every rank of ``collectives_job(salt)`` must see at ``size`` ranks."""
    total = size * (size + 1) // 2
    return {
        "sum": [total, salt * total],
        "average": [total / size, salt * total / size],
        "gathered": [r for r in range(size) for _ in range(r + 1)],
        "broadcast": [salt + size - 1],
        "alltoall": lambda rank: [rank + 10 * r for r in range(size)],
    }


def check_collectives(results, size, salt):
    """Fails unless ``results`` (by rank) are those of a job of ``size`` ranks."""
    want = expected_collectives(size, salt)
    assert [r["rank"] for r in results] == list(range(size))
    assert len({r["pid"] for r in results}) == size, "each rank must be a process of its own"
    for r in results:
        assert r["size"] == size
        assert r["local_size"] == size and r["local_rank"] == r["rank"]  # one host
        assert r["sum"] == want["sum"]
        assert r["average"] == want["average"]
        assert r["gathered"] == want["gathered"]
        assert r["broadcast"] == want["broadcast"]
        assert r["alltoall"] == want["alltoall"](r["rank"])


def failing_job(bad_rank):
    """Rank ``bad_rank`` raises its own error; the others go on to an
    allreduce that cannot complete without it."""
    import numpy as np
    import ringlet.numpy as hvd

    hvd.init()
    if hvd.rank() == bad_rank:
        raise ValueError(f"the data of rank {bad_rank} is corrupt (boom-{bad_rank})")
    hvd.allreduce(np.ones(4), op=hvd.Sum)
    return "unreachable"


def training_job(steps):
    """Trains the MNIST example's model on its synthetic set with
    DistributedOptimizer; returns (first loss, last loss, parameters)."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, EXAMPLES)
    import mnist_data
    from pytorch_mnist import Net
    import ringlet.torch as hvd

    hvd.init()
    try:
        torch.manual_seed(7)
        torch.set_num_threads(1)
        images, labels = map(torch.from_numpy, mnist_data.synthetic(64 * steps * hvd.size(), 3))
        model = Net()
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.5),
            named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        losses = []
        for step in range(steps):
            start = (step * hvd.size() + hvd.rank()) * 64
            x, y = images[start:start + 64], labels[start:start + 64]
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        return losses[0], losses[-1], params.tolist()
    finally:
        hvd.shutdown()


def check_training(results, size):
    """Fails unless every rank ends with the same parameters and the loss fell."""
    assert len(results) == size
    first = results[0][2]
    for rank, (_, _, params) in enumerate(results):
        assert params == first, f"rank {rank}'s parameters differ from rank 0's"
    start = sum(r[0] for r in results) / size
    end = sum(r[1] for r in results) / size
    assert end < start, f"the loss did not fall: {start:.3f} -> {end:.3f}"


def elastic_training_job(out, kill_worker=None, log=None):
    """The elastic suite's PyTorch job (elastic/train_torch.py) as a
    function: returns (worker name, final parameters)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic"))
    import train_torch
    import ringlet.torch as hvd

    return train_torch.train(out, hvd, kill_worker=kill_worker, log=log)
