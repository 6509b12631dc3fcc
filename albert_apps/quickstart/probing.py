"""Linear probes: what a frozen encoder's features say about a task.

The quickstart measures what pretraining gave the encoder by fitting a
linear classifier (multinomial logistic regression) on the frozen encoder's
features of the training examples and scoring it on the dev examples. The
features of an example are the encoder's `pooled_output` and the mean of
its `sequence_output` over the real tokens, side by side ([2H]).

Why a probe and not fine-tuning runs: a probe is deterministic for a given
encoder, so its accuracy's noise is the dev set's alone; a 100-step
fine-tuning run from random initialization lands anywhere in a band of
15 points or more depending on its seed, which hides margins of 5 points.
It is also cheap: one forward pass over the examples per encoder.

    train_f = features(encoder, train_x)
    probe = fit(train_f, train_labels, num_classes=4)
    accuracy(probe, features(encoder, dev_x), dev_labels)
"""

import dataclasses

import numpy as np
import tensorflow as tf

# L2 penalty on the standardized features' weights, and the optimizer's
# steps: fixed, chosen once and used for every corpus and encoder.
L2 = 1e-2
STEPS = 1500
LEARNING_RATE = 0.5
MOMENTUM = 0.9


@dataclasses.dataclass
class Probe:
    """A fitted probe: logits = ((features - mean) / scale) @ kernel + bias."""

    mean: np.ndarray
    scale: np.ndarray
    kernel: np.ndarray
    bias: np.ndarray

    def logits(self, feats):
        return ((np.asarray(feats, np.float64) - self.mean) / self.scale
                ) @ self.kernel + self.bias

    def predict(self, feats):
        return np.argmax(self.logits(feats), axis=1)


def features(encoder, inputs, batch_size=256):
    """The frozen encoder's features of `inputs` (a dict of int32 `[N, T]`
    encoder inputs): `[N, 2H]` float64, `pooled_output` then the mean of
    `sequence_output` over the tokens of `input_mask`.

    The forward pass is compiled with XLA once per call: the last batch is
    padded to `batch_size` rows, so every batch has one shape.
    """

    @tf.function(jit_compile=True)
    def forward(batch):
        outputs = encoder(batch, training=False)
        mask = tf.cast(batch["input_mask"], tf.float32)[..., None]
        tokens = tf.cast(outputs["sequence_output"], tf.float32)
        mean = tf.reduce_sum(tokens * mask, 1) / tf.maximum(
            tf.reduce_sum(mask, 1), 1.0)
        return tf.concat(
            [tf.cast(outputs["pooled_output"], tf.float32), mean], axis=1)

    count = len(next(iter(inputs.values())))
    if count == 0:
        raise ValueError("No examples to compute the features of")
    batch_size = min(batch_size, count)
    out = []
    for start in range(0, count, batch_size):
        batch = {}
        for name, values in inputs.items():
            rows = np.asarray(values[start:start + batch_size])
            pad = batch_size - len(rows)
            batch[name] = tf.constant(np.pad(rows, [(0, pad), (0, 0)]))
        out.append(forward(batch).numpy()[:batch_size - pad])
    return np.concatenate(out).astype(np.float64)


def fit(feats, labels, num_classes, l2=L2, steps=STEPS):
    """Fits a multinomial logistic regression on standardized features with
    full-batch gradient descent with momentum (deterministic).

    Args:
        feats: `[N, D]` features of the training examples.
        labels: `[N]` int labels in `[0, num_classes)`.
        num_classes: C.
        l2: penalty on the kernel's squared norm.
        steps: gradient steps.

    Raises:
        ValueError: no examples, or a label out of range.
    """
    feats = np.asarray(feats, np.float64)
    labels = np.asarray(labels)
    if not len(feats) or len(feats) != len(labels):
        raise ValueError("A probe needs as many labels as examples, at least "
                         "one. Received: %d examples, %d labels" % (
                             len(feats), len(labels)))
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError("Labels must be in [0, %d). Received: %d to %d" % (
            num_classes, labels.min(), labels.max()))
    mean, scale = feats.mean(0), feats.std(0) + 1e-6
    x = (feats - mean) / scale
    targets = np.eye(num_classes)[labels]
    kernel = np.zeros((x.shape[1], num_classes))
    bias = np.zeros(num_classes)
    kernel_velocity, bias_velocity = np.zeros_like(kernel), np.zeros_like(bias)
    rate = LEARNING_RATE / np.sqrt(x.shape[1])
    for _ in range(steps):
        logits = x @ kernel + bias
        logits -= logits.max(1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(1, keepdims=True)
        error = (probs - targets) / len(x)
        kernel_velocity = (MOMENTUM * kernel_velocity + x.T @ error +
                           2 * l2 * kernel)
        bias_velocity = MOMENTUM * bias_velocity + error.sum(0)
        kernel -= rate * kernel_velocity
        bias -= LEARNING_RATE * bias_velocity
    return Probe(mean, scale, kernel, bias)


def accuracy(probe, feats, labels):
    """The share of `labels` the probe predicts."""
    return float(np.mean(probe.predict(feats) == np.asarray(labels)))
