"""`tokenizer.json` for a Hugging Face directory, from `spiece.model`.

`transformers` builds its ALBERT tokenizer (the `tokenizers` one, the only
one of transformers 5) from `tokenizer.json` when the directory has one;
without it, it converts `spiece.model` through sentencepiece's generated
protobuf module, which needs a newer protobuf runtime than TensorFlow pins,
and fails. So `convert_checkpoint --target=huggingface` writes the file,
read here from the model's wire format (`foundation.protobuf_wire`): the
pieces and scores (a unigram model), the model's own normalization table,
and ALBERT's preprocessing in front of it as the released tokenizers have
it ("``" and "''" to '"', NFKD, accents dropped, and lowercasing when the
vocabulary was built from lowercased text), words split on whitespace with
"▁" in front, and `[CLS] A [SEP] (B [SEP])` around. `casing` reads from a
vocabulary whether it was: a lowercased corpus gives no piece that
lowercasing would change.

The official tokenizer also splits a piece that ends in a digit and a comma
("1990," -> "1990", ","); `tokenizers` has no such step, so neither has
this file (docs/finetuning.md, "Parity with the reference"). Where two
segmentations of a word score the same, SentencePiece (float32 sums) and
`tokenizers` (float64 sums) can pick different ones (docs/converting.md).
"""

import base64
import struct

from foundation import protobuf_wire

FILE_NAME = "tokenizer.json"
# ModelProto: 1 pieces, 3 normalizer_spec; SentencePiece: 1 piece, 2 score,
# 3 type; NormalizerSpec: 2 precompiled_charsmap.
_PIECES, _NORMALIZER = 1, 3
_PIECE, _SCORE, _TYPE = 1, 2, 3
_CHARSMAP = 2
_NORMAL, _UNKNOWN, _USER_DEFINED = 1, 2, 4  # SentencePiece.Type
SPECIAL_TOKENS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
_SPACE = "\u2581"


def read_model(spm_model_proto):
    """`(pieces, charsmap)`: `[(piece, score, type), ...]` in id order, and
    the normalizer's precompiled table (`b""` when there is none).

    Raises:
        ValueError: the bytes are not a SentencePiece model.
    """
    pieces, charsmap = [], b""
    for number, value, _ in protobuf_wire.fields(bytes(spm_model_proto)):
        if number == _PIECES:
            piece, score, kind = "", 0.0, 1
            for field, item, _ in protobuf_wire.fields(value):
                if field == _PIECE:
                    piece = item.decode("utf-8")
                elif field == _SCORE:
                    score = struct.unpack("<f", item)[0]
                elif field == _TYPE:
                    kind = item
            pieces.append((piece, score, kind))
        elif number == _NORMALIZER:
            for field, item, _ in protobuf_wire.fields(value):
                if field == _CHARSMAP:
                    charsmap = item
    if not pieces:
        raise ValueError("Not a SentencePiece model: it has no pieces. "
                         f"Received: {len(spm_model_proto)} bytes")
    return pieces, charsmap


# A vocabulary keeps case when at least this share of its pieces holds a
# letter that lowercasing changes. A cased vocabulary has many (every
# capitalised word start); a lowercased one has none, but a stray symbol
# of another tool's making must not flip it.
_CASED_SHARE = 0.01


def casing(spm_model_proto):
    """Whether a vocabulary lowercases, read from its pieces.

    Text is lowercased before a vocabulary is built from it, or not
    (`build_vocab --do_lower_case`, the official `do_lower_case`): a
    lowercased corpus gives no piece with an uppercase letter.

    Args:
        spm_model_proto: the SentencePiece model's bytes.

    Returns:
        `(do_lower_case, reason)`: a bool, and what it was read from (the
        count of pieces with uppercase letters), for the report.

    Raises:
        ValueError: the bytes are not a SentencePiece model.
    """
    pieces, _ = read_model(spm_model_proto)
    words = [piece for piece, _, kind in pieces
             if kind in (_NORMAL, _USER_DEFINED)
             and piece not in SPECIAL_TOKENS]
    cased = sum(piece != piece.lower() for piece in words)
    do_lower_case = cased < _CASED_SHARE * max(len(words), 1)
    return do_lower_case, (f"{cased} of the vocabulary's {len(words)} pieces "
                           "hold an uppercase letter")


def tokenizer_config(do_lower_case):
    """The `tokenizer_config.json` (a dict) of an ALBERT directory: the
    vocabulary's casing, accents dropped, as the project preprocesses."""
    return {
        "tokenizer_class": "AlbertTokenizer", "do_lower_case": do_lower_case,
        "remove_space": True, "keep_accents": False,
        "bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>",
        "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }


def _special(content, piece_id):
    return {"id": piece_id, "content": content, "single_word": False,
            "lstrip": content == "[MASK]", "rstrip": False,
            "normalized": False, "special": True}


def _template(*segments):
    items = [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}]
    for type_id, name in enumerate(segments):
        items += [{"Sequence": {"id": name, "type_id": type_id}},
                  {"SpecialToken": {"id": "[SEP]", "type_id": type_id}}]
    return items


def tokenizer_json(spm_model_proto, do_lower_case=True):
    """The `tokenizer.json` (a dict) of a SentencePiece model.

    Args:
        spm_model_proto: the SentencePiece model's bytes.
        do_lower_case: whether text is lowercased before SentencePiece, as
            the vocabulary was built (`casing`).

    Raises:
        ValueError: not a SentencePiece model, or one without `[CLS]` and
            `[SEP]` pieces.
    """
    pieces, charsmap = read_model(spm_model_proto)
    ids = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    missing = [t for t in ("[CLS]", "[SEP]") if t not in ids]
    if missing:
        raise ValueError(f"The SentencePiece model has no {missing} pieces, "
                         "which ALBERT's inputs need")
    normalizers = [
        {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
        {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
        {"type": "NFKD"}, {"type": "StripAccents"}]
    if do_lower_case:
        normalizers.append({"type": "Lowercase"})
    if charsmap:
        normalizers.append({
            "type": "Precompiled",
            "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    metaspace = {"replacement": _SPACE, "prepend_scheme": "always",
                 "split": True}
    unk_id = next((i for i, (_, _, kind) in enumerate(pieces)
                   if kind == _UNKNOWN), ids.get("<unk>", 0))
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_special(t, ids[t]) for t in SPECIAL_TOKENS
                         if t in ids],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, dict(type="Metaspace", **metaspace)]},
        "post_processor": {
            "type": "TemplateProcessing", "single": _template("A"),
            "pair": _template("A", "B"),
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]}
                               for t in ("[CLS]", "[SEP]")}},
        "decoder": dict(type="Metaspace", **metaspace),
        "model": {"type": "Unigram", "unk_id": unk_id,
                  "vocab": [[piece, score] for piece, score, _ in pieces],
                  "byte_fallback": False},
    }
