"""An elastic PyTorch job for test_elastic.py (run as a script: the output
directory is argv[1]) and for the Ray and Spark suites (engine_jobs calls
train()): trains a small model with hvd.elastic.run and TorchState,
committing every few batches, and leaves in the output directory what the
tests check: each worker's pid, its progress, the sizes of the worlds it
trained in, and its final weights.

Each worker starts from weights of its own (seeded by its name), so that
equal final weights show that a worker that joined late received the state."""

import importlib
import json
import os
import sys
import time
import zlib

# ELASTIC_EPOCHS lengthens the job where a test needs time for hosts to come back.
EPOCHS, BATCHES, COMMIT_EVERY = int(os.environ.get("ELASTIC_EPOCHS", "3")), 12, 3


def worker_name():
    return (os.environ.get("RINGLET_ELASTIC_WORKER") or
            f"{os.environ['HOROVOD_HOSTNAME']}:{os.environ['HOROVOD_LOCAL_RANK']}").replace(":", "_")


def train(out, hvd, kill_worker=None, log=None):
    """Trains; returns (worker name, the final parameters). ``kill_worker``
    names a worker that SIGKILLs itself once, mid-epoch past a commit;
    ``log`` (ringlet.ray.ray_logger.log) receives rank 0's epochs."""
    import torch

    worker = worker_name()

    def record(name, value):
        with open(os.path.join(out, f"{worker}.{name}"), "a") as f:
            f.write(json.dumps(value) + "\n")

    record("pid", os.getpid())
    torch.set_num_threads(1)
    torch.manual_seed(zlib.crc32(worker.encode()))
    hvd.init()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: record("reset", hvd.size())])

    def batch_of(epoch, batch, rank):
        g = torch.Generator().manual_seed(epoch * 1000 + batch * 10 + rank)
        x = torch.randn(16, 8, generator=g)
        return x, x.sum(dim=1, keepdim=True)

    @hvd.elastic.run
    def loop(state):
        record("world", {"size": hvd.size(), "epoch": state.epoch, "batch": state.batch})
        while state.epoch < EPOCHS:
            while state.batch < BATCHES:
                x, y = batch_of(state.epoch, state.batch, hvd.rank())
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
                state.batch += 1
                record("progress", [state.epoch, state.batch, hvd.size()])
                if worker == kill_worker and (state.epoch, state.batch) == (1, 5):
                    os.kill(os.getpid(), 9)
                time.sleep(0.1)
                if state.batch % COMMIT_EVERY == 0:
                    state.commit()
            state.epoch += 1
            state.batch = 0
            state.commit()
            if log is not None and hvd.rank() == 0:
                log({"epoch": state.epoch, "size": hvd.size()})

    loop(state)
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    record("final", {"size": hvd.size(), "rank": hvd.rank(), "params": params.tolist()})
    hvd.shutdown()
    return worker, params.tolist()


if __name__ == "__main__":
    # horovod.torch where a benchmark compares with Horovod's elastic mode.
    train(sys.argv[1], importlib.import_module(os.environ.get("ELASTIC_TRAIN_MODULE",
                                                              "ringlet.torch")))
