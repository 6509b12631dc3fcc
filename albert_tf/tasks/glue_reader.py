"""GLUE task folders as distributed: readers, features, metrics, submissions.

Each task is a folder of tab-separated files (`train.tsv`, `dev.tsv`,
`test.tsv`; MNLI has `dev_matched.tsv`, `dev_mismatched.tsv`,
`test_matched.tsv`, `test_mismatched.tsv`). Every file has a header row except
CoLA's `train.tsv` and `dev.tsv`, whose four columns are source, label,
original judgement and sentence. Columns are found by header name, so the
extra parse columns of MNLI, or MNLI dev's five annotator labels, need no
special case. Fields are never quoted: a line is split on tabs only.

Bad rows are errors naming the file and line, never silently shifted
columns: a row with another number of columns than the header (a stray tab
in a field), a line that is not UTF-8, a label outside the task's label set,
an STS-B score that is not a number in [0, 5]. An empty file, or one with a
header and no rows, is an error too. One exception, as the official
scripts: QQP's distributed files have a few rows cut short, which are
skipped and counted.

Submissions follow the GLUE server: `<Task>.tsv` with the header
`index<TAB>prediction`, one row per test example, labels written as names
(`entailment`) for the NLI tasks and as numbers for the others.
"""

import collections
import dataclasses
import os
from typing import Optional
from typing import Tuple
from typing import Union

import numpy as np
from absl import logging

from albert_tf.tasks import metrics as metrics_lib
from albert_tf.training import baselines
from foundation import safe_io

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where the fields of one file are.

    Ints are column indices (files without a header); strings are header names.
    """

    text_a: Union[int, str]
    text_b: Union[int, str, None] = None
    label: Union[int, str, None] = None
    guid: Union[int, str, None] = None
    header: bool = True
    count: Optional[int] = None  # Columns of a file without a header.


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task: its label set, files and column layout."""

    name: str
    labels: Optional[Tuple[str, ...]]  # None: regression (STS-B)
    files: dict  # split -> file name
    columns: dict  # split -> Columns
    submission_name: str
    primary_metric: str
    # QQP's distributed files hold a few short rows: skipped, not errors.
    skips_short_rows: bool = False

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def num_classes(self):
        return 1 if self.labels is None else len(self.labels)


def _pair(a, b, label, test_guid="index"):
    return {"train": Columns(a, b, label), "dev": Columns(a, b, label),
            "test": Columns(a, b, None, test_guid)}


_ENTAIL = ("entailment", "not_entailment")
TASKS = {
    "cola": GlueTask(
        "cola", ("0", "1"),
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        {"train": Columns(3, None, 1, header=False, count=4),
         "dev": Columns(3, None, 1, header=False, count=4),
         "test": Columns("sentence", None, None, "index")},
        "CoLA.tsv", "matthews_corrcoef"),
    "sst-2": GlueTask(
        "sst-2", ("0", "1"),
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("sentence", None, "label"), "SST-2.tsv", "accuracy"),
    "mrpc": GlueTask(
        "mrpc", ("0", "1"),
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("#1 String", "#2 String", "Quality"), "MRPC.tsv", "f1"),
    "sts-b": GlueTask(
        "sts-b", None,
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "score"), "STS-B.tsv",
        "pearson_spearman"),
    "qqp": GlueTask(
        "qqp", ("0", "1"),
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("question1", "question2", "is_duplicate", test_guid="id"),
        "QQP.tsv", "f1", skips_short_rows=True),
    "mnli": GlueTask(
        "mnli", ("contradiction", "entailment", "neutral"),
        {"train": "train.tsv", "dev": "dev_matched.tsv",
         "test": "test_matched.tsv"},
        _pair("sentence1", "sentence2", "gold_label"), "MNLI-m.tsv",
        "accuracy"),
    "mnli-mm": GlueTask(
        "mnli-mm", ("contradiction", "entailment", "neutral"),
        {"train": "train.tsv", "dev": "dev_mismatched.tsv",
         "test": "test_mismatched.tsv"},
        _pair("sentence1", "sentence2", "gold_label"), "MNLI-mm.tsv",
        "accuracy"),
    "qnli": GlueTask(
        "qnli", _ENTAIL,
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("question", "sentence", "label"), "QNLI.tsv", "accuracy"),
    "rte": GlueTask(
        "rte", _ENTAIL,
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "label"), "RTE.tsv", "accuracy"),
    "wnli": GlueTask(
        "wnli", ("0", "1"),
        {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
        _pair("sentence1", "sentence2", "label"), "WNLI.tsv", "accuracy"),
}

