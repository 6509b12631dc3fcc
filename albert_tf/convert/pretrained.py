"""Loading released weights in any supported format, and converting between formats.

Formats (`FORMATS`):

- `albert_tf`: this project's model directory (`albert_tf.training.model_dir`).
- `tf1`: an official TF1 release directory, a TF-Hub module directory or a
  checkpoint prefix (`albert_tf.convert.tf1`).
- `huggingface`: a Hugging Face directory (`albert_tf.convert.huggingface`).
- `keras_hub`: a keras-hub preset directory (`albert_tf.convert.keras_hub`).

Every conversion goes through the canonical form (official TF1 names and
layouts, `albert_tf.convert.weight_set.Weights`), so any source can be written as
any target: `albert_tf`, `tf1` or `huggingface`. `load_pretrained` is the one
loader of weights from disk: the fine-tuning jobs, the text models and the
converter read every format through it, and export reads this project's
checkpoints through `load_albert_tf`, its branch for that format.
"""

import contextlib
import glob
import json
import logging
import os

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.convert import hf_tokenizer
from albert_tf.convert import huggingface
from albert_tf.convert import keras_hub
from albert_tf.convert import model_cache
from albert_tf.convert import names
from albert_tf.convert import released
from albert_tf.convert import tf1
from albert_tf.convert import weight_set
from albert_tf.convert.options import FORMATS
from albert_tf.convert.options import TARGETS
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import checkpoint
from albert_tf.training import model_dir
from albert_tf.training import results
from foundation import run_record

# What the main job writes beside the records it builds: the vocabulary
# they were made with (`model_file`).
_DATA_VOCAB_RECORD = "vocab.json"


def detect_format(path):
    """Which format a directory (or checkpoint prefix) holds.

    Args:
        path: a directory, or a TF checkpoint prefix (of this project's or
            an official TF1 checkpoint).

    Returns:
        One of `FORMATS`.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: if no supported format is recognized, or more than one.
    """
    if not tf.io.gfile.isdir(path):
        if tf.io.gfile.exists(path + ".index"):
            return _checkpoint_format(path)
        raise FileNotFoundError(
            f"No model directory or checkpoint at {path!r}, and it is not "
            "the name of released weights (albert_{base,large,xlarge,"
            "xxlarge}_{v1,v2}, hf://org/repo, a keras-hub preset, an "
            "http(s) archive URL)")
    found = _formats_in(path)
    if len(found) > 1:
        # Picking one by precedence could load other weights than the user
        # means; the folder is ambiguous.
        raise ValueError(
            f"{path!r} holds more than one model format ({', '.join(found)}); "
            "move one of them to its own folder (or name the format with "
            "--source when converting)")
    if found:
        return found[0]
    raise ValueError(
        f"No supported model format recognized in {path!r}: expected this "
        "project's model directory, an official TF1 release (albert_config.json "
        "+ model.ckpt*), a Hugging Face directory (config.json + "
        "model.safetensors) or a keras-hub preset (config.json + "
        "model.weights.h5).")


def _formats_in(path):
    """The formats whose files the directory `path` holds, each once."""
    has = lambda name: tf.io.gfile.exists(os.path.join(path, name))  # noqa: E731
    found = []
    if has(huggingface.CONFIG_NAME):
        if has(keras_hub.WEIGHTS_NAME):
            found.append("keras_hub")
        if any(has(n) for n in (huggingface.SAFETENSORS_NAME,
                                huggingface.SAFETENSORS_INDEX_NAME,
                                huggingface.PYTORCH_NAME)):
            found.append("huggingface")
    try:
        prefix = model_dir.resolve_checkpoint(path, release=True)
    except FileNotFoundError:
        prefix = None
    if prefix:
        found.append(_checkpoint_format(prefix))
    return found


def _checkpoint_format(prefix):
    """`albert_tf` for a `tf.train.Checkpoint` holding a model under this
    project's key, else `tf1`."""
    variables = tf1.checkpoint_names(prefix)
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in variables and any(
            n.startswith(model_dir.MODEL_KEY + "/") for n in variables):
        return "albert_tf"
    return "tf1"


def _check_format(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"Unknown {name}. Received: {name}={value!r}. "
                         f"Known: {list(allowed)}")


