"""The quickstart's downstream tasks: questions about held-out text never
pretrained on (`TASKS`), labelled by the corpus's own structure, written as
TSV files (`write_tasks`, one `TaskFiles` a task), read back (`load_task`),
encoded (`encode_task`) and fine-tuned on (`finetune`, the user's path: an
exported encoder SavedModel or an `AlbertEncoder` with a dense layer on
`pooled_output`, trained with the official AdamW recipe). What each task
measures, how its examples are dealt and why, with an example:
docs/quickstart.md ("The downstream tasks").
"""

import csv
import dataclasses
import io
import os
import random
from typing import Optional

import numpy as np

from albert_apps.quickstart import data
from foundation import safe_io

# TensorFlow and the model code are imported where they are used (the
# encoding and fine-tuning functions below): the tasks' text side (passages,
# `choose_every`) checks a corpus before the job loads TensorFlow.

# name -> (labels, what it measures). The order is the report's.
NUM_SECTIONS = 4
TASKS = {
    "section": (
        tuple("section %d of %d" % (i + 1, NUM_SECTIONS)
              for i in range(NUM_SECTIONS)),
        "which quarter of the held-out text (in corpus order) is a passage "
        "from? (what a text is about: topic, vocabulary)"),
    "sentence_order": (
        ("in order", "swapped"),
        "are two adjacent passages of a held-out document in order or "
        "swapped? (discourse order, the pretraining SOP objective itself)"),
}
# Few labelled examples to learn from, many to measure on (the accuracy of
# 1000 dev examples has a 95% binomial interval of about ±3 points).
NUM_TRAIN, NUM_DEV = 400, 1000
MAX_DEV = 2000  # More dev examples than this add little.
# Tokens a fine-tuning example needs: one passage fits in 48.
SEQUENCE_LENGTHS = {"section": 48}
PASSAGE_WORDS = 24  # Two passages fill about 64 tokens.
PAIRS_PER_DOCUMENT = 16  # Bounds how much one document weighs.
TASK_FILES = ("train.tsv", "dev.tsv")


@dataclasses.dataclass
class TaskFiles:
    """What `write_task` wrote: the task's `name`, the `train` and `dev`
    pairs written, the usable `documents` found, the pairs `wanted`
    (`[num_train, num_dev]`), `short` (a sentence when fewer than wanted,
    else None) and `task_dir`."""

    name: str
    train: int
    dev: int
    documents: int
    wanted: list
    short: Optional[str]
    task_dir: str


@dataclasses.dataclass
class Task:
    """The examples of `load_task`: `(first, second)` text pairs and labels."""

    train_pairs: list
    train_labels: np.ndarray
    dev_pairs: list
    dev_labels: np.ndarray
    labels: tuple = TASKS["sentence_order"][0]
    name: str = "sentence_order"


def passages(document, max_words=PASSAGE_WORDS):
    """Cuts a document (a list of sentences) into passages: runs of
    consecutive sentences of at most `max_words` words (a longer sentence is
    a passage of its own)."""
    out, current, words = [], [], 0
    for sentence in document:
        n = len(sentence.split())
        if current and words + n > max_words:
            out.append(" ".join(current))
            current, words = [], 0
        current.append(sentence)
        words += n
    if current:
        out.append(" ".join(current))
    return [p.replace("\t", " ") for p in out]


def capacity(task, num_passages, per_document=PAIRS_PER_DOCUMENT):
    """Pairs of `task` a document of `num_passages` passages gives."""
    if num_passages < 2:
        return 0
    if task == "sentence_order":
        return min(per_document, num_passages - 1)
    return min(per_document, num_passages)


# Of a user's corpus, one document in `every` goes downstream: `every` is
# chosen from the corpus (`choose_every`), between these.
MIN_EVERY, MAX_EVERY = 3, 10


def choose_every(documents, max_chars=None, tasks=tuple(TASKS),
                 wanted=NUM_TRAIN + NUM_DEV, slack=1.1):
    """How many documents of a user's corpus give one downstream document:
    the largest `every` in [MIN_EVERY, MAX_EVERY] whose downstream documents
    give every task `slack * wanted` pairs (MIN_EVERY when none does).

    Args:
        documents: the corpus's documents (lists of sentences), in order.
        max_chars: the cap on the pretraining text (`split_corpus`'s), which
            decides how far the corpus is read.
        tasks, wanted, slack: the tasks and the train + dev pairs wanted.
    """
    sizes = []  # (characters, pairs of each task) per document.
    limit = max_chars and max_chars * MIN_EVERY / (MIN_EVERY - 1)
    total = 0
    for document in documents:
        chars = sum(len(s) + 1 for s in document) + 1
        count = len(passages(document))
        sizes.append((chars, [capacity(t, count) for t in tasks]))
        total += chars
        if limit and total >= limit:
            break
    for every in range(MAX_EVERY, MIN_EVERY - 1, -1):
        pretraining, pairs = 0, [0] * len(tasks)
        for index, (chars, caps) in enumerate(sizes):
            if index % every == every - 1:
                pairs = [a + b for a, b in zip(pairs, caps)]
            else:
                pretraining += chars
                if max_chars and pretraining >= max_chars:
                    break
        if min(pairs) >= slack * wanted:
            return every
    return MIN_EVERY


