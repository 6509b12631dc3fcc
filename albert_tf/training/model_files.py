"""What makes a pretraining run's folders complete model folders.

A model folder (`albert_tf.training.model_dir`) holds `albert_config.json`,
a checkpoint and `spm.model` (the vocabulary): every program that takes a
model takes it with no other flag (`convert.pretrained.spm_model_path`,
`load_pretrained`, the fine-tuning programs' `--init_checkpoint`). A run
writes the config and the checkpoints; the vocabulary is not among its
inputs, so it is found once, at the start, from what says which vocabulary
the records were built with:

1. `--spm_model_file`, when given;
2. the data builder's statistics file beside the records
   (`stats.<name>.json`, from `create_pretraining_data`, local or Beam),
   whose `output_files` list the records and whose `vocabulary` names the
   `spm_model_file` they were built with and its content's `sha256`;
3. the main job's `vocab.json` beside the records (`model_file`).

What is found is checked as a fact, not trusted by its name: the recorded
content, and a SentencePiece model that loads, with no more pieces than the
model has embeddings. It is then copied as `spm.model` into the run's folder
and into every `best/`.
"""

import glob
import hashlib
import json
import os

import tensorflow as tf

from foundation import safe_io

# The main job's record, beside the records it builds, of their vocabulary.
DATA_VOCAB_RECORD = "vocab.json"


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _recorded_vocabulary(record):
    """The path a statistics file's `vocabulary` record names, when the
    file there still has the recorded content (`sha256`); else None."""
    if not isinstance(record, dict):
        return None
    path, digest = record.get("spm_model_file"), record.get("sha256")
    if not isinstance(path, str) or not isinstance(digest, str) or (
            "://" in path) or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != digest:
            return None
    return path


def records_vocabulary(files):
    """The vocabulary the builders recorded for `files` (the records).

    Args:
        files: the records' paths.

    Returns:
        `(path, where it was found)`, or `(None, None)`.
    """
    local = {os.path.abspath(f) for f in files if "://" not in f}
    for folder in sorted({os.path.dirname(f) for f in local}):
        for stats_file in sorted(glob.glob(os.path.join(folder,
                                                        "stats.*.json"))):
            stats = _read_json(stats_file)
            if not isinstance(stats, dict):
                continue
            outputs = stats.get("output_files") or []
            if not isinstance(outputs, list):
                continue
            # Only a statistics file of these very records counts.
            if not {os.path.abspath(str(p)) for p in outputs} & local:
                continue
            model_file = _recorded_vocabulary(stats.get("vocabulary"))
            if model_file:
                return model_file, stats_file
        record = _read_json(os.path.join(folder, DATA_VOCAB_RECORD))
        model_file = record.get("model_file") if isinstance(record,
                                                            dict) else None
        if isinstance(model_file, str) and os.path.isfile(model_file):
            return os.path.abspath(model_file), os.path.join(
                folder, DATA_VOCAB_RECORD)
    return None, None


def check_vocabulary(path, vocab_size, origin):
    """Raises unless `path` is a SentencePiece model of at most
    `vocab_size` pieces (the model's embeddings).

    Raises:
        ValueError: naming the file and where it came from.
    """
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor()
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            processor.LoadFromSerializedProto(f.read())
    except (OSError, RuntimeError, tf.errors.OpError) as e:
        raise ValueError(f"{origin}: {path} is not a SentencePiece model "
                         f"({str(e).splitlines()[0] if str(e) else e!r})"
                         ) from None
    pieces = processor.GetPieceSize()
    if pieces > vocab_size:
        raise ValueError(
            f"{origin}: {path} has {pieces} pieces and the model {vocab_size} "
            "embeddings (vocab_size): it is not this model's vocabulary")


def copy_into(directory, files):
    """Copies `{name: source path}` into `directory`, each file whole or
    not at all (a file of the same content is left as it is)."""
    for name, source in files.items():
        with tf.io.gfile.GFile(source, "rb") as f:
            data = f.read()
        target = os.path.join(directory, name)
        if tf.io.gfile.exists(target):
            with tf.io.gfile.GFile(target, "rb") as f:
                if f.read() == data:
                    continue
        safe_io.write_atomically(target, data)
