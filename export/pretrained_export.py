"""Writes the exported SavedModels (the library behind `export_saved_model`).

`export_from_checkpoint` reads a checkpoint, its config and its SentencePiece
model; `export_pretrainer` exports an `AlbertPretrainer` already in memory.
Both write the layout described in `export.export_saved_model` and return the
final folders. `ExportOptions` (in `export.options`) holds the program's
flags, which are the arguments of `export_from_checkpoint`.
"""

import os

import tensorflow as tf
from absl import logging

from albert_tf.convert import pretrained
from albert_tf.layers import preprocessing
from albert_tf.models import serving_copy
from data_prep import vocab
from export import layout
from export import litert
from export import serving_command
from export import serving_compat
from export import serving_dtype_auto
from export import signatures
from foundation import safe_io

ENCODER_SUFFIX = "_encoder"
PREPROCESSOR_SUFFIX = "_preprocessor"
LITERT_SUFFIX = "_litert"  # `export.litert.LITERT_SUFFIX`
KERAS_FILE_NAME = "encoder.keras"
CONFIG_ASSET = "albert_config.json"
SPM_ASSET = "spm.model"


def model_names(model_name, litert=False):
    """The model folder names of one export, text-in model first (and the
    `.tflite` folder last, with `litert`)."""
    names = {
        "serving": model_name,
        "encoder": model_name + ENCODER_SUFFIX,
        "preprocessor": model_name + PREPROCESSOR_SUFFIX,
    }
    if litert:
        names["litert"] = model_name + LITERT_SUFFIX
    return names


def _read_bytes(path):
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()


def _write_assets(folder, config, spm_model_proto):
    """Writes the asset files under fixed names; returns name -> path."""
    tf.io.gfile.makedirs(folder)
    config_path = os.path.join(folder, CONFIG_ASSET)
    config.to_json_file(config_path)
    spm_path = os.path.join(folder, SPM_ASSET)
    with tf.io.gfile.GFile(spm_path, "wb") as f:
        f.write(spm_model_proto)
    return {"albert_config_file": config_path, "spm_model_file": spm_path}


def _save(root, signatures, path):
    tf.saved_model.save(root, path, signatures=signatures)


def export_pretrainer(pretrainer, spm_model_proto, export_dir,
                      model_name="albert", version=None, max_seq_length=128,
                      do_lower_case=True, top_k=5, save_keras=True,
                      tf_serving_version=None, serving_shape="dynamic",
                      serving_dtype="float32", litert_quantization=None,
                      litert_inputs="text", announce=True):
    """Exports an `AlbertPretrainer` (see `export.export_saved_model`).

    Every folder of the version (and, with `litert_quantization`, the
    `.tflite`) is written and checked in one staging folder before the
    first is renamed into place, so a refused or killed export leaves no
    version behind.

    Args:
        pretrainer: the `albert_tf.AlbertPretrainer` with its weights.
        spm_model_proto: the serialized SentencePiece model (`bytes`).
        export_dir: TF Serving base folder.
        model_name: name of the text-in model.
        version: version number, or None for the next free one.
        max_seq_length: T of the text-in signatures.
        do_lower_case: whether preprocessing lowercases.
        top_k: predictions per mask of `fill_mask`.
        save_keras: also save the encoder as `encoder.keras`.
        tf_serving_version: a TF Serving release that must be able to serve
            the export, or None (see `serving_compat.check_export`).
        serving_shape: T of the text-in model, "dynamic" (each batch's
            longest row rounded up to a multiple of 8, at most
            `max_seq_length`) or "fixed" (`max_seq_length`); see
            `export.signatures`.
        serving_dtype: what the text-in model computes in: "float32",
            "bfloat16", "int8" (compiled by XLA) or "auto" (the fastest
            here that agrees with float32; see `export.serving_dtype_auto`).
            The TF-Hub-style encoder and `encoder.keras` stay float32 (they
            are for fine-tuning).
        litert_quantization: None, or one of `export.litert.QUANTIZATIONS`
            to write `<model_name>_litert/<version>/encoder.tflite` too
            (`export.litert.export_checked_encoder`: a quantization that
            does not agree with float32 falls back to a wider one).
        litert_inputs: "text" (`encoder.tflite`, the tokenizer inside) or
            "ids" (`model.tflite`, builtin ops only:
            `export.litert.export_checked_ids_encoder`).
        announce: log, at the end, the model server and `docker run`
            commands that serve the export (`export.serving_command`;
            the config file they name is written either way).

    Returns:
        A dict with keys `serving`, `encoder`, `preprocessor` (the version
        folders), with `save_keras`, `keras` (the `.keras` file), and with
        `litert_quantization`, `litert_encoder` (the `.tflite` file).

    Raises:
        ValueError: bad lengths, an unknown `serving_shape`, or a vocabulary
            larger than the model's.
        data_prep.vocab.SpecialPiecesError: the SentencePiece model lacks the
            ALBERT special pieces.
        export.layout.VersionExistsError: the version already exists.
        export.serving_compat.UnknownServingVersionError,
        export.serving_compat.UnsupportedOpsError: see `tf_serving_version`.
    """
    config = pretrainer.config
    _check_arguments(config, spm_model_proto, max_seq_length, top_k,
                     serving_shape)
    serving_dtype_auto.check_choice(serving_dtype)
    if litert_quantization is not None:
        litert.check_quantization(litert_quantization)
    if litert_inputs not in litert.LITERT_INPUTS:
        raise ValueError("litert_inputs must be one of %s. Received: "
                         "litert_inputs=%r" % (", ".join(litert.LITERT_INPUTS),
                                               litert_inputs))
    names = model_names(model_name, litert_quantization is not None)
    staged = layout.StagedExport(export_dir, names.values(), version)
    try:
        record, served = serving_dtype_auto.serving_model(
            pretrainer, serving_dtype, spm_model_proto, max_seq_length)
        _write_models(staged, names, pretrainer, served, record,
                      spm_model_proto, max_seq_length, do_lower_case, top_k,
                      save_keras, serving_shape)
        saved_models = [names[key] for key in
                        ("serving", "encoder", "preprocessor")]
        serving_compat.check_export(
            {name: staged.path(name) for name in saved_models},
            tf_serving_version)
        serving_command.write_config(staged.path(names["serving"]),
                                     export_dir, saved_models)
        if litert_quantization is not None:
            write_litert = (litert.export_checked_ids_encoder
                            if litert_inputs == "ids"
                            else litert.export_checked_encoder)
            write_litert(pretrainer.encoder, spm_model_proto,
                         staged.path(names["litert"]), max_seq_length,
                         do_lower_case, litert_quantization)
        final = staged.commit()
    except BaseException as error:
        staged.abort()
        converted = safe_io.write_failure(error, staged.staging_dir)
        if converted is not error:
            raise converted from None
        raise
    paths = {key: final[name] for key, name in names.items()}
    if save_keras:
        paths["keras"] = os.path.join(paths["encoder"], KERAS_FILE_NAME)
    if "litert" in paths:
        paths["litert_encoder"] = os.path.join(
            paths.pop("litert"), litert.IDS_ENCODER_FILE
            if litert_inputs == "ids" else litert.ENCODER_FILE)
    logging.info("Exported version %d of %s", staged.version,
                 ", ".join(names.values()))
    if announce:
        logging.info("%s", serving_block(export_dir, model_name, paths))
    return paths


