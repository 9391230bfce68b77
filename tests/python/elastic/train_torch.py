"""An elastic PyTorch job for test_elastic.py: trains a small model with
hvd.elastic.run and TorchState, committing every few batches, and leaves in
OUT (argv[1]) what the test checks: each worker's pid, its progress, the
sizes of the worlds it trained in, and its final weights.

Each worker starts from weights of its own (seeded by its name), so that
equal final weights show that a worker that joined late received the state."""

import importlib
import json
import os
import sys
import time
import zlib

import torch

# horovod.torch where a benchmark compares with Horovod's elastic mode.
hvd = importlib.import_module(os.environ.get("ELASTIC_TRAIN_MODULE", "ringlet.torch"))

OUT = sys.argv[1]
EPOCHS, BATCHES, COMMIT_EVERY = 3, 12, 3
WORKER = (os.environ.get("RINGLET_ELASTIC_WORKER") or
          f"{os.environ['HOROVOD_HOSTNAME']}:{os.environ['HOROVOD_LOCAL_RANK']}").replace(":", "_")


def record(name, value):
    with open(os.path.join(OUT, f"{WORKER}.{name}"), "a") as f:
        f.write(json.dumps(value) + "\n")


record("pid", os.getpid())
torch.set_num_threads(1)
torch.manual_seed(zlib.crc32(WORKER.encode()))
hvd.init()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     named_parameters=model.named_parameters())
state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
state.register_reset_callbacks([lambda: record("reset", hvd.size())])


def batch_of(epoch, batch, rank):
    g = torch.Generator().manual_seed(epoch * 1000 + batch * 10 + rank)
    x = torch.randn(16, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True)


@hvd.elastic.run
def train(state):
    record("world", {"size": hvd.size(), "epoch": state.epoch, "batch": state.batch})
    while state.epoch < EPOCHS:
        while state.batch < BATCHES:
            x, y = batch_of(state.epoch, state.batch, hvd.rank())
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            state.batch += 1
            record("progress", [state.epoch, state.batch, hvd.size()])
            time.sleep(0.1)
            if state.batch % COMMIT_EVERY == 0:
                state.commit()
        state.epoch += 1
        state.batch = 0
        state.commit()


train(state)
params = torch.cat([p.detach().flatten() for p in model.parameters()])
record("final", {"size": hvd.size(), "rank": hvd.rank(), "params": params.tolist()})
hvd.shutdown()
