"""Loading released weights in any supported format, and converting between formats.

Formats (`FORMATS`):

- `albert_tf`: this project's model directory (`albert_tf.training.checkpoint`).
- `tf1`: an official TF1 release directory, a TF-Hub module directory or a
  checkpoint prefix (`albert_tf.convert.tf1`).
- `huggingface`: a Hugging Face directory (`albert_tf.convert.huggingface`).
- `keras_hub`: a keras-hub preset directory (`albert_tf.convert.keras_hub`).

Every conversion goes through the canonical form (official TF1 names and
layouts, `albert_tf.convert.weight_set.Weights`), so any source can be written as
any target: `albert_tf`, `tf1` or `huggingface`. `load_pretrained` is the one
loader of weights from disk: the fine-tuning jobs, the text models and the
converter read every format through it.
"""

import contextlib
import logging
import os

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
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
        prefix = tf1.find_checkpoint(path)
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
            n.startswith(checkpoint.MODEL_KEY + "/") for n in variables):
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
    model = _load_albert_tf(path, config_file=config_file)
    report = weight_set.ConversionReport(source=f"albert_tf model directory {path}")
    tensors = weight_set.model_to_official(model)
    report.mapped = [(name, name, tuple(v.shape), "copy")
                     for name, v in tensors.items()]
    spm = checkpoint.find_in_model_dir(path, [checkpoint.SPM_NAME])
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
        checkpoint.save_model_dir(model, directory,
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
                       config_file=None, overwrite=False):
    """Converts a model directory from one format to another.

    The output is written to a temporary directory next to `output_dir` and
    renamed when complete, so a failed conversion leaves nothing behind. It
    holds the weights, the config, the release's SentencePiece model and
    `conversion_report.txt`, the fate of every source tensor.

    Args:
        input_path: the source directory (or TF1 checkpoint prefix).
        output_dir: the local directory to create.
        source: one of `FORMATS`, or None to detect it.
        target: one of `TARGETS`.
        config_file: optional config for a TF1 source (see `read_weights`).
        overwrite: replace an earlier conversion in `output_dir` (only
            what it wrote: see `weight_set.atomic_output_dir`).

    Returns:
        The `ConversionReport`.

    Raises:
        data_prep.safe_io.OutputError: `output_dir` cannot be written, holds
            the input, is not empty (without `overwrite`) or holds files no
            conversion wrote (with it); a write failed (names the file).
        data_prep.safe_io.OutputLockedError: another conversion writes
            `output_dir`.
        albert_tf.convert.weight_set.ConversionError: for missing, unexpected or
            misshaped tensors (nothing is written).
        albert_tf.convert.names.UnsupportedConfigError: for a config the
            target cannot express (e.g. a sharing ablation to `tf1`).
    """
    _check_format("target", target, TARGETS)
    weight_set.check_output_dir(output_dir, overwrite, input_path)
    with _read_errors_named(input_path, output_dir):
        return _convert(input_path, output_dir, source, target, config_file,
                        overwrite)


def _convert(input_path, output_dir, source, target, config_file, overwrite):
    """`convert_checkpoint` after its checks."""
    source = source or detect_format(input_path)
    _check_format("source", source, FORMATS)
    with weight_set.atomic_output_dir(output_dir, overwrite=overwrite,
                                input_path=input_path) as tmp:
        if source == "albert_tf" and target == "albert_tf":
            # Any sharing mode: no canonical form needed.
            model = _load_albert_tf(input_path, config_file=config_file)
            checkpoint.save_model_dir(model, tmp, checkpoint.find_in_model_dir(
                input_path, [checkpoint.SPM_NAME]))
            report = weight_set.ConversionReport(
                source=f"albert_tf model directory {input_path}",
                mapped=[(v.path, v.path, tuple(v.shape), "copy")
                        for v in model.weights])
        else:
            weights = read_weights(input_path, source, config_file)
            report = weights.report
            write_weights(weights, tmp, target)
            if weights.spm_model_file:
                report.notes.append("tokenizer copied from "
                                    f"{weights.spm_model_file}")
        report.notes.append(f"written as {target}")
        report.write(tmp)
    logging.info("Converted %s (%s) to %s (%s):\n%s", input_path, source,
                 output_dir, target, report.to_text())
    return report


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
    """
    path = local_model_path(path, fetch_from)
    source = detect_format(path)
    if source == "albert_tf":
        return _load_albert_tf(path, dtype, config_file)
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


def _load_albert_tf(path, dtype=None, config_file=None):
    """This project's checkpoint at `path` (a model directory, a training
    run's folder or a checkpoint prefix) in a new `AlbertPretrainer`."""
    config_file = config_file or checkpoint.find_in_model_dir(
        path, [checkpoint.CONFIG_NAME])
    if config_file is None:
        raise FileNotFoundError(
            f"No {checkpoint.CONFIG_NAME} next to the checkpoint: pass the "
            f"model's config. Received: path={path!r}")
    model = AlbertPretrainer(AlbertConfig.from_json_file(config_file),
                             dtype=dtype)
    checkpoint.restore_model(model, path)
    return model


def spm_model_path(path):
    """The SentencePiece model that comes with a directory of any format
    (or checkpoint prefix), or a released name (see `local_model_path`),
    or None."""
    path = local_model_path(path)
    source = detect_format(path)
    if source == "tf1":
        return tf1.find_spm_model(checkpoint.model_folder(path))
    return checkpoint.find_in_model_dir(path, {
        "albert_tf": [checkpoint.SPM_NAME],
        "huggingface": [huggingface.SPM_NAME],
        "keras_hub": [keras_hub.SPM_PATH],
    }[source])


__all__ = ["FORMATS", "TARGETS", "convert_checkpoint",
           "detect_format", "load_pretrained", "local_model_path",
           "model_from_weights",
           "read_weights", "restore_into", "spm_model_path", "write_weights"]
