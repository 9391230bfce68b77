"""DistributedOptimizer's arguments, checked as Horovod's Keras optimizers check
them; shared by the tf-keras and the Keras 3 optimizers (no framework here)."""

import dataclasses

from ringlet.common.basics import Average, Sum
from ringlet.common.process_sets import global_process_set


@dataclasses.dataclass(frozen=True)
class Settings:
    """DistributedOptimizer's arguments; ``compression`` None is the backend's
    ``Compression.none``."""

    name: object = None
    compression: object = None
    sparse_as_dense: bool = False
    gradient_predivide_factor: float = 1.0
    op: object = Average
    backward_passes_per_step: int = 1
    average_aggregated_gradients: bool = False
    groups: object = None
    process_set: object = global_process_set
    scale_local_gradients: bool = True
    device_dense: str = ""
    device_sparse: str = ""


def check(op, groups, backward_passes_per_step=1):
    """Refuses what Horovod's Keras optimizers refuse, with its exception types."""
    if op != Average and op != Sum:
        raise ValueError(f"DistributedOptimizer: op must be Average or Sum, not {op!r}")
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError(f"DistributedOptimizer: groups must be a positive integer or a list "
                         f"of lists of tf.Variable, not {groups!r}")
    if int(backward_passes_per_step) < 1:
        raise ValueError(f"DistributedOptimizer: backward_passes_per_step must be at least 1, "
                         f"not {backward_passes_per_step}")