def read_weights(path, source=None, config_file=None):
    """Reads weights of any supported format into the canonical form.

    Args:
        path: the input directory (or checkpoint prefix).
        source: one of `FORMATS`; detected from the files when None.
        config_file: optional config file overriding the one next to a
            checkpoint (needed for TF-Hub modules, which have none).

    Returns:
        `albert_tf.convert.weight_set.Weights`.

    Raises:
        FileNotFoundError: for missing inputs.
        albert_tf.convert.weight_set.ConversionError: for missing, unexpected or
            misshaped tensors.
        albert_tf.convert.names.UnsupportedConfigError: for a model of this
            project with a sharing ablation (it has no canonical form).
    """
    source = source or detect_format(path)
    _check_format("source", source, FORMATS)
    if source == "tf1":
        return tf1.read(path, config_file)
    if source == "huggingface":
        return huggingface.read(path)
    if source == "keras_hub":
        return keras_hub.read(path)
    model = load_albert_tf(path, config_file=config_file)
    report = weight_set.ConversionReport(source=f"albert_tf model directory {path}")
    tensors = weight_set.model_to_official(model)
    report.mapped = [(name, name, tuple(v.shape), "copy")
                     for name, v in tensors.items()]
    spm = model_dir.find_in_model_dir(path, [model_dir.SPM_NAME])
    return weight_set.Weights(model.config, tensors, spm, report)


def model_from_weights(weights, dtype=None):
    """Builds an `AlbertPretrainer` holding canonical weights.

    A pretraining head the weights lack keeps its random initial values
    (logged, and listed in the weights' report).

    Args:
        weights: `albert_tf.convert.weight_set.Weights`.
        dtype: optional dtype policy for the model.

    Returns:
        The `AlbertPretrainer`.
    """
    model = AlbertPretrainer(weights.config, dtype=dtype)
    untouched = weight_set.assign_to_model(model, weights.tensors)
    if untouched:
        logging.warning("%d tensor(s) not in %s keep their initial values: %s",
                        len(untouched), weights.report.source,
                        ", ".join(untouched))
    return model


def write_weights(weights, directory, target):
    """Writes canonical weights in a target format into an existing directory.

    Args:
        weights: `albert_tf.convert.weight_set.Weights`.
        directory: an existing, empty directory.
        target: one of `TARGETS`.
    """
    _check_format("target", target, TARGETS)
    if target == "tf1":
        tf1.write(weights, directory)
    elif target == "huggingface":
        huggingface.write(weights, directory)
    else:
        model = model_from_weights(weights)
        model_dir.save_model_dir(model, directory,
                                 spm_model_file=weights.spm_model_file)


@contextlib.contextmanager
def _read_errors_named(input_path, output_dir):
    """An error reading the input (a truncated or corrupt checkpoint) as
    one `ConversionError` naming it. An error about the conversion's own
    unfinished folder (a failed write) is left to `weight_set.atomic_output_dir`.
    """
    parent, base = os.path.split(os.path.abspath(output_dir))
    unfinished = os.path.join(parent, f".{base}.partial-")
    try:
        yield
    except (tf.errors.OpError, IndexError) as error:
        # TensorFlow's checkpoint reader raises IndexError ("Read less
        # bytes than requested") for a truncated data file.
        message = str(getattr(error, "message", None) or error)
        if unfinished in message or (
                isinstance(error, tf.errors.OpError)
                and error.error_code not in _READ_ERROR_CODES):
            raise
        first = (message.strip().splitlines() or [""])[0]
        raise weight_set.ConversionError(
            f"--input={input_path}: cannot read the checkpoint, it is "
            f"truncated or corrupt ({first})") from None


# DataLoss (a bad checksum), OutOfRange (a file shorter than its index),
# InvalidArgument and Unknown (an unreadable index), NotFound (a missing
# data shard), FailedPrecondition.
_READ_ERROR_CODES = (tf.errors.DATA_LOSS, tf.errors.OUT_OF_RANGE,
                     tf.errors.INVALID_ARGUMENT, tf.errors.UNKNOWN,
                     tf.errors.NOT_FOUND, tf.errors.FAILED_PRECONDITION)


