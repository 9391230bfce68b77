"""Which Keras ringlet.keras and ringlet.tensorflow serve in this process: the
one the program chose, decided once, before TensorFlow is imported by Ringlet.

tf-keras (the Keras 2 API) where the program chose it: ``TF_USE_LEGACY_KERAS``
set as TensorFlow reads it (``1``, ``true``, ``True``), or, with it unset,
``tf_keras`` imported already (then ``TF_USE_LEGACY_KERAS=1`` is set, so that
``tf.keras`` is tf-keras too). Otherwise Keras 3, what ``import keras`` and
``tf.keras`` give with TensorFlow 2.16 and later. ``import keras`` itself
cannot tell: importing TensorFlow imports Keras 3 as well.

Nothing here imports a framework.
"""

import os
import sys

TF_KERAS = "tf_keras"
KERAS3 = "keras3"

# TensorFlow's own test (tensorflow/python/util/lazy_loader.py).
_LEGACY_VALUES = ("1", "true", "True")

_chosen = None


def choose():
    """TF_KERAS or KERAS3, decided at the first call and the same afterwards."""
    global _chosen
    if _chosen is None:
        flag = os.environ.get("TF_USE_LEGACY_KERAS", "")
        if flag in _LEGACY_VALUES:
            _chosen = TF_KERAS
        elif flag:  # set, and not to tf-keras: tf.keras is Keras 3
            _chosen = KERAS3
        elif "tf_keras" in sys.modules:
            os.environ["TF_USE_LEGACY_KERAS"] = "1"
            _chosen = TF_KERAS
        else:
            _chosen = KERAS3
    return _chosen


def reason():
    """Why choose() chose what it did, for error messages."""
    flag = os.environ.get("TF_USE_LEGACY_KERAS")
    if choose() == TF_KERAS:
        return f"tf-keras (TF_USE_LEGACY_KERAS={flag!r}, or tf_keras imported first)"
    return (f"Keras 3 (TF_USE_LEGACY_KERAS={flag!r}: not 1, and tf_keras not imported "
            f"first with it unset)")
