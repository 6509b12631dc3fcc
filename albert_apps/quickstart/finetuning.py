"""Short fine-tuning runs of one classifier, compiled once.

The quickstart fine-tunes the exported encoder on a downstream task, and a
study may fine-tune from several initializations and seeds: runs of the
same model shape. Building and compiling a Keras model costs more than a
run's 100 steps, so `Finetuner` builds the classifier (`classifier`: the encoder, then
dropout and a dense layer on `pooled_output`) once, compiles its training
step with XLA, and before each run puts back the encoder weights it is given,
a head initialized from the run's seed, a fresh optimizer state and the
run's dropout seeds. A run is then the same as on a newly built model.

    finetuner = Finetuner(AlbertEncoder(config), num_classes=4,
                          num_train_steps=100)
    result = finetuner.run(train_x, train_y, dev_x, dev_y, seed=0,
                           encoder_weights=pretrained.get_weights())
    result["dev_accuracy"]

The training recipe is the official fine-tuning one: AdamW with a linear
warmup and decay, clipping at global norm 1.0.
"""

import time

import keras
import numpy as np
import tensorflow as tf

from albert_tf.layers.task_heads import ClassificationHead
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.training import baselines
from albert_tf.training import lamb
from foundation import progress

HEAD_NAME = "classifier"


def classifier(encoder, num_classes=2, dropout=0.1):
    """The encoder (an exported encoder layer or an `AlbertEncoder`) with a
    classification head on `pooled_output`; outputs `{"logits": [B, C]}`.

    The model has `num_classes`, which `export.finetuned_exports.export_classifier`
    reads.
    """
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in INPUT_NAMES}
    pooled = encoder(inputs)["pooled_output"]
    head = ClassificationHead(num_classes, dropout=dropout, name=HEAD_NAME)
    model = keras.Model(inputs, {"logits": head(pooled)}, name="finetuned")
    model.num_classes = num_classes
    return model


class _ProgressLines(keras.callbacks.Callback):
    """Progress lines of a run when no terminal shows Keras' bar: after the
    first step when it was slow (compiling), then every
    `progress.INTERVAL_S` (`progress.Reporter`)."""

    def __init__(self, num_steps, batch_size):
        super().__init__()
        self.reporter = progress.Reporter(
            "fine-tune", total=num_steps, unit="step",
            examples_per_unit=batch_size, interval_s=progress.INTERVAL_S)

    def on_train_batch_end(self, batch, logs=None):
        del logs
        self.reporter.update(batch + 1)


def _seed_states(model):
    """The dropout layers' seed-generator state variables."""
    return [v for v in model.variables
            if v.name.split("/")[-1].startswith("seed_generator_state")]


class Finetuner:
    """One classifier model, compiled once, trained afresh by each `run`.

    Args:
        encoder: an `AlbertEncoder` (or an exported encoder layer, see
            `export.keras_layer.load_exported_encoder`); its weights at each
            run are the `encoder_weights` given to `run`, else what it
            holds.
        num_classes: C.
        num_train_steps: optimizer steps of a run.
        batch_size: examples a step.
        learning_rate: peak AdamW learning rate.
        warmup_ratio: share of the steps with a linear warmup.
        dropout: the head's dropout rate.
        jit_compile: compile the steps with XLA (default: for an
            `AlbertEncoder`; an exported encoder layer runs without).
    """

    def __init__(self, encoder, num_classes, num_train_steps, batch_size=32,
                 learning_rate=3e-4, warmup_ratio=0.1, dropout=0.1,
                 jit_compile=None):
        if jit_compile is None:
            jit_compile = isinstance(encoder, keras.Model)
        self.encoder = encoder
        self.num_classes = num_classes
        self.num_train_steps = num_train_steps
        self.batch_size = batch_size
        self.dropout = dropout
        self.model = classifier(encoder, num_classes, dropout)
        self.model.compile(
            optimizer=lamb.create_optimizer(
                "adamw", learning_rate, num_train_steps,
                int(warmup_ratio * num_train_steps)),
            loss={"logits": keras.losses.SparseCategoricalCrossentropy(
                from_logits=True)},
            jit_compile=jit_compile)
        self.model.optimizer.build(self.model.trainable_variables)
        self._head = self.model.get_layer(HEAD_NAME)
        self._pooled_shape = (None, self._head.dense.kernel.shape[0])

    def _reset(self, seed, encoder_weights):
        if encoder_weights is not None:
            self.encoder.set_weights(encoder_weights)
        keras.utils.set_random_seed(seed)
        fresh = ClassificationHead(self.num_classes, dropout=self.dropout)
        fresh.build(self._pooled_shape)
        self._head.set_weights(fresh.get_weights())
        for variable in self.model.optimizer.variables:
            variable.assign(tf.zeros_like(variable))
        for index, state in enumerate(_seed_states(self.model)):
            state.assign(tf.constant([seed, index], state.dtype))

    def run(self, train_x, train_y, dev_x, dev_y, seed=0,
            encoder_weights=None):
        """Trains from the given start and measures dev accuracy.

        Args:
            train_x, dev_x: dicts of int32 `[N, T]` encoder inputs
                (`downstream.encode_pairs`).
            train_y, dev_y: int labels `[N]`.
            seed: the head's initialization, dropout and the batch order.
            encoder_weights: the encoder's starting weights (a list as
                `get_weights` gives; None: as it is).

        Returns:
            A dict: `dev_accuracy`, `majority_accuracy` (the dev set's
            most frequent label's share), `collapsed` (it answered one
            class for every dev example; `predicted_class` names it) with
            `baselines.classifier_answers`, `dev_loss`, `train_loss` (last
            step), `steps` and `seconds`.
        """
        start = time.time()
        self._reset(seed, encoder_weights)
        dataset = (tf.data.Dataset.from_tensor_slices((train_x, train_y))
                   .repeat().shuffle(len(train_y), seed=seed)
                   .batch(self.batch_size, drop_remainder=True))
        interactive = progress.interactive()
        history = self.model.fit(
            dataset, steps_per_epoch=self.num_train_steps, epochs=1,
            shuffle=False, verbose=1 if interactive else 0,
            callbacks=[] if interactive else [
                _ProgressLines(self.num_train_steps, self.batch_size)])
        logits = self.model.predict(dev_x, batch_size=128, verbose=0)
        logits = np.asarray(logits["logits"], np.float64)
        log_probs = logits - np.logaddexp.reduce(logits, axis=1,
                                                 keepdims=True)
        labels = np.asarray(dev_y)
        predictions = np.argmax(logits, 1)
        answers = baselines.classifier_answers(labels, predictions)
        return {
            "dev_accuracy": float(np.mean(predictions == labels)),
            "majority_accuracy": baselines.majority(labels)[1],
            **answers,
            "collapsed": baselines.collapsed_class(answers) is not None,
            "dev_loss": float(-np.mean(
                log_probs[np.arange(len(labels)), labels])),
            "train_loss": float(history.history["loss"][-1]),
            "steps": self.num_train_steps,
            "seconds": round(time.time() - start, 1),
        }
