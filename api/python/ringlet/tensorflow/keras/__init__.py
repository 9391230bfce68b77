"""``import ringlet.tensorflow.keras as hvd``, the import Horovod's TensorFlow 2
Keras documentation teaches (``import horovod.tensorflow.keras as hvd``):
ringlet.keras under this name, the same functions, classes and callbacks, for
the same Keras."""

import sys

import ringlet.keras as _keras_api
from ringlet.keras import *  # noqa: F401,F403
from ringlet.keras import __all__, callbacks  # noqa: F401

# ringlet.tensorflow.keras.callbacks (and .elastic, where served) is
# ringlet.keras's module itself, imported under either name.
sys.modules[f"{__name__}.callbacks"] = callbacks
if hasattr(_keras_api, "elastic"):
    elastic = _keras_api.elastic
    sys.modules[f"{__name__}.elastic"] = elastic
