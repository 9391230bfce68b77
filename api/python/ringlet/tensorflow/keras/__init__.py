"""``import ringlet.tensorflow.keras as hvd``, the import Horovod's TensorFlow 2
Keras documentation teaches (``import horovod.tensorflow.keras as hvd``):
ringlet.keras under this name, the same functions, classes and callbacks."""

import sys

from ringlet.keras import *  # noqa: F401,F403
from ringlet.keras import __all__, callbacks, elastic  # noqa: F401

# ringlet.tensorflow.keras.callbacks (and .elastic) is ringlet.keras's module
# itself, imported under either name.
sys.modules[f"{__name__}.callbacks"] = callbacks
sys.modules[f"{__name__}.elastic"] = elastic
