"""ElasticSampler: a DistributedSampler that an elastic job can resume
(Horovod's). It counts the samples the job has processed this epoch (every
rank's, through record_batch); after a reset, the samples not yet processed
are split anew among the ranks of the new world. TorchState saves, restores
and synchronizes it as it does models."""

import math
import random

import torch.utils.data

from ringlet.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """``ElasticSampler(dataset, shuffle=True, seed=0)``: call
    ``record_batch(batch_idx, batch_size)`` after each batch and
    ``set_epoch(epoch)`` at the end of each epoch (not the start, so that a
    reset within an epoch does not process its samples again). The seed
    must be the same on every rank."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # samples of this epoch processed by the whole job
        self.reset()

    def set_epoch(self, epoch):
        """A new epoch: a new order (with shuffle) and nothing processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts a batch of ``batch_size`` samples done on every rank."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Splits the samples not processed yet among the ranks of the world now."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        # Padded from its own start to a multiple of the ranks, as
        # DistributedSampler does, then every num_replicas-th from this rank's.
        padded = self.remaining_indices + \
            self.remaining_indices[:self.total_size - len(self.remaining_indices)]
        return iter(padded[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
