"""Tests for data_prep.vocab: training and the special-piece check."""

import pytest
import sentencepiece as spm

from data_prep import reader
from data_prep import vocab


def test_trained_model_layout(spm_model):
    pieces = [spm_model.id_to_piece(i) for i in range(13)]
    assert pieces == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]",
                      "(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
    assert spm_model.pad_id() == 0 and spm_model.unk_id() == 1
    assert spm_model.bos_id() == -1 and spm_model.eos_id() == -1
    # Control symbols never come out of raw text.
    assert vocab.CLS_ID not in spm_model.encode("a [CLS] b [MASK]")
    assert vocab.check_special_pieces(spm_model) is spm_model


def test_trained_on_preprocessed_text(spm_model):
    # Accents were stripped and text lowercased before training, so no piece
    # holds an uppercase or accented Latin letter.
    pieces = [spm_model.id_to_piece(i) for i in range(spm_model.get_piece_size())]
    assert not any(c in "ÉéÜüÏïÇçÅå" for p in pieces for c in p)
    assert not any(p != p.lower() for p in pieces[5:])


def test_check_rejects_model_without_special_pieces(spm_plain_model_path):
    with pytest.raises(vocab.SpecialPiecesError, match=r"<pad> should be id 0"):
        vocab.check_special_pieces(spm_plain_model_path)


def test_check_rejects_missing_and_garbage(tmp_path):
    with pytest.raises(vocab.SpecialPiecesError, match="Cannot read"):
        vocab.check_special_pieces(str(tmp_path / "missing.model"))
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"this is not a model")
    with pytest.raises(vocab.SpecialPiecesError, match="Not a SentencePiece"):
        vocab.check_special_pieces(str(garbage))


def test_check_accepts_bytes(spm_model_path):
    with open(spm_model_path, "rb") as f:
        processor = vocab.check_special_pieces(f.read())
    assert isinstance(processor, spm.SentencePieceProcessor)


def test_sample_sentences_bounded_uniform_ordered_and_order_free():
    items = [((i // 1000, i % 1000), "s%d" % i) for i in range(10000)]
    sample = vocab.sample_sentences(iter(items), 500, seed=3)
    indices = [int(s[1:]) for s in sample]
    assert len(sample) == 500 and indices == sorted(indices)
    assert sample == vocab.sample_sentences(iter(items), 500, seed=3)
    assert sample != vocab.sample_sentences(iter(items), 500, seed=4)
    # Uniform: the mean index is near the middle.
    assert 4000 < sum(indices) / len(indices) < 6000
    # The same sample whatever order the sentences arrive in (as from
    # parallel readers).
    assert vocab.sample_sentences(reversed(items), 500, seed=3) == sample
    assert vocab.sample_sentences(iter(items[:7]), 0, seed=1) == [
        "s%d" % i for i in range(7)]


def test_sentence_key_is_a_stable_hash_of_the_place():
    assert vocab.sentence_key(1, (0, 5)) == vocab.sentence_key(1, (0, 5))
    keys = {vocab.sentence_key(1, (f, n)) for f in range(3) for n in range(99)}
    assert len(keys) == 297 and all(0 <= k < 2 ** 64 for k in keys)
    assert vocab.sentence_key(1, (0, 5)) != vocab.sentence_key(2, (0, 5))


def test_train_vocab_samples_and_errors(tmp_path, corpus_dir):
    model, vocab_file = vocab.train_vocab(
        str(corpus_dir / "b.txt"), str(tmp_path / "v" / "m"), vocab_size=200,
        input_sentence_size=300, hard_vocab_limit=False, num_threads=1,
        do_lower_case=False)
    assert vocab.check_special_pieces(model).get_piece_size() <= 200
    with open(vocab_file, encoding="utf-8") as f:
        assert f.readline().split("\t")[0] == "<pad>"
    with pytest.raises(reader.InputError, match="No file matches"):
        vocab.train_vocab(str(tmp_path / "nope*.txt"), str(tmp_path / "x"))
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(reader.InputError, match="No text"):
        vocab.train_vocab(str(tmp_path / "blank.txt"), str(tmp_path / "x"))


def test_model_from_texts_is_an_albert_vocabulary_in_memory():
    texts = ["The Quick brown fox", "jumps over the lazy dog"] * 20
    model = vocab.load_model(vocab.model_from_texts(texts, vocab_size=40))
    assert [model.id_to_piece(i) for i in range(5)] == [
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert model.get_piece_size() <= 40
    # Lowercased as for pretraining: no piece holds an upper-case letter.
    pieces = [model.id_to_piece(i) for i in range(model.get_piece_size())]
    assert not any(p.isupper() for p in "".join(pieces[5:]))


def test_model_from_texts_without_text_names_it():
    with pytest.raises(ValueError, match=r"No text .* Received: texts=\['', ' '\]"):
        vocab.model_from_texts(["", " "], vocab_size=40)
