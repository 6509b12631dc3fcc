"""RACE as distributed: JSON files under `<split>/{high,middle}/`.

Each file holds one article and its questions:
`{"id", "article", "questions": [...], "options": [[4 strings], ...],
"answers": ["A".."D", ...]}` (test files are distributed with answers too).
Every option becomes one packed sequence `[CLS] article [SEP] question+option
[SEP]`; a cloze question (with "_") has the option written into the blank,
otherwise the option follows the question. The question+option part keeps its
last `max_qa_length` pieces (the option is at the end), then the article is
cut to fit.

Bad data is an error naming the file (and question): a file that is not
UTF-8 JSON or not one article object, a missing field or a value of the
wrong type, a question with another number of options than `num_choices`,
an answer outside the option letters. A split without files says where it
looked (files must be under `<split>/high/` or `<split>/middle/`).

Predictions are written as `predictions.json`: file id -> list of predicted
letters, the layout of the files' own `answers`.
"""

import dataclasses
import glob
import json
import os
from typing import List
from typing import Optional

import numpy as np

from albert_tf.tasks import glue_reader
from foundation import safe_io

LEVELS = ("high", "middle")


class DataError(ValueError):
    """A RACE file is missing a field or holds an invalid value."""


@dataclasses.dataclass
class RaceExample:
    """One question: its article, the options and the answer index."""

    example_id: str  # "<file id>-<question index>"
    file_id: str
    article: str
    question: str
    options: List[str]
    label: Optional[int] = None


def read_examples(data_dir, split, num_choices=4, levels=LEVELS):
    """Reads every question of one split.

    Args:
        data_dir: the RACE folder (holding `train/`, `dev/`, `test/`).
        split: "train", "dev" or "test".
        num_choices: options each question must have.
        levels: which of "high" and "middle" to read.

    Returns:
        A list of `RaceExample`, files in sorted order.

    Raises:
        DataError: no files, a file that is not a RACE article, a missing or
            mistyped field, or a bad option count or answer.
    """
    if not os.path.isdir(data_dir):
        raise DataError(f"--data_dir={data_dir} is not a folder (it must hold "
                        "train/, dev/ and test/)")
    paths = []
    for level in levels:
        paths += sorted(glob.glob(os.path.join(data_dir, split, level, "*")))
    paths = [p for p in paths if os.path.isfile(p)]
    if not paths:
        folder = os.path.join(data_dir, split)
        stray = os.path.isdir(folder) and any(
            os.path.isfile(os.path.join(folder, n)) for n in os.listdir(folder))
        raise DataError(
            f"No RACE files under {folder} (looked in "
            f"{', '.join(os.path.join(folder, level) for level in levels)})"
            + ("; the files must be in those level folders" if stray else ""))
    letters = [chr(ord("A") + i) for i in range(num_choices)]
    examples = []
    for path in paths:
        examples += _read_file(path, num_choices, letters)
    return examples


def _load(path):
    """The JSON object of one RACE file (names the file on any error)."""
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text; RACE files are UTF-8 "
                        "JSON") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(record, dict):
        raise DataError(f"{path} must hold one RACE article (a JSON object). "
                        f"Received: a JSON {type(record).__name__}")
    return record


def _is_text_list(value, length=None):
    return (isinstance(value, list) and all(isinstance(v, str) for v in value)
            and (length is None or len(value) == length))


def _read_file(path, num_choices, letters):
    """The questions of one RACE file, checked."""
    record = _load(path)
    missing = [k for k in ("article", "questions", "options")
               if k not in record]
    if missing:
        raise DataError(f"{path} lacks the RACE fields {missing}. "
                        f"Received: {sorted(record)}")
    if not isinstance(record["article"], str):
        raise DataError(f"{path}: 'article' must be a string")
    if not _is_text_list(record["questions"]):
        raise DataError(f"{path}: 'questions' must be a list of strings")
    if not isinstance(record["options"], list):
        raise DataError(f"{path}: 'options' must be a list (one list of "
                        "options per question)")
    file_id = str(record.get("id", os.path.basename(path)))
    answers = record.get("answers")
    if answers is not None and not _is_text_list(answers):
        raise DataError(f"{path}: 'answers' must be a list of letters")
    if len(record["options"]) != len(record["questions"]) or (
            answers is not None and len(answers) != len(record["questions"])):
        raise DataError(f"{path}: questions, options and answers must have "
                        "the same length. Received: "
                        f"{len(record['questions'])}, {len(record['options'])}, "
                        f"{None if answers is None else len(answers)}")
    examples = []
    for q, (question, options) in enumerate(zip(record["questions"],
                                                record["options"])):
        if not _is_text_list(options, num_choices):
            count = len(options) if isinstance(options, list) else "not a list"
            raise DataError(f"{path} question {q}: expected a list of "
                            f"{num_choices} option strings. Received: {count}")
        label = None
        if answers is not None:
            if answers[q] not in letters:
                raise DataError(f"{path} question {q}: answer outside "
                                f"{letters}. Received: {answers[q]!r}")
            label = letters.index(answers[q])
        examples.append(RaceExample(f"{file_id}-{q}", file_id,
                                    record["article"], question,
                                    list(options), label))
    return examples


def question_with_option(question, option):
    """The second segment of one choice."""
    if "_" in question:
        return question.replace("_", option, 1)
    return f"{question} {option}"


def convert_examples(examples, tokenizer, max_seq_length, max_qa_length=128,
                     num_choices=4):
    """Packs examples into `[N, num_choices, T]` model inputs.

    Returns:
        `(features, num_truncated)`: a dict of int32 arrays, the three model
        inputs `[N, K, T]` and `label_ids` `[N]` (-1 without an answer), and
        how many choices were cut.
    """
    articles = tokenizer.encode_batch([e.article for e in examples])
    words, masks, types, truncated = [], [], [], 0
    for example, article in zip(examples, articles):
        qa_ids = tokenizer.encode_batch(
            [question_with_option(example.question, o) for o in example.options])
        for qa in qa_ids:
            cut = len(qa) > max_qa_length
            # Keep the end: that is where a non-cloze option is.
            w, m, t, was_cut = glue_reader.pack_ids(tokenizer, article,
                                                    qa[-max_qa_length:], max_seq_length)
            truncated += int(cut or was_cut)
            words.append(w)
            masks.append(m)
            types.append(t)
    shape = (len(examples), num_choices, max_seq_length)
    features = {
        "input_word_ids": np.array(words, np.int32).reshape(shape),
        "input_mask": np.array(masks, np.int32).reshape(shape),
        "input_type_ids": np.array(types, np.int32).reshape(shape),
        "label_ids": np.array([-1 if e.label is None else e.label
                               for e in examples], np.int32),
    }
    return features, truncated


def write_predictions(output_dir, examples, logits):
    """Writes `predictions.json`: file id -> predicted letters, in question order.

    Returns:
        The path written.
    """
    choices = np.argmax(np.asarray(logits), axis=-1)
    by_file = {}
    for example, choice in zip(examples, choices):
        by_file.setdefault(example.file_id, []).append(chr(ord("A") + int(choice)))
    path = os.path.join(output_dir, "predictions.json")
    # Whole or not at all: a full disk is an error naming the file.
    safe_io.write_atomically(path, json.dumps(by_file, indent=2))
    return path
