"""PyTorch Lightning on the ringlet backend, run by every rank of a torchrun
job: Trainer(strategy=DDPStrategy(process_group_backend="ringlet")) trains
the examples' MNIST network (examples/pytorch_mnist.py) for a few steps on
the synthetic MNIST-shaped set, then the same Trainer on Gloo from the same
seed. The loss falls, every rank ends with the same weights, and they are
Gloo's within float32's rounding."""

import os
import sys

import lightning.pytorch as lightning
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.pytorch.strategies import DDPStrategy

import ringlet.torch  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import mnist_data  # noqa: E402
from pytorch_mnist import Net  # noqa: E402  (the examples' MNIST network)

STEPS = 24
BATCH = 32  # per rank


class MnistModule(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = Net()
        self.losses = []

    def training_step(self, batch, _):
        x, y = batch
        loss = F.nll_loss(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.5)


def loader():
    images, labels = mnist_data.synthetic(STEPS * BATCH * int(os.environ["WORLD_SIZE"]), seed=0)
    data = torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
    # Lightning adds a DistributedSampler (no shuffling, as this loader): each
    # rank trains on its own share.
    return torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)


def fit(backend):
    """The weights (one flat tensor) and this rank's losses after STEPS steps."""
    lightning.seed_everything(0, verbose=False)
    module = MnistModule()
    trainer = lightning.Trainer(
        accelerator="cpu", devices=int(os.environ["LOCAL_WORLD_SIZE"]), num_nodes=1,
        strategy=DDPStrategy(process_group_backend=backend), max_steps=STEPS,
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False)
    trainer.fit(module, train_dataloaders=loader())
    assert dist.get_backend() == backend
    assert trainer.global_step == STEPS
    weights = torch.cat([p.detach().reshape(-1) for p in module.net.parameters()])
    return weights, module.losses


def test_lightning_ddp_matches_gloo():
    ours, our_losses = fit("ringlet")
    # Lightning leaves the process group it made; the next Trainer makes its own.
    dist.destroy_process_group()
    theirs, their_losses = fit("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()

    assert len(our_losses) == STEPS
    first, last = sum(our_losses[:4]) / 4, sum(our_losses[-4:]) / 4
    assert last < 0.7 * first, f"rank {rank}: the loss went from {first:.3f} to {last:.3f}"
    # Both backends sum each gradient of two ranks in float32, where the order
    # of the sum may round the last bit apart; over 24 steps that stays far
    # below these tolerances.
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(our_losses), torch.tensor(their_losses),
                               rtol=1e-4, atol=1e-5)
    if rank == 0:
        print(f"\nrank 0: loss {first:.3f} over the first 4 steps, {last:.3f} over the last 4; "
              f"weights differ from Gloo's by at most {(ours - theirs).abs().max().item():.2e}")
    # Every rank ends with the same weights (gathered over Gloo's group).
    for flat in (ours, theirs):
        gathered = [torch.empty_like(flat) for _ in range(size)]
        dist.all_gather(gathered, flat)
        for r, other in enumerate(gathered):
            assert torch.equal(other, flat), f"rank {r}'s weights differ from rank {rank}'s"
    dist.destroy_process_group()