# Other spellings, including the official scripts' task names.
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mismnli": "mnli-mm",
            "mnli_mismatched": "mnli-mm", "mnli-m": "mnli",
            "mnli_matched": "mnli"}


def get_task(name):
    """The `GlueTask` for a task name (case-insensitive, official aliases too).

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key not in TASKS:
        raise ValueError(f"--task_name={name} is not a GLUE task; known "
                         f"tasks: {', '.join(sorted(TASKS))}. Received: "
                         f"task_name={name!r}")
    return TASKS[key]


@dataclasses.dataclass
class InputExample:
    """One example: text (a pair for pair tasks) and a label (None for test)."""

    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Union[str, float, None] = None


class DataError(ValueError):
    """A task file is missing, or holds a value outside the task's format."""


def read_examples(task, data_dir, split):
    """Reads one split of a GLUE task folder.

    Args:
        task: a `GlueTask` or a task name.
        data_dir: the task folder (e.g. `glue_data/MRPC`).
        split: "train", "dev" or "test".

    Returns:
        `(examples, skipped)`: a list of `InputExample` and a `Counter` of
        skipped rows by reason ("missing_columns", QQP only).

    Raises:
        DataError: a missing or empty file, a missing header column, or a
            bad row (not UTF-8, another column count, a bad label), naming
            the file and line.
        ValueError: unknown split.
    """
    if isinstance(task, str):
        task = get_task(task)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}. Received: {split!r}")
    if not os.path.isdir(data_dir):
        raise DataError(f"--data_dir={data_dir} is not a folder (it must hold "
                        f"the {task.name} task's .tsv files)")
    path = os.path.join(data_dir, task.files[split])
    if not os.path.isfile(path):
        raise DataError(f"--data_dir={data_dir} has no {task.files[split]} "
                        f"(the {split} file of GLUE task {task.name!r})")
    columns = task.columns[split]
    rows = _read_rows(path)
    if not rows:
        raise DataError(f"{path} is empty; expected the {split} rows of GLUE "
                        f"task {task.name!r}")
    start = 0
    index = {}
    expected = columns.count
    if columns.header:
        header = [h.strip() for h in rows[0][1]]
        wanted = [c for c in (columns.text_a, columns.text_b, columns.label,
                              columns.guid) if c is not None]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise DataError(f"{path}:{rows[0][0]}: the header lacks the "
                            f"columns {missing} of GLUE task {task.name!r}. "
                            f"Received header: {header}")
        index = {name: header.index(name) for name in wanted}
        expected = len(header)
        start = 1
        if len(rows) == 1:
            raise DataError(f"{path} holds a header and no rows")

    def position(column):
        return column if isinstance(column, int) else index[column]

    needed = 1 + max(position(c) for c in (columns.text_a, columns.text_b,
                                           columns.label, columns.guid)
                     if c is not None)
    examples, skipped = [], collections.Counter()
    for line_number, row in rows[start:]:
        if not _row_fits(task, row, expected, needed, path, line_number):
            skipped["missing_columns"] += 1
            continue
        guid = (row[position(columns.guid)] if columns.guid is not None
                else f"{split}-{line_number}")
        label = None
        if columns.label is not None:
            label = _check_label(task, row[position(columns.label)].strip(),
                                 path, line_number)
        examples.append(InputExample(
            guid=guid, text_a=row[position(columns.text_a)],
            text_b=(row[position(columns.text_b)]
                    if columns.text_b is not None else None),
            label=label))
    if skipped:
        logging.warning("%s: skipped %d rows with missing columns (of %d).",
                        path, skipped["missing_columns"], len(rows) - start)
    return examples, skipped


