"""Shared pytest fixtures of the test suite.

The fixtures that several modules read are here and in the plugin modules
below, each listing the test modules that use its fixtures;
tests/speed_plugin.py holds how the suite runs fast (worker grouping,
garbage collection, XLA flags) and changes no test's result.

Fixtures import TensorFlow and the package inside their bodies: conftests
and plugins load before tests/speed_plugin.py sets XLA_FLAGS, which
TensorFlow reads once.
"""

import os
import random

import pytest

# Declared here, in the conftest at the root of the tests: pytest refuses
# `pytest_plugins` in a conftest it finds later.
pytest_plugins = [
    "tests.speed_plugin",
    "tests.fixtures_beam",
    "tests.fixtures_export",
    "tests.fixtures_models",
    "tests.fixtures_training",
]


# --- Full-size models, counted (tests/test_encoder.py, test_pretrainer.py) ---

@pytest.fixture
def zero_initialized(monkeypatch):
    """Truncated-normal initializers give zeros: a full-size model's weights
    are made much faster, and counting them needs only their shapes."""
    import keras
    from keras.src.initializers import random_initializers

    monkeypatch.setattr(
        random_initializers.TruncatedNormal, "__call__",
        lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype=dtype))


# --- Data prep ---
# A generated corpus (`corpus_*`) and a tiny SentencePiece model trained on it
# once per session (`spm_*`), for data prep's tests (tests/test_vocab.py,
# test_build_vocab.py, test_create_pretraining_data.py, test_pipeline.py,
# test_beam_*.py, test_ngram_masking.py, test_text.py,
# tests/hostile/test_data_builders.py) and the tests that tokenize
# (test_masked_lm.py, test_preprocessing.py, test_serving_dtype_auto.py,
# test_progress.py).

_CORPUS_SYLLABLES = ("ka", "to", "ri", "men", "sa", "lo", "pre", "di", "on",
                     "ta", "ver", "mi", "an", "el", "us", "qua", "ble", "ing",
                     "st", "ro")
_CORPUS_ACCENTED = ("café", "naïve", "Über", "façade", "rôle", "Ångström",
                    "東京", "ﬁnal", "coöp")


def corpus_text(num_documents, seed=0, min_sentences=2, max_sentences=12):
    """A corpus in the input format: one sentence a line, blank between docs.

    Made-up words of 1-4 syllables (so pieces split words), Zipf-like word
    choice, sentences of 3-30 words with some capitals, numbers, punctuation
    and a few accented/CJK words.
    """
    rng = random.Random(seed)
    words = set()
    while len(words) < 600:
        words.add("".join(rng.choice(_CORPUS_SYLLABLES)
                          for _ in range(rng.choice((1, 1, 2, 2, 3, 4)))))
    words = sorted(words)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(rng.randint(min_sentences, max_sentences)):
            length = rng.randint(3, 30)
            tokens = rng.choices(words, weights, k=length)
            if rng.random() < 0.1:
                tokens[rng.randrange(length)] = rng.choice(_CORPUS_ACCENTED)
            if rng.random() < 0.2:
                tokens[rng.randrange(length)] = str(rng.randint(0, 2000))
            if rng.random() < 0.3:
                tokens[rng.randrange(length)] += rng.choice((",", ";", ":"))
            sentence = " ".join(tokens)
            sentences.append(sentence[0].upper() + sentence[1:]
                             + rng.choice((".", ".", ".", "?", "!")))
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """A directory with a generated corpus in two files (a.txt, b.txt)."""
    directory = tmp_path_factory.mktemp("corpus")
    (directory / "a.txt").write_text(corpus_text(400, seed=1), encoding="utf-8")
    (directory / "b.txt").write_text(corpus_text(300, seed=2), encoding="utf-8")
    return directory


@pytest.fixture(scope="session")
def corpus_files(corpus_dir):
    """Comma-separated paths of the generated corpus files."""
    return ",".join(str(corpus_dir / name) for name in ("a.txt", "b.txt"))


@pytest.fixture(scope="session")
def corpus_cli_env():
    """Environment for `python -m data_prep....` subprocesses."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="session")
def spm_model_path(tmp_path_factory, corpus_dir):
    """A tiny unigram model (<= 500 pieces) built by `data_prep.vocab`."""
    from data_prep import vocab

    prefix = str(tmp_path_factory.mktemp("spm") / "tiny")
    model_path, _ = vocab.train_vocab(
        str(corpus_dir / "a.txt"), prefix, vocab_size=500,
        hard_vocab_limit=False, num_threads=2)
    return model_path


@pytest.fixture(scope="session")
def spm_model(spm_model_path):
    """The tiny model, loaded (`sentencepiece.SentencePieceProcessor`)."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=spm_model_path)


@pytest.fixture(scope="session")
def spm_plain_model_path(tmp_path_factory, corpus_dir):
    """A SentencePiece model with the default special pieces (no [CLS]...)."""
    import sentencepiece as spm

    prefix = str(tmp_path_factory.mktemp("spm_plain") / "plain")
    spm.SentencePieceTrainer.train(
        input=str(corpus_dir / "b.txt"), model_prefix=prefix, vocab_size=300,
        hard_vocab_limit=False, minloglevel=2, num_threads=2)
    return prefix + ".model"