def serving_block(export_dir, model_name, paths):
    """The model server commands for the SavedModels of an export
    (`export.serving_command.block_for_export`), from the `paths` that
    `export_pretrainer` returned."""
    names = model_names(model_name)
    block = serving_command.block_for_export(export_dir, {
        names[key]: paths[key] for key in ("serving", "encoder",
                                           "preprocessor")})
    if str(paths.get("litert_encoder", "")).endswith(litert.IDS_ENCODER_FILE):
        block = "\n".join([block, *serving_command.tflite_lines(
            export_dir, model_name + LITERT_SUFFIX)])
    return block


def _check_arguments(config, spm_model_proto, max_seq_length, top_k,
                     serving_shape):
    """Raises the errors `export_pretrainer` documents, before anything is
    written."""
    sp_model = vocab.check_special_pieces(spm_model_proto)
    if sp_model.get_piece_size() > config.vocab_size:
        raise ValueError(
            "The SentencePiece model has more pieces than the model's "
            "vocabulary. Received: %d pieces, vocab_size=%d"
            % (sp_model.get_piece_size(), config.vocab_size))
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(
            "max_seq_length exceeds the model's max_position_embeddings. "
            "Received: max_seq_length=%d, max_position_embeddings=%d"
            % (max_seq_length, config.max_position_embeddings))
    if top_k < 1:
        raise ValueError("top_k must be positive. Received: top_k=%r" % top_k)
    preprocessing.check_serving_shape(serving_shape)


def _write_models(staged, names, pretrainer, served, record, spm_model_proto,
                  max_seq_length, do_lower_case, top_k, save_keras,
                  serving_shape):
    """Writes the text-in model (`served`, in the precision of `record`),
    the encoder (and its `.keras` file) and the preprocessor into their
    staging folders, with the shared assets."""
    assets = _write_assets(os.path.join(staged.staging_dir, "_assets"),
                           pretrainer.config, spm_model_proto)
    preprocessor = preprocessing.TextPreprocessor(
        spm_model_proto, max_seq_length, do_lower_case)
    serving_path = staged.path(names["serving"])
    _save(*signatures.build_serving_model(
        served, preprocessor, top_k, assets, serving_shape,
        serving_copy.needs_xla(record["serving_dtype"])), serving_path)
    serving_dtype_auto.write(record, serving_path)
    encoder_path = staged.path(names["encoder"])
    _save(*signatures.build_encoder_model(pretrainer.encoder, assets),
          encoder_path)
    if save_keras:
        pretrainer.encoder.save(os.path.join(encoder_path, KERAS_FILE_NAME))
    _save(*signatures.build_preprocessor_model(preprocessor, assets),
          staged.path(names["preprocessor"]))


def export_from_checkpoint(checkpoint, albert_config_file, spm_model_file,
                           export_dir, **kwargs):
    """Restores a checkpoint and exports it (see `export_pretrainer`).

    The checkpoint is read by `pretrained.load_albert_tf`, the loader that
    `albert_tf.load_pretrained` uses for this project's checkpoints (a
    model folder, a training run's folder or its `best/`, a prefix); other
    formats are converted first (`python -m albert_tf.convert_checkpoint`).

    Args:
        checkpoint: a checkpoint prefix or a directory (see
            `albert_tf.training.model_dir.resolve_checkpoint`).
        albert_config_file: the model's `albert_config.json`.
        spm_model_file: its SentencePiece model.
        export_dir: TF Serving base folder.
        **kwargs: the other arguments of `export_pretrainer`.

    Returns:
        What `export_pretrainer` returns.

    Raises:
        FileNotFoundError: a missing config, SentencePiece model or checkpoint.
        ValueError: see `export_pretrainer`.
    """
    if not tf.io.gfile.exists(spm_model_file):
        raise FileNotFoundError(
            "No SentencePiece model at %r" % (spm_model_file,))
    spm_model_proto = _read_bytes(spm_model_file)
    pretrainer = pretrained.load_albert_tf(checkpoint,
                                           config_file=albert_config_file)
    return export_pretrainer(pretrainer, spm_model_proto, export_dir, **kwargs)
