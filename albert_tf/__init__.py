"""ALBERT for TensorFlow 2 and Keras 3."""

import os

# Layers here are written for the TensorFlow backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from albert_tf.config import AlbertConfig, PRESETS, SHARE_MODES  # noqa: E402
from albert_tf.embedding import AlbertEmbedding  # noqa: E402
from albert_tf.encoder import AlbertEncoder  # noqa: E402
from albert_tf.heads import MaskedLMHead, SentenceOrderHead  # noqa: E402
from albert_tf.optimization import (  # noqa: E402
    AdamW, Lamb, WarmupPolynomialDecay)
from albert_tf.pretrainer import AlbertPretrainer  # noqa: E402
from albert_tf.pretrained import load_pretrained  # noqa: E402
from albert_tf.transformer import (  # noqa: E402
    FeedForwardSubBlock, SelfAttentionSubBlock, TransformerBlock)
from albert_tf.tasks.models import (  # noqa: E402
    AlbertClassifier, AlbertMultipleChoice, AlbertSpanExtractor)

__all__ = [
    "AlbertConfig", "AlbertEmbedding", "AlbertEncoder", "AlbertPretrainer",
    "FeedForwardSubBlock", "MaskedLMHead", "PRESETS", "SHARE_MODES",
    "SelfAttentionSubBlock", "SentenceOrderHead", "TransformerBlock",
    "load_pretrained",
    "AlbertClassifier", "AlbertMultipleChoice", "AlbertSpanExtractor",
]