def convert_checkpoint(input_path, output_dir, source=None, target="albert_tf",
                       config_file=None, overwrite=False, spm_model_file=None,
                       do_lower_case=None):
    """Converts a model directory from one format to another.

    The output is written to a temporary directory next to `output_dir` and
    renamed when complete, so a failed conversion leaves nothing behind. It
    holds the weights, the config, the model's SentencePiece model and
    `conversion_report.txt`, the fate of every source tensor.

    The SentencePiece model is `spm_model_file`, else the one that comes
    with the input, else, for a training run's folder (or its `best/`),
    the one its records name (`run_vocabulary`). A Hugging Face target
    needs one (its tokenizer files are made from it); without one the
    conversion is refused before anything is written.

    Args:
        input_path: the source directory (or TF1 checkpoint prefix).
        output_dir: the local directory to create.
        source: one of `FORMATS`, or None to detect it.
        target: one of `TARGETS`.
        config_file: optional config for a TF1 source (see `read_weights`).
        overwrite: replace an earlier conversion in `output_dir` (only
            what it wrote: see `weight_set.atomic_output_dir`).
        spm_model_file: the model's SentencePiece model, when none comes
            with the input or another one is meant.
        do_lower_case: whether the tokenizer lowercases text (Hugging Face
            target); None: what the input records, else what the
            vocabulary's pieces say (`hf_tokenizer.casing`).

    Returns:
        The `ConversionReport`.

    Raises:
        foundation.safe_io.OutputError: `output_dir` cannot be written, holds
            the input, is not empty (without `overwrite`) or holds files no
            conversion wrote (with it); a write failed (names the file).
        foundation.output_lock.OutputLockedError: another conversion writes
            `output_dir`.
        albert_tf.convert.weight_set.ConversionError: for missing, unexpected or
            misshaped tensors; a Hugging Face target without a vocabulary;
            a vocabulary with more pieces than the model has embeddings
            (nothing is written).
        albert_tf.convert.names.UnsupportedConfigError: for a config the
            target cannot express (e.g. a sharing ablation to `tf1`).
    """
    _check_format("target", target, TARGETS)
    weight_set.check_output_dir(output_dir, overwrite, input_path)
    if spm_model_file is not None and (
            not tf.io.gfile.exists(spm_model_file)
            or tf.io.gfile.isdir(spm_model_file)):
        raise FileNotFoundError(
            "--spm_model_file names no file (a SentencePiece model). "
            f"Received: --spm_model_file={spm_model_file}")
    with _read_errors_named(input_path, output_dir):
        return _convert(input_path, output_dir, source, target, config_file,
                        overwrite, spm_model_file, do_lower_case)


def _convert(input_path, output_dir, source, target, config_file, overwrite,
             spm_model_file, do_lower_case):
    """`convert_checkpoint` after its checks."""
    source = source or detect_format(input_path)
    _check_format("source", source, FORMATS)
    vocabulary, found_in = _vocabulary(input_path, source, spm_model_file,
                                       target)
    with weight_set.atomic_output_dir(output_dir, overwrite=overwrite,
                                      input_path=input_path) as tmp:
        if source == "albert_tf" and target == "albert_tf":
            # Any sharing mode: no canonical form needed.
            model = load_albert_tf(input_path, config_file=config_file)
            _check_vocabulary(vocabulary, found_in, model.config)
            model_dir.save_model_dir(model, tmp, vocabulary)
            report = weight_set.ConversionReport(
                source=f"albert_tf model directory {input_path}",
                mapped=[(v.path, v.path, tuple(v.shape), "copy")
                        for v in model.weights])
        else:
            weights = read_weights(input_path, source, config_file)
            report = weights.report
            weights.spm_model_file = vocabulary
            _check_vocabulary(vocabulary, found_in, weights.config)
            if vocabulary and target == "huggingface":
                _set_casing(weights, do_lower_case, input_path)
            write_weights(weights, tmp, target)
        if vocabulary:
            report.notes.append(f"tokenizer copied from {vocabulary} "
                                f"({found_in})")
        else:
            report.notes.append("no SentencePiece model: none comes with "
                                "the input (pass --spm_model_file)")
            logging.warning("No SentencePiece model comes with %s: %s has no "
                            "tokenizer (pass --spm_model_file)", input_path,
                            output_dir)
        report.notes.append(f"written as {target}")
        report.write(tmp)
    logging.info("Converted %s (%s) to %s (%s):\n%s", input_path, source,
                 output_dir, target, report.to_text())
    return report