def _order_pairs(docs, rng, per_document):
    rows = []
    for doc, _ in docs:
        starts = list(range(len(doc) - 1))
        for i in sorted(rng.sample(starts, min(per_document, len(starts)))):
            first, second = doc[i], doc[i + 1]
            swapped = rng.random() < 0.5
            if swapped:
                first, second = second, first
            rows.append((int(swapped), first, second))
    return rows


def _section_passages(docs, rng, per_document):
    """Up to `per_document` passages of each document, labelled with the
    document's section; the second text is empty."""
    rows = []
    for doc, section in docs:
        for passage in rng.sample(doc, min(per_document, len(doc))):
            rows.append((section, passage, ""))
    return rows


def sections(documents, per_document=PAIRS_PER_DOCUMENT,
             num_sections=NUM_SECTIONS):
    """The section of each document (lists of passages, in corpus order):
    the documents cut into `num_sections` runs that give about the same
    number of examples."""
    sizes = [capacity("section", len(d), per_document) for d in documents]
    total, seen, out = max(1, sum(sizes)), 0, []
    for size in sizes:
        out.append(min(num_sections - 1, seen * num_sections // total))
        seen += size
    return out


_BUILDERS = {"sentence_order": _order_pairs,
             "section": _section_passages}


def _write_tsv(path, rows):
    text = io.StringIO()
    writer = csv.writer(text, delimiter="\t", lineterminator="\n",
                        quoting=csv.QUOTE_NONE, escapechar="\\")
    writer.writerow(("label", "first", "second"))
    writer.writerows(rows)
    safe_io.write_atomically(path, text.getvalue())


def _deal(docs, task, num_train, per_document):
    """Splits shuffled documents: train until it holds `num_train` pairs
    (at most half of the documents), dev the rest."""
    total, cut = 0, 0
    while cut < len(docs) // 2 and total < num_train:
        total += capacity(task, len(docs[cut][0]), per_document)
        cut += 1
    return docs[:cut], docs[cut:]


def write_task(task, documents_file, task_dir, num_train=NUM_TRAIN,
               num_dev=NUM_DEV, max_dev=MAX_DEV, seed=0,
               per_document=PAIRS_PER_DOCUMENT):
    """Writes `train.tsv` and `dev.tsv` of one task (see `TASKS`).

    Args:
        task: a name of `TASKS`.
        documents_file: the held-out documents (one sentence a line, a blank
            line between documents).
        task_dir: where the two TSV files go (columns `label`, `first`,
            `second`; empty for the one-passage examples of `section`).
        num_train: training pairs wanted (fewer when the documents cannot
            give them: train takes at most half of the documents).
        num_dev: dev pairs wanted; short of it, `short` says so.
        max_dev: dev pairs kept at most (a seeded sample).
        seed: the shuffle, cut and swap seed.
        per_document: pairs a document gives at most.

    Returns:
        A `TaskFiles`.

    Raises:
        ValueError: an unknown task, or fewer than 4 documents of at least
            two passages.
    """
    if task not in TASKS:
        raise ValueError("Unknown downstream task %r: one of %s" % (
            task, sorted(TASKS)))
    documents = [p for p in (passages(d) for d in
                             data.read_documents(documents_file))
                 if len(p) >= 2]
    if len(documents) < 4:
        raise ValueError(
            "The downstream task needs at least 4 held-out documents of two "
            "or more passages. Received: %d in %s" % (len(documents),
                                                      documents_file))
    documents = list(zip(documents, sections(documents, per_document)))
    rng = random.Random(seed)
    rng.shuffle(documents)
    train_docs, dev_docs = _deal(documents, task, num_train, per_document)
    rows = {"train": _BUILDERS[task](train_docs, rng, per_document),
            "dev": _BUILDERS[task](dev_docs, rng, per_document)}
    rng.shuffle(rows["train"])
    rows["train"] = rows["train"][:num_train]
    rng.shuffle(rows["dev"])
    rows["dev"] = rows["dev"][:max_dev]
    os.makedirs(task_dir, exist_ok=True)
    for split in ("train", "dev"):
        _write_tsv(os.path.join(task_dir, split + ".tsv"), rows[split])
    short = None
    if len(rows["train"]) < num_train or len(rows["dev"]) < num_dev:
        short = ("the held-out text gives %d train / %d dev examples of %s, "
                 "fewer than the %d / %d wanted: a larger corpus (or longer "
                 "documents) gives more" % (len(rows["train"]),
                                            len(rows["dev"]), task,
                                            num_train, num_dev))
    return TaskFiles(name=task, train=len(rows["train"]),
                     dev=len(rows["dev"]), documents=len(documents),
                     wanted=[num_train, num_dev], short=short,
                     task_dir=task_dir)


def write_tasks(documents_file, task_root, tasks=tuple(TASKS), **kwargs):
    """Writes every task of `tasks` the documents support, under
    `task_root/<name>/`; returns their `TaskFiles` (a task with no dev or
    train pair is left out)."""
    written = []
    for name in tasks:
        counts = write_task(name, documents_file,
                            os.path.join(task_root, name), **kwargs)
        if counts.train and counts.dev:
            written.append(counts)
    return written


def _read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE,
                            escapechar="\\")
        header = next(reader, None)
        if header != ["label", "first", "second"]:
            raise ValueError("%s is not a task file of write_task: its header "
                             "is %r" % (path, header))
        rows = list(reader)
    pairs = [(first, second) for _, first, second in rows]
    labels = np.array([int(label) for label, _, _ in rows], np.int32)
    return pairs, labels


def load_task(task_dir):
    """Reads what `write_task` wrote; the folder's name is the task's.

    Raises:
        FileNotFoundError: a task file is missing.
        ValueError: a file is not in the task's format.
    """
    for name in TASK_FILES:
        if not os.path.exists(os.path.join(task_dir, name)):
            raise FileNotFoundError("No %s in %s (see write_task)" % (
                name, task_dir))
    train_pairs, train_labels = _read_tsv(os.path.join(task_dir, "train.tsv"))
    dev_pairs, dev_labels = _read_tsv(os.path.join(task_dir, "dev.tsv"))
    name = os.path.basename(os.path.normpath(task_dir))
    labels = TASKS[name][0] if name in TASKS else ("0", "1")
    return Task(train_pairs, train_labels, dev_pairs, dev_labels, labels, name)


def encode_pairs(preprocessor, pairs, seq_length):
    """Text pairs to encoder inputs (int32 NumPy arrays `[B, seq_length]`)."""
    import tensorflow as tf

    from albert_tf.models.encoder import INPUT_NAMES
    inputs = preprocessor.encode(tf.constant([a for a, _ in pairs]),
                                 tf.constant([b for _, b in pairs]),
                                 seq_length=seq_length)
    return {name: inputs[name].numpy() for name in INPUT_NAMES}


def _load_encoder(encoder):
    from export import keras_layer
    if isinstance(encoder, (str, os.PathLike)):
        return keras_layer.load_exported_encoder(os.fspath(encoder))
    return encoder


def sequence_length(task, max_seq_length):
    """T of the fine-tuning examples of `task` (at most `max_seq_length`)."""
    return min(max_seq_length, SEQUENCE_LENGTHS.get(task, max_seq_length))


def encode_task(spm_model, task, max_seq_length=64, do_lower_case=True):
    """The task's train and dev texts as encoder inputs (two dicts of int32
    NumPy arrays `[N, max_seq_length]`)."""
    from albert_tf.layers.preprocessing import TextPreprocessor
    with open(spm_model, "rb") as f:
        preprocessor = TextPreprocessor(f.read(), max_seq_length,
                                        do_lower_case)
    return (encode_pairs(preprocessor, task.train_pairs, max_seq_length),
            encode_pairs(preprocessor, task.dev_pairs, max_seq_length))


def finetune(encoder, spm_model, task, seed=0, num_train_steps=200,
             batch_size=32, learning_rate=3e-4, warmup_ratio=0.1,
             max_seq_length=64, do_lower_case=True):
    """Fine-tunes `encoder` on `task` and measures dev accuracy.

    Args:
        encoder: an exported encoder SavedModel folder (loaded with
            `export.keras_layer.load_exported_encoder`) or an
            `AlbertEncoder`; it is trained in place.
        spm_model: the SentencePiece model file of the encoder's vocabulary.
        task: what `load_task` returned.
        seed: seeds the head's initialization, dropout and the batch order.
        num_train_steps: optimizer steps.
        batch_size: examples a step.
        learning_rate: peak AdamW learning rate.
        warmup_ratio: share of the steps with a linear warmup.
        max_seq_length: T of the packed pairs.
        do_lower_case: as the vocabulary was built.

    Returns:
        A dict: `dev_accuracy`, `dev_loss`, `train_loss` (last step),
        `steps`, `seconds`, and `model` (the fine-tuned Keras model, not
        JSON-serializable).
    """
    from albert_apps.quickstart import finetuning
    train_x, dev_x = encode_task(spm_model, task, max_seq_length,
                                 do_lower_case)
    finetuner = finetuning.Finetuner(
        _load_encoder(encoder), len(task.labels), num_train_steps,
        batch_size=batch_size, learning_rate=learning_rate,
        warmup_ratio=warmup_ratio)
    result = finetuner.run(train_x, task.train_labels, dev_x,
                           task.dev_labels, seed=seed)
    return dict(result, model=finetuner.model)
