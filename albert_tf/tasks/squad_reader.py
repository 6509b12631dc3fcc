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

Files: the official SQuAD v1.1 / v2.0 JSON (`{"version", "data": [articles
with "paragraphs" with "qas"]}`), and the Hugging Face `datasets` layout of
flat records `{"id", "title", "context", "question", "answers": {"text":
[...], "answer_start": [...]}}`, as JSON Lines (what `Dataset.to_json`
writes), a JSON list, or a JSON object with a "data" list of them; an
unanswerable v2.0 question has empty answer lists. Both are read into the
official nesting, which the evaluation reads too.

Bad data is an error naming the file and the question: a missing field or
a value of the wrong type, an `answer_start` outside the context, a
question id used twice, a file that is not UTF-8 JSON. An answer whose text
is not the context at `answer_start` is skipped in training and counted (a
few are expected); when most answers are, the offsets are wrong and it is
an error. A question without answers in a v1.1 training file is skipped
and counted.
"""

import collections
import dataclasses
import json
import os
from typing import List

import numpy as np
from absl import logging

from foundation import safe_io


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
    """The `data` list of a SQuAD file, in the official nesting, and its
    `version` string ("" for the `datasets` layout).

    Args:
        path: official SQuAD JSON, or `datasets` records (JSON Lines, a JSON
            list, or `{"data": [records]}`).

    Raises:
        DataError: no file, not UTF-8 JSON, neither layout, or a missing or
            mistyped field (names the file and the question).
    """
    if not os.path.isfile(path):
        raise DataError(f"No SQuAD file at {path}")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 text; save the file as "
                        "UTF-8") from None
    if not text.strip():
        raise DataError(f"{path} is empty; expected SQuAD JSON")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as whole:
        payload = _json_lines(path, text, whole)
    if isinstance(payload, dict) and "context" in payload:
        payload = [payload]  # JSON Lines of one record.
    if isinstance(payload, dict) and isinstance(payload.get("data"), list):
        data, version = payload["data"], str(payload.get("version", ""))
    elif isinstance(payload, list):
        data, version = payload, ""
    else:
        raise DataError(
            f"{path} is neither SQuAD JSON (an object with a 'data' list) nor "
            "Hugging Face datasets records (JSON Lines of objects with "
            "'context', 'question' and 'answers')")
    if data and all(isinstance(r, dict) and "paragraphs" not in r
                    and "context" in r for r in data):
        data = _nest_records(path, data)
    _check_articles(path, data)
    return data, version


def _json_lines(path, text, whole):
    """The records of a JSON Lines file (one JSON object per line).

    Raises:
        DataError: a line that is not JSON (names it); `whole`'s position
            when the file is not JSON Lines either.
    """
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1)
             if line.strip()]
    if len(lines) < 2 or not lines[0][1].lstrip().startswith("{"):
        raise DataError(f"{path}:{whole.lineno}: not valid JSON ({whole.msg}, "
                        f"column {whole.colno})") from None
    records = []
    for number, line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise DataError(f"{path}:{number}: not a JSON record ({error.msg},"
                            f" column {error.colno}); expected JSON Lines"
                            ) from None
    return records


def _nest_records(path, records):
    """`datasets` records -> the official articles/paragraphs/qas nesting."""
    articles = {}
    for number, record in enumerate(records, start=1):
        where = f"{path}: record {number}"
        for key in ("id", "context", "question", "answers"):
            if key not in record:
                raise DataError(f"{where} lacks {key!r}. Received keys: "
                                f"{sorted(record)}")
        answers = record["answers"]
        if not (isinstance(answers, dict)
                and isinstance(answers.get("text"), list)
                and isinstance(answers.get("answer_start"), list)):
            raise DataError(f"{where} (id {record['id']!r}): 'answers' must be "
                            "{'text': [...], 'answer_start': [...]}. Received: "
                            f"{str(answers)[:120]}")
        if len(answers["text"]) != len(answers["answer_start"]):
            raise DataError(f"{where} (id {record['id']!r}): 'answers' has "
                            f"{len(answers['text'])} texts and "
                            f"{len(answers['answer_start'])} answer_starts")
        title = str(record.get("title", ""))
        paragraphs = articles.setdefault(title, {})
        paragraph = paragraphs.setdefault(
            record["context"], {"context": record["context"], "qas": []})
        paragraph["qas"].append({
            "id": record["id"], "question": record["question"],
            "answers": [{"text": t, "answer_start": a} for t, a in zip(
                answers["text"], answers["answer_start"])],
            "is_impossible": not answers["text"]})
    return [{"title": title, "paragraphs": list(paragraphs.values())}
            for title, paragraphs in articles.items()]


def _check_articles(path, data):
    """Checks the official nesting's fields and types (names the place).

    Raises:
        DataError: a missing or mistyped field, an `answer_start` outside
            its context, or a question id used twice.
    """
    seen = set()
    for a, article in enumerate(data):
        if not (isinstance(article, dict)
                and isinstance(article.get("paragraphs"), list)):
            raise DataError(f"{path}: data[{a}] must be an article with a "
                            "'paragraphs' list")
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            if not (isinstance(paragraph, dict)
                    and isinstance(paragraph.get("context"), str)
                    and isinstance(paragraph.get("qas", []), list)):
                raise DataError(f"{where} must hold a 'context' string and a "
                                "'qas' list")
            for question in paragraph.get("qas", []):
                _check_question(where, question, paragraph["context"], seen)


def _check_question(where, question, context, seen):
    if not isinstance(question, dict):
        raise DataError(f"{where}: a question must be an object. Received: "
                        f"{type(question).__name__}")
    for field in ("id", "question"):
        if field not in question:
            raise DataError(f"{where}: a question lacks {field!r}. Received "
                            f"keys: {sorted(question)}")
    qid = question["id"]
    if not isinstance(question["question"], str):
        raise DataError(f"{where}: question {qid!r}: 'question' must be a "
                        "string")
    if qid in seen:
        raise DataError(f"{where}: the question id {qid!r} is used twice; "
                        "predictions are keyed by id")
    seen.add(qid)
    # bool("false") is True: a string here would silently mark a question
    # unanswerable.
    if not isinstance(question.get("is_impossible", False), bool):
        raise DataError(f"{where}: question {qid!r}: 'is_impossible' must be "
                        f"true or false. Received: {question['is_impossible']!r}")
    answers = question.get("answers", [])
    if not isinstance(answers, list):
        raise DataError(f"{where}: question {qid!r}: 'answers' must be a list")
    for answer in answers:
        if not (isinstance(answer, dict) and isinstance(answer.get("text"), str)
                and "answer_start" in answer):
            raise DataError(f"{where}: question {qid!r}: an answer needs "
                            "'text' and 'answer_start'. Received: "
                            f"{str(answer)[:120]}")
        start = answer["answer_start"]
        if isinstance(start, bool) or not isinstance(start, int):
            raise DataError(
                f"{where}: question {qid!r}: answer_start must be a whole "
                f"number of characters. Received: {start!r}")
        if not 0 <= start < max(len(context), 1):
            raise DataError(
                f"{where}: question {qid!r}: answer_start={start!r} is "
                f"outside its context of {len(context)} characters")


# More than this share of answers not at their answer_start: wrong offsets.
_MAX_MISMATCH_SHARE = 0.5


def read_examples(path, is_training, version_2_with_negative=False):
    """Reads SQuAD questions.

    Args:
        path: a SQuAD v1.1 or v2.0 file (see `load_dataset`).
        is_training: whether answers are needed (and bad ones skipped).
        version_2_with_negative: whether unanswerable questions are expected
            (v2.0). Without it, an unanswerable training question is skipped
            and counted as `unanswerable_in_v1`.

    Returns:
        `(examples, skipped)`: `SquadExample`s and a `Counter` of skipped
        questions by reason.

    Raises:
        DataError: the file is not SQuAD, a question is malformed, it holds
            no questions, or most answers are not at their `answer_start`.
    """
    data, _ = load_dataset(path)
    examples, skipped = [], collections.Counter()
    first_mismatch = None
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for question in paragraph.get("qas", []):
                answers = question.get("answers", [])
                impossible = bool(question.get("is_impossible", False)) or not answers
                example = SquadExample(
                    qas_id=question["id"], question_text=question["question"],
                    context_text=context, is_impossible=impossible,
                    answers=[a["text"] for a in answers])
                if is_training:
                    if impossible and not version_2_with_negative:
                        skipped["unanswerable_in_v1"] += 1
                        continue
                    if not impossible:
                        answer = answers[0]
                        start, text = answer["answer_start"], answer["text"]
                        if (not text or
                                context[start:start + len(text)] != text):
                            skipped["answer_mismatch"] += 1
                            first_mismatch = first_mismatch or question["id"]
                            continue
                        example.answer_text, example.start_char = text, start
                examples.append(example)
    answered = len(examples) + skipped["answer_mismatch"]
    if skipped["answer_mismatch"] > _MAX_MISMATCH_SHARE * max(answered, 1):
        raise DataError(
            f"{path}: in {skipped['answer_mismatch']} of {answered} questions "
            "the answer text is not the context at answer_start (first: "
            f"{first_mismatch!r}); answer_start must count characters of "
            "'context' from 0")
    if not examples and not skipped:
        raise DataError(f"{path} holds no questions")
    if is_training and not examples:
        # Training on nothing would "succeed" with an untrained model.
        raise DataError(
            f"{path}: no question to train on; all were skipped "
            f"({dict(skipped)}). Unanswerable questions need "
            "--version_2_with_negative")
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
    paths = [os.path.join(output_dir, "predictions.json")]
    # Whole or not at all: a full disk is an error naming the file.
    safe_io.write_atomically(
        paths[0], json.dumps(answers, indent=2, ensure_ascii=False))
    if na_probs is not None:
        paths.append(os.path.join(output_dir, "null_odds.json"))
        safe_io.write_atomically(paths[1], json.dumps(na_probs, indent=2))
    return paths
