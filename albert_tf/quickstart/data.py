"""The quickstart's own data helpers: the held-out split and the baseline.

`split_corpus` holds out whole documents, so that evaluation measures text the
model never saw (not new maskings of training sentences);
`masked_token_baseline` is the accuracy a model reaches without learning
anything but token frequencies, the number the masked-LM accuracy is read
against.
"""

import collections
import os

import tensorflow as tf

EVAL_EVERY = 20  # One document in EVAL_EVERY is held out.


def split_corpus(input_file, train_file, eval_file, eval_every=EVAL_EVERY):
    """Splits a corpus by documents: every `eval_every`-th one is held out.

    Documents are separated by blank lines. Both outputs appear complete or
    not at all (written next to their final names, then renamed).

    Args:
        input_file: the corpus (one sentence a line).
        train_file: where the training documents go.
        eval_file: where the held-out documents go.
        eval_every: one document in this many is held out.

    Returns:
        A dict of counts: `documents`, `sentences`, `characters`,
        `train_documents`, `eval_documents`.
    """
    counts = collections.Counter()
    with open(input_file, encoding="utf-8", errors="replace") as f, \
            open(train_file + ".tmp", "w", encoding="utf-8") as train, \
            open(eval_file + ".tmp", "w", encoding="utf-8") as held_out:
        document = []

        def flush():
            if not document:
                return
            index = counts["documents"]
            out = held_out if index % eval_every == eval_every - 1 else train
            out.write("\n".join(document) + "\n\n")
            counts["documents"] += 1
            counts["eval_documents" if out is held_out else
                   "train_documents"] += 1
            document.clear()

        for line in f:
            line = line.strip()
            if line:
                document.append(line)
                counts["sentences"] += 1
                counts["characters"] += len(line) + 1
            else:
                flush()
        flush()
    os.replace(train_file + ".tmp", train_file)
    os.replace(eval_file + ".tmp", eval_file)
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
