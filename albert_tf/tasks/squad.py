"""SQuAD v1.1 / v2.0: JSON reader, document windows, answers back to text.

A context longer than fits next to the question is cut into overlapping
windows of pieces (`max_seq_length - len(question) - 3` pieces each, starting
every `doc_stride` pieces). Each window is one feature:
`[CLS] question [SEP] window [SEP]`. Every context piece keeps the character
range it came from (`Tokenizer.encode_with_offsets`), so a predicted piece span
becomes a character span of the original context, and the answer text is a
slice of that string.

Training targets: the answer's first and last piece when the answer lies
inside the window, else position 0 (`[CLS]`); `is_impossible` is 1 for those
features. At prediction a piece counts only in the window where it has the
most context on both sides (as the official BERT scripts do).

Bad data: a question without answers in a v1.1 file, or whose answer text
does not match the context at `answer_start`, is skipped in training and
counted; a missing field is an error naming the question.
"""

import collections
import dataclasses
import json
import os
from typing import List

import numpy as np
from absl import logging


class DataError(ValueError):
    """A SQuAD file is missing or does not have the SQuAD JSON layout."""


@dataclasses.dataclass
class SquadExample:
    """One question with its context (and, for training, its first answer)."""

    qas_id: str
    question_text: str
    context_text: str
    answer_text: str = ""
    start_char: int = -1
    is_impossible: bool = False
    answers: List[str] = dataclasses.field(default_factory=list)


def load_dataset(path):
    """The `data` list of a SQuAD JSON file and its `version` string.

    Raises:
        DataError: no file, not JSON, or no `data` list.
    """
    if not os.path.exists(path):
        raise DataError(f"No SQuAD file at {path!r}")
    with open(path, encoding="utf-8") as f:
        try:
            payload = json.load(f)
        except json.JSONDecodeError as e:
            raise DataError(f"{path!r} is not valid JSON: {e}") from e
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise DataError(f"{path!r} must be a JSON object with a 'data' list "
                        "(the SQuAD layout).")
    return payload["data"], str(payload.get("version", ""))


def read_examples(path, is_training, version_2_with_negative=False):
    """Reads SQuAD questions.

    Args:
        path: a SQuAD v1.1 or v2.0 JSON file.
        is_training: whether answers are needed (and bad ones skipped).
        version_2_with_negative: whether unanswerable questions are expected
            (v2.0). Without it, an unanswerable training question is skipped
            and counted as `unanswerable_in_v1`.

    Returns:
        `(examples, skipped)`: `SquadExample`s and a `Counter` of skipped
        questions by reason.

    Raises:
        DataError: the file is not SQuAD JSON or a question lacks a field.
    """
    data, _ = load_dataset(path)
    examples, skipped = [], collections.Counter()
    for article in data:
        for paragraph in article.get("paragraphs", []):
            if "context" not in paragraph:
                raise DataError(f"{path!r}: a paragraph has no 'context'.")
            context = paragraph["context"]
            for question in paragraph.get("qas", []):
                for field in ("id", "question"):
                    if field not in question:
                        raise DataError(f"{path!r}: a question lacks {field!r}. "
                                        f"Received: {sorted(question)}")
                answers = question.get("answers", [])
                impossible = bool(question.get("is_impossible", False)) or not answers
                example = SquadExample(
                    qas_id=question["id"], question_text=question["question"],
                    context_text=context, is_impossible=impossible,
                    answers=[a.get("text", "") for a in answers])
                if is_training:
                    if impossible and not version_2_with_negative:
                        skipped["unanswerable_in_v1"] += 1
                        continue
                    if not impossible:
                        answer = answers[0]
                        start = answer.get("answer_start", -1)
                        text = answer.get("text", "")
                        if (not isinstance(start, int) or start < 0 or not text
                                or context[start:start + len(text)] != text):
                            skipped["answer_mismatch"] += 1
                            continue
                        example.answer_text, example.start_char = text, start
                examples.append(example)
    if skipped:
        logging.warning("%s: skipped questions: %s", path, dict(skipped))
    return examples, skipped


