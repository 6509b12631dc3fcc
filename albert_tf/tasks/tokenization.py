"""SentencePiece tokenization for fine-tuning, with character offsets.

Text goes through the pretraining preprocessing (`data_prep.text`) before
SentencePiece, so fine-tuning sees the ids pretraining saw. Span tasks also
need to know where each piece came from in the original text: `encode_with_offsets`
tokenizes word by word (SentencePiece never lets a piece cross whitespace, so
this gives the same ids as tokenizing the whole text) and maps every piece to a
`[start, end)` character range of the original string. When preprocessing keeps
a word's length (ASCII, most text), the range is exact to the character; when
it does not (NFKD expansions, dropped accents), the piece gets its whole word.
"""

import re

from data_prep import text as text_lib
from data_prep import vocab as vocab_lib

_WORD = re.compile(r"\S+")


class Tokenizer:
    """Preprocessing + SentencePiece with the ALBERT special pieces.

    Args:
        sp_model: a SentencePiece model path, serialized bytes or a loaded
            `SentencePieceProcessor`; it must hold `<pad>`=0, `<unk>`=1,
            `[CLS]`=2, `[SEP]`=3, `[MASK]`=4.
        do_lower_case: whether text is lowercased (as in pretraining).

    Raises:
        data_prep.vocab.SpecialPiecesError: the model lacks the special pieces.
    """

    def __init__(self, sp_model, do_lower_case=True):
        self.sp_model = vocab_lib.check_special_pieces(sp_model)
        self.do_lower_case = do_lower_case
        self.pad_id = vocab_lib.PAD_ID
        self.cls_id = vocab_lib.CLS_ID
        self.sep_id = vocab_lib.SEP_ID
        self.vocab_size = self.sp_model.get_piece_size()

    def encode(self, text):
        """Piece ids of one text (a `str`)."""
        return text_lib.tokenize_to_ids(self.sp_model, [text],
                                        self.do_lower_case)[0]

    def encode_batch(self, texts):
        """Piece ids of many texts, one list per text."""
        return text_lib.tokenize_to_ids(self.sp_model, list(texts),
                                        self.do_lower_case)

    def encode_with_offsets(self, text):
        """Piece ids with the original character range of every piece.

        Args:
            text: a `str`.

        Returns:
            `(ids, offsets)`: a list of ints and a list of `(start, end)`
            character offsets into `text`, one per id. A piece with no
            characters of its own (a lone word-boundary piece) gets the empty
            range at its word's start.
        """
        ids, offsets = [], []
        for match in _WORD.finditer(text):
            word = match.group()
            start, end = match.span()
            processed = text_lib.preprocess_text(word, self.do_lower_case)
            if not processed:
                continue
            origins = _char_origins(word, processed, self.do_lower_case)
            byte_to_char = _byte_to_char(processed)
            for piece_id, piece_begin, piece_end in self._pieces(processed):
                ids.append(piece_id)
                first = byte_to_char[piece_begin]
                last = byte_to_char[piece_end]
                if origins is None:  # Not aligned: the whole word.
                    offsets.append((start, start) if first == last
                                   else (start, end))
                elif first >= last:
                    begin = start + (origins[first][0]
                                     if first < len(origins) else len(word))
                    offsets.append((begin, begin))
                else:
                    offsets.append((start + origins[first][0],
                                    start + origins[last - 1][1]))
        return ids, offsets

    def _pieces(self, processed):
        """`(id, begin, end)` byte ranges of a preprocessed word's pieces,
        with the official digit-comma split (`data_prep.text`)."""
        result = []
        for piece in self.sp_model.encode(processed, return_type="proto").pieces:
            text = piece.piece
            if not (len(text) > 1 and text[-1] == "," and text[-2].isdigit()):
                result.append((piece.id, piece.begin, piece.end))
                continue
            stripped = text[:-1].replace(text_lib.UNDERLINE, "")
            # `stripped` is the piece's text up to its comma.
            base = piece.end - 1 - len(stripped.encode("utf-8"))
            parts = [(p.piece, p.begin, p.end) for p in self.sp_model.encode(
                stripped, return_type="proto").pieces]
            if (text[0] != text_lib.UNDERLINE and parts
                    and parts[0][0][0] == text_lib.UNDERLINE):
                if len(parts[0][0]) == 1:
                    parts = parts[1:]
                else:
                    parts[0] = (parts[0][0][1:],) + parts[0][1:]
            result.extend((self.sp_model.piece_to_id(t), base + b, base + e)
                          for t, b, e in parts)
            result.append((self.sp_model.piece_to_id(","), piece.end - 1,
                           piece.end))
        return result

    def id_to_piece(self, piece_id):
        return self.sp_model.id_to_piece(piece_id)


def _char_origins(word, processed, do_lower_case):
    """For each character of `processed` (the preprocessed `word`), the
    `(start, end)` range of the characters of `word` it comes from: "``"
    and "''" (one '"'), a ligature ("ﬁ": two letters), an accented letter
    (one); a combining mark belongs to the character before it. None when
    preprocessing the characters one by one does not give `processed` (a
    final sigma, which lowercases by its neighbours)."""
    if word.isascii() and "``" not in word and "''" not in word:
        return [(i, i + 1) for i in range(len(word))]  # Only lowercased.
    origins, parts = [], []
    index = 0
    while index < len(word):
        size = 2 if word[index:index + 2] in ("``", "''") else 1
        part = text_lib.preprocess_text(word[index:index + size],
                                        do_lower_case)
        origins.extend([(index, index + size)] * len(part))
        if not part and origins:  # A dropped mark joins the character
            begin = origins[-1][0]  # before it ("a" + U+0301: "á").
            for k in range(len(origins) - 1, -1, -1):
                if origins[k][0] != begin:
                    break
                origins[k] = (begin, index + size)
        parts.append(part)
        index += size
    return origins if "".join(parts) == processed else None


def _byte_to_char(text):
    """A list mapping each UTF-8 byte offset of `text` (and its end) to a char
    offset."""
    table = []
    for index, char in enumerate(text):
        table.extend([index] * len(char.encode("utf-8")))
    table.append(len(text))
    return table
