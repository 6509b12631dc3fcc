"""The quickstart's downstream task: sentence order in text never pretrained on.

Why this task: it shows what pretraining is for. Each example is a document
of held-out text (for the built-in corpus, docstrings of standard-library
packages that pretraining never saw) cut at a random sentence boundary into
two halves, given in order (label 0) or swapped (label 1). Few labelled
examples are given (`NUM_TRAIN`), as in the fine-tuning settings where
pretraining pays off; a model trained from random initialization on them
stays near chance, while a pretrained encoder carries over what it learned
about the language and about discourse order.

Fine-tuning goes through the exported encoder SavedModel loaded as a Keras
layer (`export.keras_layer.load_encoder`), the documented path for users
who fine-tune an exported model in their own Keras code; an in-memory
`AlbertEncoder` works the same way. The model is the encoder, dropout and a
dense layer on `pooled_output`, trained with the official AdamW recipe
(warmup, linear decay, clipping at global norm 1.0).

    counts = write_task("data/downstream.txt", "data/task")
    task = load_task("data/task")
    result = finetune("export/albert_encoder/1", "data/spm.model", task)
    result["dev_accuracy"]
"""

import csv
import dataclasses
import os
import random
import time

import keras
import numpy as np
import tensorflow as tf

from albert_tf.layers.preprocessing import TextPreprocessor
from albert_tf.layers.task_heads import ClassificationHead
from albert_tf.models.encoder import INPUT_NAMES
from albert_apps.quickstart import data
from albert_tf.training import optimization

LABELS = ("in order", "swapped")
# Few labelled pairs to learn from, many to measure on (the dev accuracy of
# 1100 pairs has a standard error of about 1.4 points).
NUM_TRAIN, NUM_DEV = 200, 1100
TASK_FILES = ("train.tsv", "dev.tsv")


@dataclasses.dataclass
class Task:
    """The examples of `load_task`: `(first, second)` text pairs and labels."""

    train_pairs: list
    train_labels: np.ndarray
    dev_pairs: list
    dev_labels: np.ndarray
    labels: tuple = LABELS


