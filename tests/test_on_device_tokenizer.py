"""Tests for export/on_device_tokenizer.py: the compiled normalizer and the
digit-comma table give the SavedModel preprocessor's ids."""

import random

import numpy as np
import pytest
import sentencepiece as spm

from data_prep import text as text_lib
from data_prep import vocab
from export import on_device_tokenizer
from tests import fixtures_text

# Words the vocabulary learns whole, so the hard cases below reach real
# pieces (not only <unk>): accents, digits with commas, Hangul (whose jamo
# NFKC composes), an Oriya vowel sign pair, Greek.
_TRAINING = ["The café in Zürich sold 1,000 cakes, 250, and 3,5 more, in 1990, "
             "to 12 people.", "한국어 텍스트 학교 한글", "ଓଡ଼ିଆ ଭାଷା କୋ",
             "οδος σοφια λογος", "ﬁnal ``quoted'' text: naïve façade rôle"]

HARD_TEXTS = [
    "Hello World", "CAFÉ Naïve ÜBER façade Ångström", "İstanbul ΟΔΟΣ",
    "In 1990, 3,000 people; 12,5 and 7, x1,", "", "   \t\n ",
    "ﬁnal ``quoted'' text ''again''", "한국어 텍스트",
    "\u1112\u1161\u11ab\u1100\u1173\u11af", "\u0b47\u0b3e ଓ", "Ａｂｃ １２３,",
    "a\u0301b e\u0308", "x\tY\u00a0\u2003z", "东京 日本", "ΟΔΟΣ ΣΟΦΙΑ, ΛΟΓΟΣ.",
    "word " * 600,
]


@pytest.fixture(scope="module")
def proto():
    lines = _TRAINING * 30 + [f"line {i}, number {i * 37},{i}" for i in range(200)]
    return vocab.model_from_texts(lines, 400)


@pytest.fixture(scope="module")
def tokenizers(proto):
    from albert_tf.layers import preprocessing

    return (on_device_tokenizer.OnDeviceTokenizer(proto),
            preprocessing.TextPreprocessor(proto, 128))


def _ids(tokenizer, texts):
    import tensorflow as tf

    return tokenizer.tokenize(tf.constant(
        [t if isinstance(t, bytes) else t.encode("utf-8") for t in texts])
    ).to_list()


@pytest.mark.slow
def test_the_compiled_model_keeps_the_pieces_and_the_flags(proto):
    compiled = on_device_tokenizer.compile_normalizer(proto)
    before = spm.SentencePieceProcessor(model_proto=proto)
    after = spm.SentencePieceProcessor(model_proto=compiled)
    assert [before.id_to_piece(i) for i in range(before.get_piece_size())] == [
        after.id_to_piece(i) for i in range(after.get_piece_size())]
    # The compiled normalizer preprocesses: accents, case, width, quotes.
    assert after.encode("CAFÉ ｃａｆé") == before.encode("cafe cafe")
    assert after.encode("``x''") == before.encode('"x"')


def test_the_comma_table_is_the_official_rule_on_each_piece(proto):
    table, lengths = on_device_tokenizer.comma_table(proto)
    sp_model = spm.SentencePieceProcessor(model_proto=proto)
    assert table.shape[0] == lengths.shape[0] == sp_model.get_piece_size()
    split = np.flatnonzero(lengths > 1)
    assert split.size, "the vocabulary has a piece ending in a digit and ','"
    for piece_id in range(sp_model.get_piece_size()):
        parts = text_lib.split_digit_commas(
            sp_model, [sp_model.id_to_piece(piece_id)])
        assert list(table[piece_id, :lengths[piece_id]]) == [
            sp_model.piece_to_id(p) for p in parts]


def test_ids_equal_the_saved_model_preprocessor_on_hard_text(tokenizers):
    on_device, reference = tokenizers
    assert _ids(on_device, HARD_TEXTS) == _ids(reference, HARD_TEXTS)


@pytest.mark.slow
def test_ids_equal_on_random_characters_of_every_script(tokenizers):
    on_device, reference = tokenizers
    rng = random.Random(0)
    characters = [chr(cp) for cp in on_device_tokenizer._code_points()]
    texts = ["".join(rng.choice(characters) if rng.random() < 0.4
                     else rng.choice("ab AB,.19한\u1100\u1161\u11a8`'")
                     for _ in range(rng.randint(1, 14)))
             for _ in range(2000)]
    assert _ids(on_device, texts) == _ids(reference, texts)


def test_control_characters_get_the_saved_models_ids(tokenizers):
    on_device, reference = tokenizers
    got = _ids(on_device, fixtures_text.CONTROL_TEXTS)
    assert got == _ids(reference, fixtures_text.CONTROL_TEXTS)
    # The text after a NUL is kept; the NUL is an <unk> (id 1).
    assert got[1][-1] == 1 and got[0][-2] == 1 and len(got[0]) >= 3


def test_invalid_utf8_gets_the_saved_models_ids(tokenizers, proto):
    on_device, reference = tokenizers
    sp_model = spm.SentencePieceProcessor(model_proto=proto)
    cases = [b"cafe\xffcafe", b"\xc3(x", b"a\xff\xfeb", b"\xe2\x82",
             b"\xf0\x9f\x98a", b"\xed\xa0\x80b", b"\xc0\xafe", b"a \xff b",
             b"caf\xc3\xa9 \xef\xbf\xbd \xef\xbf\xbf"]
    # Random mixes of valid and malformed sequences, spaces, digit commas.
    # (No run of one digit: "000" is "0 00" on device and "00 0" in the
    # SavedModels when "000" is no piece, an exact tie; docs/on_device.md.)
    parts = [b"a", b"e", b" ", b"\xff", b"\x80", b"\xc3", b"\xa9", b"\xe2\x82",
             b"\xf0\x9f", b"\xc3\xa9", b"1,", b"7", b"\xed\xa0\x80", b"\xc0",
             b"\xf4\x90\x80\x80", b"\xef\xbf\xbd", b"A", b"\t", b"``"]
    rng = random.Random(1)
    cases += [b"".join(rng.choice(parts) for _ in range(rng.randint(0, 12)))
              for _ in range(1500)]
    got, want = (_ids(t, cases) for t in (on_device, reference))
    assert got == want
    # A malformed run is one <unk> inside its word, not a word break.
    pieces = [sp_model.id_to_piece(i) for i in got[0]]
    assert pieces.count("<unk>") == 1
    assert sum(p.startswith("\u2581") for p in pieces) == 1, pieces