@dataclasses.dataclass
class Window:
    """Bookkeeping of one feature, for mapping predictions back to text."""

    example_index: int
    # Position in the packed sequence -> index of the context piece.
    token_to_piece: dict
    # Position -> whether this window gives the piece its most context.
    max_context: dict


@dataclasses.dataclass
class SquadFeatures:
    """Packed windows of a list of examples."""

    arrays: dict  # input_word_ids/input_mask/input_type_ids [F, T] (+labels)
    windows: List[Window]
    piece_offsets: List[list]  # per example: (start, end) chars per piece
    num_truncated_questions: int = 0


def _window_starts(num_pieces, window_length, doc_stride):
    starts = [0]
    while starts[-1] + window_length < num_pieces:
        starts.append(starts[-1] + min(window_length, doc_stride))
    return starts


def _max_context(starts, window_length, num_pieces):
    """For each window, the set of piece indices it holds with most context."""
    best = {}
    for w, start in enumerate(starts):
        end = min(start + window_length, num_pieces)
        for piece in range(start, end):
            # Context on the poorer side, a little credit for window length.
            score = min(piece - start, end - 1 - piece) + 0.01 * (end - start)
            if piece not in best or score > best[piece][0]:
                best[piece] = (score, w)
    owned = [set() for _ in starts]
    for piece, (_, w) in best.items():
        owned[w].add(piece)
    return owned


def _answer_pieces(offsets, start_char, end_char):
    """First and last piece overlapping `[start_char, end_char)`, or None."""
    first = next((i for i, (s, e) in enumerate(offsets)
                  if e > start_char and s < end_char), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1)
                 if offsets[i][0] < end_char and offsets[i][1] > start_char), None)
    if first is None or last is None:
        return None
    return first, last


def convert_examples(examples, tokenizer, max_seq_length, doc_stride,
                     max_query_length, is_training):
    """Cuts examples into windows and packs them.

    Args:
        examples: `SquadExample`s.
        tokenizer: a `tasks.tokenization.Tokenizer`.
        max_seq_length: T.
        doc_stride: pieces between the starts of consecutive windows.
        max_query_length: questions are cut to this many pieces.
        is_training: whether to add `start_positions`, `end_positions` and
            `is_impossible`.

    Returns:
        `SquadFeatures`.

    Raises:
        ValueError: when the sizes leave no room for context, or doc_stride < 1.
    """
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive. Received: {doc_stride}")
    if max_seq_length - max_query_length - 3 < 1:
        raise ValueError(
            "max_seq_length must exceed max_query_length + 3. Received: "
            f"max_seq_length={max_seq_length}, max_query_length={max_query_length}")
    rows = collections.defaultdict(list)
    windows, all_offsets, truncated = [], [], 0
    for example_index, example in enumerate(examples):
        query = tokenizer.encode(example.question_text)
        if len(query) > max_query_length:
            query, truncated = query[:max_query_length], truncated + 1
        pieces, offsets = tokenizer.encode_with_offsets(example.context_text)
        all_offsets.append(offsets)
        span = None
        if is_training and not example.is_impossible:
            span = _answer_pieces(offsets, example.start_char,
                                  example.start_char + len(example.answer_text))
        window_length = max_seq_length - len(query) - 3
        starts = _window_starts(len(pieces), window_length, doc_stride)
        owned = _max_context(starts, window_length, len(pieces))
        for w, start in enumerate(starts):
            end = min(start + window_length, len(pieces))
            head = [tokenizer.cls_id] + query + [tokenizer.sep_id]
            word_ids = head + pieces[start:end] + [tokenizer.sep_id]
            type_ids = [0] * len(head) + [1] * (end - start + 1)
            token_to_piece = {len(head) + i: start + i for i in range(end - start)}
            max_context = {p: (i in owned[w]) for p, i in token_to_piece.items()}
            padding = max_seq_length - len(word_ids)
            rows["input_word_ids"].append(word_ids + [tokenizer.pad_id] * padding)
            rows["input_mask"].append([1] * len(word_ids) + [0] * padding)
            rows["input_type_ids"].append(type_ids + [0] * padding)
            windows.append(Window(example_index, token_to_piece, max_context))
            if is_training:
                if span is not None and start <= span[0] and span[1] < end:
                    s, e = (span[0] - start + len(head), span[1] - start + len(head))
                else:
                    s = e = 0
                rows["start_positions"].append(s)
                rows["end_positions"].append(e)
                rows["is_impossible"].append(int(s == 0))
    arrays = {k: np.array(v, np.int32).reshape(len(windows), -1)
              if k.startswith("input") else np.array(v, np.int32)
              for k, v in rows.items()}
    if not windows:
        arrays = {k: np.zeros((0, max_seq_length), np.int32)
                  for k in ("input_word_ids", "input_mask", "input_type_ids")}
    return SquadFeatures(arrays, windows, all_offsets, truncated)