def _vocabulary(input_path, source, spm_model_file, target):
    """`(path, where it was found)` of the model's SentencePiece model, or
    `(None, None)` for a target that can do without one.

    Raises:
        ConversionError: a Hugging Face target, and no vocabulary.
    """
    if spm_model_file:
        return spm_model_file, "--spm_model_file"
    found = spm_model_path(input_path, source)
    if found:
        return found, "it comes with --input"
    found, records = run_vocabulary(input_path)
    if found:
        return found, records
    if target == "huggingface":
        raise weight_set.ConversionError(
            "--target=huggingface writes the tokenizer files, and no "
            "SentencePiece model comes with --input"
            + (f" (a training run's folder: its record {records} names "
               "none)" if records else "")
            + ": pass --spm_model_file, the vocabulary the model was "
            f"trained with. Received: --input={input_path}")
    return None, None


def _check_vocabulary(path, found_in, config):
    """Refuses a SentencePiece model whose ids the model cannot embed (not
    this model's vocabulary); notes one with fewer pieces.

    Raises:
        ConversionError: naming the file, where it came from and both
            sizes.
    """
    if not path:
        return
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            pieces = len(hf_tokenizer.read_model(f.read())[0])
    except (ValueError, IndexError, UnicodeDecodeError, OSError,
            tf.errors.OpError):
        raise weight_set.ConversionError(
            f"{path} ({found_in}) is not a readable SentencePiece "
            "model") from None
    if pieces > config.vocab_size:
        raise weight_set.ConversionError(
            f"{path} ({found_in}) has {pieces} pieces and the model "
            f"{config.vocab_size} embeddings (vocab_size): it is not this "
            "model's vocabulary; pass the one it was trained with as "
            "--spm_model_file")
    if pieces < config.vocab_size:
        logging.warning("%s has %d pieces, the model %d embeddings: ids from "
                        "%d up are never used", path, pieces,
                        config.vocab_size, pieces)


def _set_casing(weights, do_lower_case, input_path):
    """Sets `weights.do_lower_case`: the flag, else what the source or a
    training run's records say, else what the vocabulary's pieces say; the
    report says which."""
    if do_lower_case is not None:
        origin = "--do_lower_case"
    elif weights.do_lower_case is not None:
        do_lower_case, origin = weights.do_lower_case, "the input's tokenizer"
    else:
        do_lower_case, origin = run_casing(input_path)
        if do_lower_case is None:
            with tf.io.gfile.GFile(weights.spm_model_file, "rb") as f:
                do_lower_case, origin = hf_tokenizer.casing(f.read())
    weights.do_lower_case = do_lower_case
    weights.report.notes.append(
        "tokenizer: " + ("lowercases text" if do_lower_case else
                         "keeps the case of text") + f" ({origin})")


# === What a training run's records say ===

