"""``import ringlet.keras as hvd`` (and ``import ringlet.tensorflow.keras as
hvd``, the same module's names): the API of horovod.keras and
horovod.tensorflow.keras together, on Ringlet, for the Keras the program chose
(ringlet.common.keras_selection):

- tf-keras (the Keras 2 API), where ``TF_USE_LEGACY_KERAS=1`` is set or
  ``tf_keras`` was imported first: ringlet.keras.tf_keras_api;
- otherwise Keras 3, on the backends ringlet.keras.keras3.backends serves
  (TensorFlow, PyTorch, JAX): ringlet.keras.keras3.

``hvd.callbacks`` (``ringlet.keras.callbacks``) is the chosen one's module.
"""

import sys as _sys

from ringlet.common import keras_selection as _keras_selection

if _keras_selection.choose() == _keras_selection.KERAS3:
    from ringlet.keras.keras3 import *  # noqa: F401,F403
    from ringlet.keras.keras3 import __all__, callbacks  # noqa: F401
    # Under Keras 3, ringlet.keras.callbacks names Keras 3's callbacks, whichever
    # way it is imported; the tf-keras file beside this one stays unloaded.
    _sys.modules[f"{__name__}.callbacks"] = callbacks
else:
    from ringlet.keras.tf_keras_api import *  # noqa: F401,F403
    from ringlet.keras.tf_keras_api import __all__, callbacks, elastic  # noqa: F401
