"""The quickstart's own data helpers: the splits and the baseline.

The corpus is split by whole documents three ways:
- pretraining documents (`train.txt`);
- held-out documents (`eval.txt`, one pretraining-corpus document in
  `EVAL_EVERY`), on which held-out masked-LM and SOP accuracy are measured,
  so evaluation measures text the model never saw (not new maskings of
  training sentences);
- downstream documents (`downstream.txt`), the text of the fine-tuning task
  (`albert_apps.quickstart.downstream`), never pretrained on either: for the
  built-in corpus, the standard-library packages of `DOWNSTREAM_PACKAGES`;
  for a user's corpus, one document in a number chosen from the corpus
  (`downstream.choose_every`).

`masked_token_baseline` is the accuracy a model reaches without learning
anything but token frequencies, the number the masked-LM accuracy is read
against.
"""

import collections
import os
import sysconfig

from data_prep import builtin_corpus
from foundation import safe_io

EVAL_EVERY = 10  # One pretraining-corpus document in EVAL_EVERY is held out.
# Standard-library packages whose docstrings pretraining never sees: the
# downstream task's text (about 1,300 documents in Python 3.11).
DOWNSTREAM_PACKAGES = ("asyncio", "distutils", "email", "http", "importlib",
                       "lib2to3", "logging", "tkinter", "unittest", "urllib",
                       "xml")


def read_documents(path):
    """The documents of a corpus file (one sentence a line, a blank line
    between documents), each a list of sentences."""
    document = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line:
                document.append(line)
            elif document:
                yield document
                document = []
    if document:
        yield document


def builtin_documents(roots=None, exclude=()):
    """The built-in corpus's pretraining documents: docstrings of the
    standard library and the installed packages (`data_prep.builtin_corpus`),
    without the `DOWNSTREAM_PACKAGES`.

    Args:
        roots: folders to read; default: the standard library, then the
            installed packages.
        exclude: documents (lists of sentences) left out wherever they
            appear, e.g. the downstream documents (a docstring can be copied
            into another package).
    """
    stdlib = sysconfig.get_paths()["stdlib"]
    roots = roots or [stdlib, sysconfig.get_paths()["purelib"]]
    excluded = {"\n".join(document) for document in exclude}
    for root in roots:
        held_out = DOWNSTREAM_PACKAGES if root == stdlib else ()
        for module, sentences in builtin_corpus.iter_module_documents([root]):
            if (module.split(".")[0] not in held_out and
                    "\n".join(sentences) not in excluded):
                yield sentences


def builtin_downstream_documents():
    """The docstrings of the `DOWNSTREAM_PACKAGES` (a list)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    return list(builtin_corpus.iter_documents(
        [os.path.join(stdlib, name) for name in DOWNSTREAM_PACKAGES]))


class _Writers:
    """Text files written under their temporary names
    (`safe_io.AtomicFile`), renamed on success, so each output appears
    complete or not at all."""

    def __init__(self, paths):
        self.files = {}
        try:
            for path in paths:
                if path:
                    self.files[path] = safe_io.AtomicFile(path)
        except safe_io.OutputError:
            self.close(commit=False)
            raise

    def write(self, path, document):
        self.files[path].write(("\n".join(document) + "\n\n").encode("utf-8"))

    def close(self, commit):
        for f in self.files.values():
            if commit:
                f.commit()
            else:
                f.abort()


def deal(documents, eval_every=EVAL_EVERY, downstream_every=0,
         max_chars=None):
    """Where each document goes: the rule of `split_corpus`.

    Args:
        documents: an iterable of documents (lists of sentences).
        eval_every, downstream_every, max_chars: see `split_corpus`.

    Yields:
        `(split, document)`, split one of "train", "eval" and "downstream",
        until the pretraining and held-out documents hold `max_chars`
        characters.
    """
    kept, characters = 0, 0
    for index, document in enumerate(documents):
        if downstream_every and index % downstream_every == downstream_every - 1:
            yield "downstream", document
            continue
        yield ("eval" if kept % eval_every == eval_every - 1 else "train",
               document)
        kept += 1
        characters += sum(len(s) + 1 for s in document) + 1
        if max_chars and characters >= max_chars:
            return


def split_corpus(documents, train_file, eval_file, downstream_file=None,
                 eval_every=EVAL_EVERY, downstream_every=0, max_chars=None,
                 downstream_documents=()):
    """Splits documents into pretraining, held-out and downstream files
    (the rule of `deal`), each written whole or not at all.

    Args:
        documents: an iterable of documents (lists of sentences).
        train_file, eval_file: where the pretraining and the held-out
            documents go: every `eval_every`-th document that does not go
            downstream is held out.
        downstream_file: where the downstream documents go (None: nowhere).
        eval_every: one pretraining-corpus document in this many is held out.
        downstream_every: when positive, one document of `documents` in this
            many goes downstream.
        max_chars: stop once the pretraining and held-out documents hold this
            many characters (None: read everything).
        downstream_documents: more downstream documents (an iterable), read
            after `documents`.

    Returns:
        A dict of counts: `documents`, `sentences`, `characters` (of the
        pretraining and held-out documents), `train_documents`,
        `eval_documents`, `downstream_documents`.

    Raises:
        safe_io.OutputError: a file could not be written (names it).
    """
    counts = collections.Counter()
    files = {"train": train_file, "eval": eval_file,
             "downstream": downstream_file}
    writers = _Writers(files.values())
    committed = False
    try:
        for split, document in deal(
                documents, eval_every,
                downstream_every if downstream_file else 0, max_chars):
            writers.write(files[split], document)
            counts[split + "_documents"] += 1
            if split == "downstream":
                continue
            counts["documents"] += 1
            counts["sentences"] += len(document)
            counts["characters"] += sum(len(s) + 1 for s in document) + 1
        if downstream_file:
            for document in downstream_documents:
                writers.write(downstream_file, document)
                counts["downstream_documents"] += 1
        writers.close(commit=True)
        committed = True
    finally:
        if not committed:
            writers.close(commit=False)
    for key in ("documents", "sentences", "characters", "train_documents",
                "eval_documents", "downstream_documents"):
        counts.setdefault(key, 0)
    return dict(counts)


def masked_token_baseline(record_file, max_predictions_per_seq):
    """Accuracy of always predicting the most frequent masked token.

    Args:
        record_file: pretraining TFRecords (the official schema).
        max_predictions_per_seq: P of the records.

    Returns:
        `(accuracy, token_id, masked_tokens)` over every record of the file;
        `(0.0, -1, 0)` when nothing is masked.
    """
    # Loaded here: the corpus checks use this module before TensorFlow.
    import tensorflow as tf

    spec = {
        "masked_lm_ids": tf.io.FixedLenFeature(
            [max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature(
            [max_predictions_per_seq], tf.float32),
    }
    counts = collections.Counter()
    dataset = tf.data.TFRecordDataset(record_file).batch(256).map(
        lambda x: tf.io.parse_example(x, spec))
    for batch in dataset:
        ids = batch["masked_lm_ids"].numpy()
        counts.update(ids[batch["masked_lm_weights"].numpy() > 0].tolist())
    total = sum(counts.values())
    if not total:
        return 0.0, -1, 0
    token, count = counts.most_common(1)[0]
    return count / total, int(token), total
