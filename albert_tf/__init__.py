"""ALBERT for TensorFlow 2 and Keras 3.

Subpackages, imported in one direction (a module imports only from the
packages before its own):

    config -> layers -> models -> training, convert -> tasks -> (export/) -> cli

The public names below are loaded on first use, so `import albert_tf` (and
`albert_tf.config`) stays cheap: no converter, training or export code is
imported until it is asked for.
"""

import importlib
import os

# Layers here are written for the TensorFlow backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "PRESETS": "albert_tf.config",
    "SHARE_MODES": "albert_tf.cross_layer_sharing",
    "AlbertEmbedding": "albert_tf.layers.factorized_embedding",
    "FeedForwardSubBlock": "albert_tf.layers.transformer",
    "SelfAttentionSubBlock": "albert_tf.layers.transformer",
    "TransformerBlock": "albert_tf.layers.transformer",
    "MaskedLMHead": "albert_tf.layers.masked_lm_head",
    "SentenceOrderHead": "albert_tf.layers.sentence_order_head",
    "AlbertEncoder": "albert_tf.models.encoder",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "AlbertClassifier": "albert_tf.models.task_models",
    "AlbertMultipleChoice": "albert_tf.models.task_models",
    "AlbertSpanExtractor": "albert_tf.models.task_models",
    "AlbertTextClassifier": "albert_tf.tasks.text_models",
    "AlbertMaskedLM": "albert_tf.tasks.masked_lm",
    "AlbertTextPreprocessor": "albert_tf.layers.text_preprocessor",
    "AdamW": "albert_tf.training.lamb",
    "Lamb": "albert_tf.training.lamb",
    "WarmupPolynomialDecay": "albert_tf.training.schedule",
    "load_pretrained": "albert_tf.convert.pretrained",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