def _top_indices(logits, n):
    return np.argsort(-np.asarray(logits), kind="stable")[:n]


def postprocess(examples, features, start_logits, end_logits,
                no_answer_probs=None, n_best_size=20, max_answer_length=30):
    """Best answer text of every example, from per-window logits.

    Args:
        examples: the `SquadExample`s given to `convert_examples`.
        features: its `SquadFeatures`.
        start_logits, end_logits: `[F, T]` model outputs.
        no_answer_probs: optional `[F]` probability that a window holds no
            answer (the v2.0 head); an example's is the minimum over its
            windows.
        n_best_size: start and end candidates tried per window.
        max_answer_length: longest answer, in pieces.

    Returns:
        `(answers, scores, na_probs)`: dicts by question id of the best
        non-empty answer text, its score (start + end logit) and, with
        `no_answer_probs`, the example's no-answer probability.
    """
    best = {}
    na_probs = {}
    for f, window in enumerate(features.windows):
        example = examples[window.example_index]
        qid = example.qas_id
        if no_answer_probs is not None:
            na_probs[qid] = min(na_probs.get(qid, 1.0), float(no_answer_probs[f]))
        offsets = features.piece_offsets[window.example_index]
        for s in _top_indices(start_logits[f], n_best_size):
            if s not in window.token_to_piece or not window.max_context[s]:
                continue
            for e in _top_indices(end_logits[f], n_best_size):
                if (e not in window.token_to_piece or e < s
                        or e - s + 1 > max_answer_length):
                    continue
                score = float(start_logits[f][s] + end_logits[f][e])
                if qid in best and best[qid][0] >= score:
                    continue
                first = offsets[window.token_to_piece[s]][0]
                last = offsets[window.token_to_piece[e]][1]
                text = example.context_text[first:last].strip()
                if text:
                    best[qid] = (score, text)
    answers, scores = {}, {}
    for example in examples:
        score, text = best.get(example.qas_id, (float("-inf"), ""))
        answers[example.qas_id], scores[example.qas_id] = text, score
    return answers, scores, (na_probs if no_answer_probs is not None else None)


def apply_threshold(answers, na_probs, threshold):
    """Answers with "" wherever the no-answer probability exceeds `threshold`."""
    return {q: ("" if na_probs.get(q, 0.0) > threshold else a)
            for q, a in answers.items()}


def write_predictions(output_dir, answers, na_probs=None):
    """Writes the submission files: `predictions.json` (+ `null_odds.json`).

    Returns:
        The paths written.
    """
    os.makedirs(output_dir, exist_ok=True)
    paths = [os.path.join(output_dir, "predictions.json")]
    with open(paths[0], "w", encoding="utf-8") as f:
        json.dump(answers, f, indent=2, ensure_ascii=False)
    if na_probs is not None:
        paths.append(os.path.join(output_dir, "null_odds.json"))
        with open(paths[1], "w", encoding="utf-8") as f:
            json.dump(na_probs, f, indent=2)
    return paths