def _read_rows(path):
    """`(line number, fields)` of each non-blank line of a TSV file.

    Raises:
        DataError: a line that is not UTF-8 (names the file and line).
    """
    with open(path, "rb") as f:
        data = f.read()
    rows = []
    # Lines end in "\n" (or "\r\n"); a lone "\r" inside a field is text.
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            # utf-8-sig: MRPC's files start with a byte-order mark.
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as error:
            raise DataError(
                f"{path}:{number}: not UTF-8 text (byte 0x{raw[error.start]:02x}"
                f" at column {error.start + 1}); save the file as UTF-8"
            ) from None
        line = line.removesuffix("\r")
        if line:
            rows.append((number, line.split("\t")))
    return rows


def _row_fits(task, row, expected, needed, path, line_number):
    """Whether a row has the file's columns; False for a row to skip.

    Raises:
        DataError: a row with another number of columns.
    """
    if expected is None:
        if len(row) >= needed:
            return True
    elif len(row) == expected:
        return True
    if task.skips_short_rows and len(row) < (expected or needed):
        return False
    wanted = expected if expected is not None else f"at least {needed}"
    raise DataError(
        f"{path}:{line_number}: {len(row)} tab-separated columns, expected "
        f"{wanted} (a tab inside a field, or a row cut short?)")


def _check_label(task, value, path, line_number):
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            score = float("nan")
        if not 0.0 <= score <= 5.0:
            raise DataError(f"{path}:{line_number}: the {task.name} score must "
                            f"be a number in [0, 5]. Received: {value!r}")
        return score
    if value not in task.labels:
        raise DataError(f"{path}:{line_number}: label outside the {task.name} "
                        f"label set {list(task.labels)}. Received: {value!r}")
    return value


def truncate_pair(tokens_a, tokens_b, max_length):
    """Trims the longer list from its end until the pair fits (in place).

    Returns:
        Whether anything was removed.
    """
    truncated = False
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()
        truncated = True
    return truncated


def pack_ids(tokenizer, ids_a, ids_b, max_seq_length):
    """`[CLS] a [SEP] (b [SEP])`, zero padded: `(word_ids, mask, type_ids, truncated)`.

    Inputs are lists of piece ids; they are copied before truncation.
    """
    ids_a, ids_b = list(ids_a), list(ids_b or [])
    reserved = 3 if ids_b else 2
    if max_seq_length <= reserved:
        raise ValueError("max_seq_length must leave room for text. "
                         f"Received: max_seq_length={max_seq_length}")
    truncated = truncate_pair(ids_a, ids_b, max_seq_length - reserved)
    word_ids = [tokenizer.cls_id] + ids_a + [tokenizer.sep_id]
    type_ids = [0] * len(word_ids)
    if ids_b:
        word_ids += ids_b + [tokenizer.sep_id]
        type_ids += [1] * (len(ids_b) + 1)
    mask = [1] * len(word_ids)
    padding = max_seq_length - len(word_ids)
    return (word_ids + [tokenizer.pad_id] * padding, mask + [0] * padding,
            type_ids + [0] * padding, truncated)


