"""Tests for data_prep.text: one preprocessing, a Python and a graph face."""

import pytest
import tensorflow as tf

from data_prep import text

HARD_TEXT = [
    "",
    "   ",
    "\t\n",
    "Héllo  Wörld\tTAB\r\nend",
    "naïve café Über façade Ångström coöp",
    "ﬁnal ﬂow ﬃ Æsop Ĳssel ŉ ™ ① ㎏",
    "東京 日本語のテキスト 中文 한국어",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇫🇷",
    "zero\u200bwidth\u200cnon\u200djoin\ufeffbom\u2060",
    "nbsp\u00a0ideo\u3000line\u2028para\u2029thin\u2009end",
    "ΟΔΟΣ ΣΑΣ İstanbul ẞtraße Ǆ ǅ",
    "spacing marks ¨ ´ ¸ alone",
    "\u0301\u0308 only combining",
    "Devanagari क्षत्रिय Thai ภาษาไทย",
    "  lead and trail  ",
    "MiXeD CaSe 123 (brackets) \"quotes\" – £5 €7.",
]


def test_preprocess_examples():
    assert text.preprocess_text("  Héllo \t WÖRLD  ") == "hello world"
    assert text.preprocess_text("Héllo", do_lower_case=False) == "Hello"
    assert text.preprocess_text("ﬁne ﬂow") == "fine flow"
    assert text.preprocess_text("a\u00a0b\u3000c") == "a b c"
    assert text.preprocess_text("") == ""
    assert text.preprocess_text(b"caf\xc3\xa9 \xff") == "cafe \uffff"


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_face_matches_python_face(do_lower_case):
    expected = [text.preprocess_text(s, do_lower_case) for s in HARD_TEXT]
    got = text.preprocess_text_graph(tf.constant(HARD_TEXT), do_lower_case)
    assert [g.decode("utf-8") for g in got.numpy()] == expected


def test_graph_face_invalid_utf8_matches():
    raw = [b"ab\xffcd", b"\xe2\x82", b"ok\xc3\x28x", b"\xf0\x9f\x98"]
    expected = [text.preprocess_text(s) for s in raw]
    got = text.preprocess_text_graph(tf.constant(raw)).numpy()
    assert [g.decode("utf-8") for g in got] == expected


def test_identical_ids_both_faces(spm_model, spm_model_path):
    expected = text.tokenize_to_ids(spm_model, HARD_TEXT)
    with open(spm_model_path, "rb") as f:
        tokenizer = text.make_graph_tokenizer(f.read())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(batch):
        return text.tokenize_to_ids_graph(tokenizer, batch)

    got = tokenize(tf.constant(HARD_TEXT)).to_list()
    assert got == expected
    assert expected[0] == [] and expected[1] == []
    assert any(len(ids) > 3 for ids in expected)


def test_graph_face_in_saved_model(spm_model, spm_model_path, tmp_path):
    with open(spm_model_path, "rb") as f:
        tokenizer = text.make_graph_tokenizer(f.read())

    class Preprocessor(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, batch):
            ids = text.tokenize_to_ids_graph(self.tokenizer, batch)
            return ids.to_tensor(default_value=0)

    tf.saved_model.save(Preprocessor(), str(tmp_path / "pre"))
    loaded = tf.saved_model.load(str(tmp_path / "pre"))
    dense = loaded(tf.constant(HARD_TEXT)).numpy()
    expected = text.tokenize_to_ids(spm_model, HARD_TEXT)
    for row, ids in zip(dense, expected):
        assert list(row[:len(ids)]) == ids
        assert not row[len(ids):].any()


def test_regex_classes_are_exact():
    import unicodedata

    whitespace, combining = text.regex_classes()
    assert whitespace.startswith("[") and "\\x{3000}" in whitespace
    assert "\\x{200B}" not in whitespace  # Zero-width space is not space.
    assert all(unicodedata.combining(chr(cp))
               for cp in text._combining_code_points())
    assert 0x0301 in text._combining_code_points()
