"""Which Keras ringlet.keras and ringlet.tensorflow serve in this process: the
one the program chose, decided once, before TensorFlow is imported by Ringlet.

tf-keras (the Keras 2 API) where the program chose it: ``TF_USE_LEGACY_KERAS``
set as TensorFlow reads it (``1``, ``true``, ``True``), or ``tf_keras``
imported already; then ``TF_USE_LEGACY_KERAS=1`` is set (unless set), so that
``tf.keras`` is tf-keras too. Otherwise Keras 3, what ``import keras`` and
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
        legacy = os.environ.get("TF_USE_LEGACY_KERAS") in _LEGACY_VALUES
        if legacy or "tf_keras" in sys.modules:
            os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
            _chosen = TF_KERAS
        else:
            _chosen = KERAS3
    return _chosen


def reason():
    """Why choose() chose what it did, for error messages."""
    if choose() == TF_KERAS:
        return (f"tf-keras, since TF_USE_LEGACY_KERAS="
                f"{os.environ.get('TF_USE_LEGACY_KERAS')!r} or tf_keras was imported")
    return "Keras 3, since neither TF_USE_LEGACY_KERAS=1 was set nor tf_keras imported"