def convert_examples(examples, task, tokenizer, max_seq_length):
    """Tokenizes and packs examples into model inputs.

    Args:
        examples: `InputExample`s.
        task: a `GlueTask` or name.
        tokenizer: a `tasks.tokenization.Tokenizer`.
        max_seq_length: T.

    Returns:
        `(features, num_truncated)`: a dict of NumPy arrays, the three model
        inputs (int32 `[N, T]`) and `label_ids` (int32 class index, float32
        score for STS-B, -1 / NaN when the example has no label).
    """
    if isinstance(task, str):
        task = get_task(task)
    ids_a = tokenizer.encode_batch([e.text_a for e in examples])
    ids_b = tokenizer.encode_batch([e.text_b or "" for e in examples])
    rows = [pack_ids(tokenizer, a, b if e.text_b is not None else None,
                     max_seq_length)
            for e, a, b in zip(examples, ids_a, ids_b)]
    features = {
        "input_word_ids": np.array([r[0] for r in rows], np.int32).reshape(
            -1, max_seq_length),
        "input_mask": np.array([r[1] for r in rows], np.int32).reshape(
            -1, max_seq_length),
        "input_type_ids": np.array([r[2] for r in rows], np.int32).reshape(
            -1, max_seq_length),
    }
    if task.is_regression:
        features["label_ids"] = np.array(
            [np.nan if e.label is None else e.label for e in examples],
            np.float32)
    else:
        features["label_ids"] = np.array(
            [-1 if e.label is None else task.labels.index(e.label)
             for e in examples], np.int32)
    return features, sum(r[3] for r in rows)


def compute_metrics(task, label_ids, outputs):
    """The task's metrics from labels and model outputs.

    Args:
        task: a `GlueTask` or name.
        label_ids: class indices (or STS-B scores).
        outputs: logits `[N, C]` (or scores `[N]` / `[N, 1]` for STS-B).

    Returns:
        A dict of metrics, including `score`: the task's primary metric.
    """
    if isinstance(task, str):
        task = get_task(task)
    outputs = np.asarray(outputs)
    if task.is_regression:
        scores = outputs.reshape(-1)
        result = {"pearson": metrics_lib.pearson(label_ids, scores),
                  "spearman": metrics_lib.spearman(label_ids, scores)}
        result["pearson_spearman"] = (result["pearson"] + result["spearman"]) / 2
    else:
        predictions = np.argmax(outputs, axis=-1)
        result = _classification_metrics(task, label_ids, predictions)
        # Each metric beside what always answering the dev set's most
        # frequent class gets, and how many classes the model answered.
        majority, _ = baselines.majority(label_ids)
        constant = np.full_like(np.asarray(label_ids), majority)
        result.update({f"majority_{name}": value for name, value in
                       _classification_metrics(task, label_ids,
                                               constant).items()})
        result.update(baselines.classifier_answers(label_ids, predictions))
    result["score"] = result[task.primary_metric]
    return result


def _classification_metrics(task, label_ids, predictions):
    result = {"accuracy": metrics_lib.accuracy(label_ids, predictions)}
    if task.name == "cola":
        result["matthews_corrcoef"] = metrics_lib.matthews_corrcoef(
            label_ids, predictions)
    if task.name in ("mrpc", "qqp"):
        result["f1"] = metrics_lib.f1(label_ids, predictions)
    return result


def prediction_labels(task, outputs):
    """Label names (or scores) predicted from model outputs."""
    if isinstance(task, str):
        task = get_task(task)
    outputs = np.asarray(outputs)
    if task.is_regression:
        return [float(s) for s in outputs.reshape(-1)]
    return [task.labels[i] for i in np.argmax(outputs, axis=-1)]


def write_submission(task, examples, outputs, output_dir):
    """Writes `<Task>.tsv` in the GLUE server's format.

    Args:
        task: a `GlueTask` or name.
        examples: the test `InputExample`s (their guids are the indices).
        outputs: the model outputs for them, in order.
        output_dir: folder to write into.

    Returns:
        The path written.

    Raises:
        safe_io.OutputError: the file could not be written (names it).
    """
    if isinstance(task, str):
        task = get_task(task)
    labels = prediction_labels(task, outputs)
    if len(labels) != len(examples):
        raise ValueError("One output per example is needed. Received: "
                         f"{len(labels)} outputs for {len(examples)} examples")
    path = os.path.join(output_dir, task.submission_name)
    rows = ["index\tprediction\n"]
    for example, label in zip(examples, labels):
        value = f"{label:.3f}" if task.is_regression else label
        rows.append(f"{example.guid}\t{value}\n")
    # Whole or not at all: a full disk is an error naming the file.
    safe_io.write_atomically(path, "".join(rows))
    return path
