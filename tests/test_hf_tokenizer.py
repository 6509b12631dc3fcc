"""Tests for albert_tf/convert/hf_tokenizer.py: the `tokenizer.json` written
beside a converted Hugging Face directory gives this project's ids."""

import json
import os

import pytest
import sentencepiece as spm

from albert_tf.convert import hf_tokenizer
from albert_tf.tasks.tokenization import Tokenizer
from tests import tasks_testdata

# No piece ending in a digit and a comma: the one rule `tokenizers` lacks.
TEXTS = ["Hello World, the ``quoted'' Café naïve ÜBER.", "ΟΔΟΣ 東京 ﬁne  x\ty",
         "The cat sat on the mat in 1990.", "", "a b"]


@pytest.fixture(scope="module")
def proto():
    with open(tasks_testdata.spm_model_path(), "rb") as f:
        return f.read()


def test_the_file_holds_the_models_pieces_scores_and_table(proto):
    sp_model = spm.SentencePieceProcessor(model_proto=proto)
    result = hf_tokenizer.tokenizer_json(proto)
    vocab = result["model"]["vocab"]
    assert len(vocab) == sp_model.get_piece_size()
    for i in (0, 1, 5, len(vocab) - 1):
        assert vocab[i][0] == sp_model.id_to_piece(i)
        assert vocab[i][1] == pytest.approx(sp_model.get_score(i), abs=1e-6)
    assert result["model"]["unk_id"] == sp_model.unk_id()
    special = {t["content"]: t["id"] for t in result["added_tokens"]}
    assert special == {p: sp_model.piece_to_id(p)
                       for p in hf_tokenizer.SPECIAL_TOKENS}
    types = [n["type"] for n in result["normalizer"]["normalizers"]]
    assert types[:5] == ["Replace", "Replace", "NFKD", "StripAccents",
                         "Lowercase"]
    json.dumps(result)  # Serializable as it is.


def test_not_a_sentencepiece_model_is_refused():
    with pytest.raises(ValueError, match="no pieces"):
        hf_tokenizer.tokenizer_json(b"")
    with pytest.raises(ValueError, match="wire type"):
        hf_tokenizer.tokenizer_json(b"\x0f\x00")


@pytest.mark.slow
def test_transformers_loads_the_directory_and_gets_our_ids(proto, tmp_path):
    if os.environ.get("CI"):
        import transformers
    else:
        transformers = pytest.importorskip(
            "transformers", reason="pip install -r requirements-peers.txt")
    (tmp_path / "spiece.model").write_bytes(proto)
    (tmp_path / hf_tokenizer.FILE_NAME).write_text(json.dumps(
        hf_tokenizer.tokenizer_json(proto)), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "AlbertTokenizer", "do_lower_case": True}))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    ours = Tokenizer(str(tmp_path / "spiece.model"), True)
    cls, sep = ours.sp_model.piece_to_id("[CLS]"), ours.sp_model.piece_to_id(
        "[SEP]")
    for text in TEXTS:
        assert tokenizer(text)["input_ids"] == [cls] + ours.encode(text) + [
            sep], text
    pair = tokenizer("first", "second", return_token_type_ids=True)
    assert pair["input_ids"] == ([cls] + ours.encode("first") + [sep]
                                 + ours.encode("second") + [sep])
    assert pair["token_type_ids"] == [0] * (len(ours.encode("first")) + 2) + [
        1] * (len(ours.encode("second")) + 1)
