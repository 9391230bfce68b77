"""Trains a small convolutional network on MNIST with ringlet.torch, in
Horovod's shape: launch with `ringletrun -np 2 python examples/pytorch_mnist.py`.

Without --data-dir it trains on a synthetic MNIST-shaped set. --check makes
it exit non-zero unless the loss fell and every rank ends with the same
parameters (what CI runs)."""

import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed

import ringlet.torch as hvd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_data  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def parse_args():
    p = argparse.ArgumentParser(description="ringlet.torch MNIST example")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--test-batch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01, help="learning rate for one rank")
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--data-dir", default=None, help="directory with MNIST's idx files")
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many")
    p.add_argument("--fp16-allreduce", action="store_true")
    p.add_argument("--gradient-predivide-factor", type=float, default=1.0)
    p.add_argument("--checkpoint", default=None, help="rank 0 saves the model here")
    p.add_argument("--no-cuda", action="store_true",
                   help="train on the CPU even where CUDA is available")
    p.add_argument("--check", action="store_true",
                   help="fail unless the loss fell and the ranks agree on the parameters")
    return p.parse_args()


def main():
    args = parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # one core per rank
    if args.cuda:
        # One GPU per rank, by local rank (NCCL runs one rank per device).
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.manual_seed(args.seed)
    device = torch.device("cuda") if args.cuda else torch.device("cpu")
    if hvd.rank() == 0:
        print(f"training on {device} with {hvd.size()} rank(s)", flush=True)

    x, y = mnist_data.load(args.data_dir, train=True)
    train_set = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    # Each rank reads its own part of the data.
    sampler = torch.utils.data.distributed.DistributedSampler(
        train_set, num_replicas=hvd.size(), rank=hvd.rank())
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    tx, ty = mnist_data.load(args.data_dir, train=False)
    test_set = torch.utils.data.TensorDataset(torch.from_numpy(tx), torch.from_numpy(ty))
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_set, num_replicas=hvd.size(), rank=hvd.rank())
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.test_batch_size,
                                              sampler=test_sampler)

    model = Net().to(device)
    # The learning rate grows with the number of ranks, as the batch does.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    # Every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none,
        op=hvd.Average, gradient_predivide_factor=args.gradient_predivide_factor)

    losses = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        sampler.set_epoch(epoch)
        for step, (data, target) in enumerate(loader):
            if args.max_steps and step >= args.max_steps:
                break
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % args.log_interval == 0 and hvd.rank() == 0:
                print(f"train epoch {epoch} [{step * len(data)}/{len(sampler)}] "
                      f"loss {loss.item():.4f}", flush=True)
        evaluate(model, test_loader, test_sampler, device)

    if hvd.rank() == 0 and args.checkpoint:
        torch.save(model.state_dict(), args.checkpoint)
    if args.check:
        check(model, losses)
    hvd.shutdown()


def evaluate(model, loader, sampler, device):
    model.eval()
    loss_sum, correct = torch.zeros(1, device=device), torch.zeros(1, device=device)
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            out = model(data)
            loss_sum += F.nll_loss(out, target, reduction="sum")
            correct += (out.argmax(1) == target).sum()
    # The averages over every rank's share of the test set.
    loss = hvd.allreduce(loss_sum / len(sampler), name="avg_loss")
    accuracy = hvd.allreduce(correct / len(sampler), name="avg_accuracy")
    if hvd.rank() == 0:
        print(f"test set: average loss {loss.item():.4f}, accuracy {100 * accuracy.item():.1f}%",
              flush=True)


def check(model, losses):
    window = max(1, min(10, len(losses) // 4))
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    everyone = hvd.allgather(flat.unsqueeze(0), name="check.parameters")
    identical = bool((everyone == everyone[0]).all())
    print(f"rank {hvd.rank()}: loss {first:.4f} -> {last:.4f}; parameters identical on every "
          f"rank: {'yes' if identical else 'no'}", flush=True)
    if not (last < first and identical):
        hvd.shutdown()
        sys.exit(1)


if __name__ == "__main__":
    main()