def _write_tsv(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n",
                            quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(("label", "first", "second"))
        writer.writerows(rows)
    os.replace(tmp, path)


def write_task(documents_file, task_dir, num_train=NUM_TRAIN, num_dev=NUM_DEV,
               seed=0):
    """Writes `train.tsv` and `dev.tsv` of in-order vs swapped halves.

    Documents are shuffled (seeded) and dealt to dev first, then to train,
    so training and dev pairs come from different documents; each document
    gives one pair, cut at a random sentence boundary and swapped with
    probability 1/2.

    Args:
        documents_file: the held-out documents (one sentence a line, a blank
            line between documents).
        task_dir: where the two TSV files go (columns `label`, `first`,
            `second`).
        num_train, num_dev: pairs wanted; with fewer documents, train gets
            at most half of them (rounded down) and dev the rest.
        seed: the shuffle, cut and swap seed.

    Returns:
        A dict: `train` and `dev` (pairs written), `documents` (usable
        documents found) and `task_dir`.

    Raises:
        ValueError: fewer than 4 documents of at least two sentences.
    """
    documents = [d for d in data.read_documents(documents_file)
                 if len(d) >= 2]
    if len(documents) < 4:
        raise ValueError(
            "The downstream task needs at least 4 held-out documents of two "
            "or more sentences. Received: %d in %s" % (len(documents),
                                                       documents_file))
    rng = random.Random(seed)
    rng.shuffle(documents)
    num_train = min(num_train, len(documents) // 2)
    num_dev = min(num_dev, len(documents) - num_train)
    splits = {"dev": documents[:num_dev],
              "train": documents[num_dev:num_dev + num_train]}
    os.makedirs(task_dir, exist_ok=True)
    for split in ("train", "dev"):
        rows = []
        for document in splits[split]:
            cut = rng.randint(1, len(document) - 1)
            first, second = (" ".join(part).replace("\t", " ")
                             for part in (document[:cut], document[cut:]))
            swapped = rng.random() < 0.5
            if swapped:
                first, second = second, first
            rows.append((int(swapped), first, second))
        _write_tsv(os.path.join(task_dir, split + ".tsv"), rows)
    return {"train": len(splits["train"]), "dev": len(splits["dev"]),
            "documents": len(documents), "task_dir": task_dir}


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
    """Reads what `write_task` wrote.

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
    return Task(train_pairs, train_labels, dev_pairs, dev_labels)


def encode_pairs(preprocessor, pairs, seq_length):
    """Text pairs to encoder inputs (int32 NumPy arrays `[B, seq_length]`)."""
    inputs = preprocessor.encode(tf.constant([a for a, _ in pairs]),
                                 tf.constant([b for _, b in pairs]),
                                 seq_length=seq_length)
    return {name: inputs[name].numpy() for name in INPUT_NAMES}


def classifier(encoder, num_classes=len(LABELS), dropout=0.1):
    """The encoder (an exported encoder layer or an `AlbertEncoder`) with a
    classification head on `pooled_output`; outputs `{"logits": [B, C]}`.

    The model has `num_classes`, which `export.tasks.export_classifier`
    reads.
    """
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in INPUT_NAMES}
    pooled = encoder(inputs)["pooled_output"]
    head = ClassificationHead(num_classes, dropout=dropout, name="classifier")
    model = keras.Model(inputs, {"logits": head(pooled)}, name="finetuned")
    model.num_classes = num_classes
    return model


def _load_encoder(encoder):
    if isinstance(encoder, (str, os.PathLike)):
        # Imported here: export/ sits above the rest of albert_tf, and only
        # the exported path needs it.
        from export import keras_layer

        return keras_layer.load_encoder(os.fspath(encoder))
    return encoder


def finetune(encoder, spm_model, task, seed=0, num_train_steps=200,
             batch_size=32, learning_rate=3e-4, warmup_ratio=0.1,
             max_seq_length=64, do_lower_case=True):
    """Fine-tunes `encoder` on `task` and measures dev accuracy.

    Args:
        encoder: an exported encoder SavedModel folder (loaded with
            `export.keras_layer.load_encoder`) or an `AlbertEncoder`; it is
            trained in place.
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
    start = time.time()
    with open(spm_model, "rb") as f:
        preprocessor = TextPreprocessor(f.read(), max_seq_length,
                                        do_lower_case)
    train_x = encode_pairs(preprocessor, task.train_pairs, max_seq_length)
    dev_x = encode_pairs(preprocessor, task.dev_pairs, max_seq_length)
    keras.utils.set_random_seed(seed)
    model = classifier(_load_encoder(encoder), len(task.labels))
    model.compile(
        optimizer=optimization.create_optimizer(
            "adamw", learning_rate, num_train_steps,
            int(warmup_ratio * num_train_steps)),
        loss={"logits": keras.losses.SparseCategoricalCrossentropy(
            from_logits=True)},
        metrics={"logits": ["accuracy"]})
    dataset = (tf.data.Dataset.from_tensor_slices((train_x, task.train_labels))
               .repeat().shuffle(len(task.train_labels), seed=seed)
               .batch(batch_size))
    history = model.fit(dataset, steps_per_epoch=num_train_steps, epochs=1,
                        shuffle=False, verbose=0)
    logits = model.predict(dev_x, batch_size=128, verbose=0)["logits"]
    logits = logits.astype(np.float64)
    log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    labels = task.dev_labels
    return {
        "dev_accuracy": float(np.mean(np.argmax(logits, 1) == labels)),
        "dev_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels])),
        "train_loss": float(history.history["loss"][-1]),
        "steps": num_train_steps,
        "seconds": round(time.time() - start, 1),
        "model": model,
    }
