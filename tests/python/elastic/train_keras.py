"""An elastic TensorFlow 2 Keras job for test_elastic.py: model.fit inside
hvd.elastic.run with KerasState and Horovod's elastic callbacks (commit
every 3 batches, batch and epoch kept in the state). It leaves in OUT
(argv[1]) the records train_torch.py leaves; each worker starts from
weights of its own (seeded by its name)."""

import json
import os
import sys
import time
import zlib

import numpy as np
import tensorflow as tf
import tf_keras as keras

import ringlet.tensorflow.keras as hvd

OUT = sys.argv[1]
EPOCHS, BATCHES = 3, 12
WORKER = os.environ["RINGLET_ELASTIC_WORKER"].replace(":", "_")


def record(name, value):
    with open(os.path.join(OUT, f"{WORKER}.{name}"), "a") as f:
        f.write(json.dumps(value) + "\n")


record("pid", os.getpid())
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.random.set_seed(zlib.crc32(WORKER.encode()))
hvd.init()
model = keras.Sequential([keras.layers.Dense(16, activation="tanh", input_shape=(8,)),
                          keras.layers.Dense(1)])
model.compile(loss="mse",
              optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)))
state = hvd.elastic.KerasState(model, batch=0, epoch=0)
state.register_reset_callbacks([lambda: record("reset", hvd.size())])


class Progress(keras.callbacks.Callback):
    def on_batch_end(self, batch, logs=None):
        record("progress", [state.epoch, state.batch + 1, hvd.size()])
        time.sleep(0.1)


def data(rank):
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((16 * BATCHES, 8)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(16).repeat()


@hvd.elastic.run
def train(state):
    record("world", {"size": hvd.size(), "epoch": state.epoch, "batch": state.batch})
    model.fit(data(hvd.rank()), steps_per_epoch=BATCHES, epochs=EPOCHS - state.epoch, verbose=0,
              callbacks=[hvd.elastic.UpdateBatchStateCallback(state),
                         hvd.elastic.UpdateEpochStateCallback(state),
                         hvd.elastic.CommitStateCallback(state, batches_per_commit=3),
                         Progress()])


train(state)
params = np.concatenate([w.ravel() for w in model.get_weights()])
record("final", {"size": hvd.size(), "rank": hvd.rank(), "params": params.tolist()})
hvd.shutdown()
