"""The one seam between ringlet.keras's Keras 3 code and the backend Keras runs
on: each served backend is a module of the same few functions, and nothing
else in ringlet.keras.keras3 calls a framework's collectives.

A backend module provides:

- ``GradientReducer(settings)``: called as ``reducer(grads, variables)``, the
  gradients reduced over the set (None stays None; the local variables'
  divided by the set's size when ``scale_local_gradients``), and
  ``reducer.register_local_var(var)``;
- ``allreduce``, ``allgather``, ``broadcast``, ``reducescatter`` on backend
  tensors (Horovod's arguments);
- ``broadcast_variables(variables, root_rank, process_set)`` on Keras variables;
- ``is_sparse(grad)`` and ``densify(grad)``, for the backend's sparse gradients;
- ``cond(pred, true_fn, false_fn, state)``, that runs collectives in its
  branches, which may assign the Keras variables of ``state``;
- ``Compression``, ``barrier``, ``join``, ``broadcast_object``,
  ``allgather_object`` as the backend's Horovod module has them.

Served: TensorFlow (over ringlet.tensorflow), PyTorch (ringlet.torch) and JAX
(ringlet.jax).
"""

import importlib
import importlib.metadata
import os

_SERVED = {"tensorflow": "ringlet.keras.keras3.tensorflow_backend",
           "torch": "ringlet.keras.keras3.torch_backend",
           "jax": "ringlet.keras.keras3.jax_backend"}


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions_seen():
    """What this process has, for error messages."""
    return (f"keras {_version('keras')}, tensorflow {_version('tensorflow')}, "
            f"tf-keras {_version('tf-keras')}, torch {_version('torch')}, "
            f"jax {_version('jax')}")


def load(keras):
    """The backend module for the backend ``keras`` (Keras 3) runs on; an
    ImportError naming the backend and the versions seen where it is not served."""
    version = getattr(keras, "__version__", "unknown")
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) < 3:
        raise ImportError(
            f"ringlet.keras: the 'keras' module here is Keras {version}, neither Keras 3 nor "
            f"tf-keras chosen ({versions_seen()}); install Keras 3 or set "
            f"TF_USE_LEGACY_KERAS=1 with tf-keras installed")
    backend = keras.backend.backend()
    if backend not in _SERVED:
        raise ImportError(
            f"ringlet.keras serves Keras 3 on the {', '.join(sorted(_SERVED))} backends only, "
            f"and this process runs Keras {version} on the '{backend}' backend "
            f"(KERAS_BACKEND={os.environ.get('KERAS_BACKEND', '')!r}; {versions_seen()}). "
            f"Use KERAS_BACKEND=tensorflow, torch or jax")
    return importlib.import_module(_SERVED[backend])
