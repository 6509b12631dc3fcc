"""Random pretrainers and a tiny SentencePiece model with the released
special pieces, for the tests that convert, load and run pretrained models
(a pytest plugin that tests/conftest.py loads).

- `albert_spm_model`: tests/test_convert_checkpoint.py, test_huggingface.py,
  test_keras_hub.py, test_tf1.py, test_fill_mask.py,
  test_masked_lm.py, test_pretrained.py, test_text_models.py,
  test_text_preprocessor.py and tests/hostile/test_{convert,export,finetuning}.py.
- `random_pretrainer`: tests/test_convert_checkpoint.py, test_huggingface.py,
  test_tf1.py, test_fill_mask.py, test_masked_lm.py, test_pretrained.py,
  test_pretrainer.py and test_text_models.py.
- `assert_same_model`: tests/test_convert_checkpoint.py, test_huggingface.py,
  test_keras_hub.py, test_tf1.py and test_pretrained.py.
- `make_inputs`: tests/test_huggingface.py and test_keras_hub.py.

The package is imported inside the fixtures: this module loads before
tests/speed_plugin.py sets XLA_FLAGS.
"""

import io

import numpy as np
import pytest

_SPM_WORDS = ("the quick brown fox jumps over a lazy dog hello world cafe "
              "naive resume model albert weights convert release").split()


@pytest.fixture(scope="session")
def albert_spm_model(tmp_path_factory):
    """A tiny SentencePiece model with the released ALBERT special pieces.

    `<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3, `[MASK]`=4, trained on
    lowercased, accent-free text as the releases were.

    Returns:
        The path of the `.model` file.
    """
    import sentencepiece as spm

    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(_SPM_WORDS, 8)) for _ in range(400)]
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buffer, vocab_size=48,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"], character_coverage=1.0,
        minloglevel=2)
    path = tmp_path_factory.mktemp("spm") / "30k-clean.model"
    path.write_bytes(buffer.getvalue())
    return str(path)


@pytest.fixture
def random_pretrainer():
    """A factory of `AlbertPretrainer`s whose every weight is random.

    Call it with `AlbertConfig.from_preset("tiny")` overrides and an optional
    `seed`; LayerNorm scales and biases get random values too, so a tensor
    mapped to the wrong place changes the outputs.
    """
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer

    def make(seed=0, **overrides):
        values = dict(vocab_size=48, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)
        values.update(overrides)
        model = AlbertPretrainer(AlbertConfig.from_preset("tiny", **values))
        rng = np.random.default_rng(seed)
        for v in model.weights:
            v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32"))
        return model

    return make


def pretrainer_inputs(config, batch=2, length=9, predictions=3, seed=0):
    """Random `AlbertPretrainer` inputs with padding in the second example."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), np.int32)
    mask[1:, length // 2:] = 0
    return {
        "input_word_ids": rng.integers(0, config.vocab_size, (batch, length),
                                       dtype=np.int32),
        "input_mask": mask,
        "input_type_ids": (np.arange(length)[None, :] >= length // 3).astype(
            np.int32).repeat(batch, 0),
        "masked_lm_positions": rng.integers(0, length // 2, (batch, predictions),
                                            dtype=np.int32),
    }


@pytest.fixture
def assert_same_model():
    """Checks two pretrainers have bit-identical weights and outputs."""

    def check(expected, actual):
        assert expected.config == actual.config
        ours = {v.path: v.numpy() for v in expected.weights}
        theirs = {v.path: v.numpy() for v in actual.weights}
        assert sorted(ours) == sorted(theirs)
        for path, value in ours.items():
            np.testing.assert_array_equal(theirs[path], value, err_msg=path)
        inputs = pretrainer_inputs(expected.config)
        out_a, out_b = expected(inputs), actual(inputs)
        for key in ("sequence_output", "pooled_output", "mlm_logits",
                    "sop_logits"):
            np.testing.assert_array_equal(np.asarray(out_a[key]),
                                          np.asarray(out_b[key]), err_msg=key)

    return check


@pytest.fixture
def make_inputs():
    """The `pretrainer_inputs(config, batch, length, predictions, seed)` helper."""
    return pretrainer_inputs


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A tiny pretrained-model folder (config, spm.model, checkpoint) of
    the tasks' vocabulary, for the fine-tuning programs' runs."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir
    from tests import tasks_testdata

    config = AlbertConfig.from_preset("tiny", vocab_size=600,
                                      num_hidden_layers=2,
                                      max_position_embeddings=64)
    folder = str(tmp_path_factory.mktemp("pretrained"))
    model_dir.save_model_dir(AlbertPretrainer(config), folder,
                             tasks_testdata.spm_model_path())
    return folder