def _run_record(path):
    """The run record (`albert_run.json`) of the training run that `path`
    (its folder, `best/` in it, or a checkpoint prefix) belongs to, and its
    path; `(None, None)` when there is none."""
    folder = os.path.abspath(model_dir.model_folder(path))
    candidates = [folder]
    if os.path.basename(folder) == results.BEST_DIR:
        candidates.append(os.path.dirname(folder))
    for candidate in candidates:
        record_path = os.path.join(candidate, run_record.RUN_RECORD_NAME)
        try:
            with open(record_path, encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(record, dict) and isinstance(record.get("settings"),
                                                   dict):
            return record, record_path
    return None, None


def _record_files(patterns):
    """The local files a recorded comma-separated list of globs matches."""
    files = []
    for pattern in (patterns or "").split(","):
        if pattern.strip() and "://" not in pattern:
            files += glob.glob(pattern.strip())
    return [os.path.abspath(f) for f in files]


def run_vocabulary(path):
    """The SentencePiece model a training run's records name.

    A run's `albert_run.json` records its `--init_checkpoint` (a model
    folder that comes with its vocabulary) and its `--input_file` (records
    whose folder may hold the main job's `vocab.json`, naming the
    vocabulary they were built with).

    Args:
        path: a training run's folder, its `best/`, or a checkpoint prefix.

    Returns:
        `(vocabulary path or None, a description of the records read or
        None when `path` is no training run's)`.
    """
    record, record_path = _run_record(path)
    if record is None:
        return None, None
    settings = record["settings"]
    init = settings.get("--init_checkpoint")
    if isinstance(init, str) and os.path.exists(
            model_dir.model_folder(init)):
        try:
            found = spm_model_path(init)
        except (OSError, ValueError):  # no longer a model folder
            found = None
        if found:
            return found, f"{record_path}: --init_checkpoint={init}"
    for folder in sorted({os.path.dirname(f) for f in
                          _record_files(settings.get("--input_file"))}):
        try:
            with open(os.path.join(folder, _DATA_VOCAB_RECORD),
                      encoding="utf-8") as f:
                model_file = json.load(f).get("model_file")
        except (OSError, ValueError, UnicodeDecodeError, AttributeError):
            continue
        if isinstance(model_file, str) and os.path.isfile(model_file):
            return model_file, (f"{record_path}: --input_file, "
                                f"{os.path.join(folder, _DATA_VOCAB_RECORD)}")
    return None, record_path


def run_casing(path):
    """Whether the records a training run trained on were lowercased, as
    their statistics files record it (`do_lower_case`).

    Returns:
        `(do_lower_case, the statistics files read)`, or `(None, None)`
        when `path` is no training run's, or its records' statistics are
        not found or disagree.
    """
    record, _ = _run_record(path)
    if record is None:
        return None, None
    records = set(_record_files(record["settings"].get("--input_file")))
    values, read = set(), []
    for folder in sorted({os.path.dirname(f) for f in records}):
        for stats_file in sorted(glob.glob(os.path.join(folder,
                                                        "stats.*.json"))):
            try:
                with open(stats_file, encoding="utf-8") as f:
                    stats = json.load(f)
                outputs = {os.path.abspath(p) for p in stats["output_files"]}
                value = stats["settings"]["do_lower_case"]
            except (OSError, ValueError, UnicodeDecodeError, KeyError,
                    TypeError):
                continue
            if outputs & records and isinstance(value, bool):
                values.add(value)
                read.append(stats_file)
    if len(values) != 1:
        return None, None
    return values.pop(), "the records' statistics " + ", ".join(read)


def local_model_path(path, fetch_from=None):
    """The local folder of `path`: `path` itself when it exists, else the
    cached copy of the released weights it names, fetched and checked on
    first use (`released.resolve`, `model_cache.fetch`).

    Args:
        path: a local path, or a reference: a released preset name
            (`"albert_base_v2"`), `hf://org/repo`, `kaggle://...`, a
            keras-hub preset name or an archive URL.
        fetch_from: for a released preset name, `"archive"` (default, the
            official TF1 archive or `$ALBERT_TF_MIRROR`), `"huggingface"`
            or `"keras_hub"`.

    Raises:
        ValueError: an unknown reference or `fetch_from`.
        albert_tf.convert.model_cache.FetchError: the fetch or its checks
            failed (one line naming the URL and the cache path).
    """
    if not released.is_reference(path):
        if fetch_from is not None:
            raise ValueError(
                "fetch_from applies to released preset names, not to a local "
                f"path. Received: path={path!r}, fetch_from={fetch_from!r}")
        return path
    return model_cache.fetch(released.resolve(path, fetch_from),
                             _check_fetched)


def _check_fetched(folder, source):
    """Raises unless `folder` holds `source`'s release: readable by its
    converter, with the preset's architecture and parameter count. Reads
    the tensors only; the model is built once, by the caller's load."""
    weights = read_weights(folder)
    release = source.release
    if release is None:
        return
    expected = AlbertConfig.from_preset(release.name)
    for field in ("vocab_size", "embedding_size", "hidden_size",
                  "num_hidden_layers", "num_attention_heads",
                  "intermediate_size"):
        got, want = getattr(weights.config, field), getattr(expected, field)
        if got != want:
            raise ValueError(f"its config has {field}={got}, {release.name} "
                             f"has {want}")
    count = sum(int(np.prod(np.shape(value)))
                for name, value in weights.tensors.items()
                if names.head_of(name) is None)
    if count != release.num_parameters:
        raise ValueError(f"its encoder has {count:,} parameters, "
                         f"{release.name} has {release.num_parameters:,}")


def load_pretrained(path, dtype=None, config_file=None, fetch_from=None):
    """An `AlbertPretrainer` with released weights, or those of a directory
    in any format.

    The one loader of weights. `path` is a local path or the name of
    released weights: `load_pretrained("albert_base_v2")` fetches the
    official archive once into the cache (`$ALBERT_TF_CACHE`), checks it
    and loads it; `hf://albert/albert-base-v2`, keras-hub preset names,
    `kaggle://` handles and archive URLs work too (`local_model_path`).
    A local format is detected from the files: this project's model
    directory, training run or checkpoint prefix, an official TF1 release
    (or TF-Hub module, with `config_file`), a Hugging Face directory or a
    keras-hub preset. A pretraining head the source lacks (keras-hub has
    no SOP head) keeps its initial values, with a warning.

    Args:
        path: a released name or reference, or a directory (or checkpoint
            prefix).
        dtype: optional dtype policy, e.g. `"mixed_bfloat16"`.
        config_file: optional config file overriding the one next to a
            checkpoint (this project's or TF1; needed where there is none).
        fetch_from: for a released preset name, where to fetch it from:
            `"archive"` (default), `"huggingface"` or `"keras_hub"`.

    Returns:
        The `AlbertPretrainer`; `model.config` is its `AlbertConfig`.

    Raises:
        FileNotFoundError: if nothing is at `path`, or no config is there
            and `config_file` is None.
        ValueError: if the format is not recognized, or a tensor is missing,
            unexpected or misshaped (`ConversionError`); a fetch that
            failed (`model_cache.FetchError`, one line).

    Example:

    ```python
    import tempfile

    from albert_tf import AlbertConfig, AlbertPretrainer, load_pretrained
    from albert_tf.training import model_dir

    folder = tempfile.mkdtemp()  # a model folder: albert_config.json, a checkpoint
    model_dir.save_model_dir(AlbertPretrainer(AlbertConfig.from_preset("tiny")),
                             folder)
    model = load_pretrained(folder)  # also an official TF1 release, a Hugging
    print(type(model).__name__)      # Face folder, a keras-hub preset, a name
    ```
    """
    path = local_model_path(path, fetch_from)
    source = detect_format(path)
    if source == "albert_tf":
        return load_albert_tf(path, dtype, config_file)
    return model_from_weights(read_weights(path, source, config_file), dtype)


def restore_into(model, path):
    """Loads weights of any format, or released weights by name, into a
    built `AlbertPretrainer` of the same config (continued pretraining).

    Args:
        model: the `AlbertPretrainer`.
        path: what `load_pretrained` takes.

    Returns:
        What was read: the checkpoint prefix, or the folder and its format.

    Raises:
        FileNotFoundError, ValueError: as `load_pretrained`; a tensor whose
            shape differs from the model's (another config).
    """
    path = local_model_path(path)
    source = detect_format(path)
    if source == "albert_tf":
        return checkpoint.restore_model(model, path)
    untouched = weight_set.assign_to_model(model,
                                           read_weights(path, source).tensors)
    if untouched:
        logging.warning("%d tensor(s) not in %s keep their initial values: "
                        "%s", len(untouched), path, ", ".join(untouched))
    return f"{path} ({source})"


def load_albert_tf(path, dtype=None, config_file=None):
    """This project's checkpoint at `path` (a model directory, a training
    run's folder or a checkpoint prefix) in a new `AlbertPretrainer`: what
    `load_pretrained` does for this format, and how export reads a
    checkpoint.

    Args:
        path: the folder or prefix (`model_dir.resolve_checkpoint`).
        dtype: optional dtype policy.
        config_file: the model's config; default: the `albert_config.json`
            in the model folder.

    Raises:
        FileNotFoundError: no config, or no checkpoint.
        ValueError: the checkpoint does not fit the config (one line).
    """
    config_file = config_file or model_dir.find_in_model_dir(
        path, [model_dir.CONFIG_NAME])
    if config_file is None:
        raise FileNotFoundError(
            f"No {model_dir.CONFIG_NAME} next to the checkpoint: pass the "
            f"model's config. Received: path={path!r}")
    model = AlbertPretrainer(AlbertConfig.from_json_file(config_file),
                             dtype=dtype)
    logging.info("Restored %s", checkpoint.restore_model(model, path))
    return model


def spm_model_path(path, source=None):
    """The SentencePiece model that comes with a directory of any format
    (or checkpoint prefix), or a released name (see `local_model_path`),
    or None.

    Args:
        path: the directory, prefix or name.
        source: its format (one of `FORMATS`), or None to detect it.
    """
    path = local_model_path(path)
    source = source or detect_format(path)
    if source == "tf1":
        return model_dir.find_release_spm(path)
    return model_dir.find_in_model_dir(path, {
        "albert_tf": [model_dir.SPM_NAME],
        "huggingface": [huggingface.SPM_NAME],
        "keras_hub": [keras_hub.SPM_PATH],
    }[source])


__all__ = ["FORMATS", "TARGETS", "convert_checkpoint",
           "detect_format", "load_albert_tf", "load_pretrained",
           "local_model_path",
           "model_from_weights",
           "read_weights", "restore_into", "spm_model_path", "write_weights"]
