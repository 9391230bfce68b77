"""Horovod's Keras callbacks for tf-keras's ``model.fit()`` (Keras 3: keras3/callbacks.py)."""

import tensorflow as tf
import tf_keras as keras

from ringlet.common.process_sets import global_process_set
from ringlet.keras import learning_rate_schedule as _schedule
from ringlet.tensorflow import mpi_ops as _ops
from ringlet.tensorflow.functions import broadcast_variables

_K = keras.backend


def run_in_session(fetches, feed_dict=None):
    """``fetches`` (tensors or ops) as Horovod's Keras functions give them: as they are
    when eager; in a ``tf.compat.v1`` graph, run in Keras's session, where Keras
    trains such a graph (and where its variables live)."""
    if tf.executing_eagerly():
        return fetches
    return tf.compat.v1.keras.backend.get_session().run(fetches, feed_dict=feed_dict)


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """After the first batch (once the optimizer has made its slots), every rank takes
    ``root_rank``'s model variables, but ``local_variables`` (a tf.Variable or a list of
    them), and all of its optimizer's variables."""

    def __init__(self, root_rank, device="", local_variables=None, *,
                 process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.process_set = process_set
        self.broadcast_done = False
        self._local_vars = set()
        if local_variables is None:
            local_variables = []
        elif isinstance(local_variables, tf.Variable):
            local_variables = [local_variables]
        elif not all(isinstance(var, tf.Variable) for var in local_variables):
            raise ValueError("BroadcastGlobalVariablesCallback: local_variables must be "
                             "tf.Variable objects")
        for var in local_variables:
            self.register_local_var(var)

    def register_local_var(self, var):
        """Leaves ``var`` out of the broadcast: each rank keeps its own value."""
        self._local_vars.add(var.ref())

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        with tf.device(self.device):
            shared = [v for v in self.model.variables if v.ref() not in self._local_vars]
            optimizer = self.model.optimizer
            variables = optimizer.variables() if callable(optimizer.variables) else \
                optimizer.variables
            # Eagerly these assign at once; in a graph they are ops for Keras's session.
            run_in_session([broadcast_variables(shared, self.root_rank, self.process_set),
                            broadcast_variables(variables, self.root_rank, self.process_set)])
        self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """At the end of each epoch, every entry of the logs becomes its average over the
    ranks, computed in Keras's float type (float32) as Horovod does (place it before
    callbacks that read them, such as checkpoints or early stopping)."""

    def __init__(self, device="", *, process_set=global_process_set):
        super().__init__()
        self.device = device
        self.process_set = process_set
        self._graph_ops = {}  # key -> (the value fed, its average), in a graph

    def _average(self, key, value):
        name = f"metric.{key}"
        if tf.executing_eagerly():
            return _ops.allreduce(_K.constant(value), name=name,
                                  process_set=self.process_set).numpy()
        # In a graph, one op per key, built once and fed every epoch.
        fed, average = self._graph_ops.get(key, (None, None))
        if fed is None or fed.graph is not tf.compat.v1.get_default_graph():
            fed = tf.compat.v1.placeholder(_K.floatx(), shape=None)
            average = _ops.allreduce(fed, name=name, process_set=self.process_set)
            self._graph_ops[key] = (fed, average)
        return run_in_session(average, {fed: value})

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        # Every rank reduces the same keys in the same (sorted) order.
        with tf.device(self.device):
            for key in sorted(logs):
                logs[key] = self._average(key, logs[key])


class _OptimizerValues:
    """How tf-keras's optimizers' rate (``lr``) and momentum are read and set."""

    rate_attribute = "lr"

    @staticmethod
    def read(optimizer, attribute):
        return _K.get_value(getattr(optimizer, attribute))

    @staticmethod
    def write(optimizer, attribute, value):
        current = getattr(optimizer, attribute)
        if hasattr(current, "assign"):
            _K.set_value(current, value)
        else:  # the new optimizers keep momentum as a number
            setattr(optimizer, attribute, value)


class LearningRateScheduleCallback(_OptimizerValues, _schedule.LearningRateSchedule,
                                   keras.callbacks.Callback):
    __doc__ = _schedule.LearningRateSchedule.__doc__


class LearningRateWarmupCallback(_OptimizerValues, _schedule.LearningRateWarmup,
                                 keras.callbacks.Callback):
    __doc__ = _schedule.LearningRateWarmup.__doc__


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """A ModelCheckpoint that keeps only the best model by ``monitor``; its
    ``filepath`` is set later by whoever runs the training."""

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                 save_freq="epoch"):
        super().__init__(filepath=None, monitor=monitor, verbose=verbose, save_best_only=True,
                         save_weights_only=save_weights_only, mode=mode, save_freq=save_freq)
