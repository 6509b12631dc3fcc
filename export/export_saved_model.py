r"""Exports a trained ALBERT as SavedModels in TF Serving layout.

    python -m export.export_saved_model \
        --checkpoint=DIR_OR_PREFIX --export_dir=/models \
        [--albert_config_file=albert_config.json] [--spm_model_file=spm.model] \
        [--model_name=albert] [--version=N] [--max_seq_length=128] \
        [--tf_serving_version=2.19]
        [--serving_shape=dynamic|fixed]
        [--format=saved_model|litert] [--litert_quantization=int8]
        [--litert_inputs=text|ids]

writes, all with the same version number (the next free one by default; an
existing version is never overwritten):

    <export_dir>/<model_name>/<version>/               text in: serving_default,
                                                       serving_single,
                                                       fill_mask, sop
    <export_dir>/<model_name>_encoder/<version>/       TF-Hub-style encoder (ids in)
                                     .../encoder.keras the same encoder, Keras format
    <export_dir>/<model_name>_preprocessor/<version>/  TF-Hub-style preprocessor

Signatures and outputs are listed in `export.signatures`. Output shapes:
the text-in signatures return `[B, T, ...]` where T is, with
`--serving_shape=dynamic` (the default), the batch's longest packed text
rounded up to a multiple of 8 and capped at `--max_seq_length` (a 5-token
text gives `sequence_output` `[1, 8, H]`); with `--serving_shape=fixed`, T is
always `--max_seq_length` (static shapes, for TPU serving and batching
servers). Values at the real positions (`input_mask` 1) are the same either
way. The TF-Hub-style encoder and preprocessor are not affected: the
preprocessor packs to `max_seq_length` (or its `seq_length` argument) and the
encoder takes any T up to `max_position_embeddings`. Everything that can
refuse the export (the flags, the inputs, a version that exists for any of
the folders it writes) is checked before anything is written; then every
folder of the version (the `.tflite` too) is written and checked under one
`<export_dir>/.staging-*` folder and renamed into place when all are
complete. One export at a time holds `<export_dir>`'s lock, which records
the staging folder: the next run removes a killed run's, and nothing else.
A version that a kill cut short between two renames is named by the next
run, with what to do (`export.layout.incomplete_versions`). Every
signature checks its inputs' rank (and the encoder's, their shapes and id
ranges) when called.
The SavedModels need tensorflow and tensorflow-text only (import
`tensorflow_text` before `tf.saved_model.load`). The flags are the fields of
`export.options.ExportOptions`; the work is done by
`export.pretrained_export.export_from_checkpoint`.

With `--format=litert`, `<export_dir>/<model_name>_litert/<version>/
encoder.tflite` too: text in, the tokenizer inside, for LiteRT on phones
(`export.litert`, docs/on_device.md). With `--litert_inputs=ids`, that
folder holds `model.tflite` instead: token ids in, LiteRT builtin ops only
(checked by loading it with the builtin op resolver alone), the file TF
Serving's `--prefer_tflite_model` reads (not tried on a model server).
A quantized `.tflite` that does not agree with the float32 model on
sample texts is written in a wider precision instead; the log and
`assets.extra/litert.json` beside it say which and why.

At its end the program prints the exact `tensorflow_model_server` and
`docker run` commands that serve the three SavedModels, flags included:
`--xla_cpu_compilation_enabled=true` when the text-in model is int8, and
`--model_config_file` naming `<model_name>/<version>/assets.extra/
models.config`, written with the version (`export.serving_command`).

Each SavedModel gets `<version>/assets.extra/ops.json`: its op types and the
TF Serving releases that link them all (`export.serving_compat`); the log
names the oldest. `--tf_serving_version` makes a release the model server
cannot run the export on an error naming the missing ops, and nothing is
written.
"""

import dataclasses
import os

from absl import logging

from export.options import ExportOptions
from export.options import check_model_name
from foundation import flag_options
from foundation import safe_io

PROGRAM = "export_saved_model"


def check_options(options):
    """Refuses bad flags, missing inputs and an unwritable output before
    any work, in one line naming the flag.

    Raises:
        ValueError: a value out of range, a model name that is not one
            folder name, a missing input file, or an `--export_dir` that
            cannot be written (`safe_io.OutputError`).
    """
    flag_options.check_values(options)
    check_model_name(options.model_name)
    if options.litert_inputs != "text" and options.format != "litert":
        raise ValueError("--litert_inputs=%s takes effect with --format=litert "
                         "only; add it, or leave --litert_inputs out. "
                         "Received: --format=%s"
                         % (options.litert_inputs, options.format))
    checkpoint = options.checkpoint
    if "://" not in checkpoint and not (
            os.path.isdir(checkpoint) or os.path.exists(checkpoint + ".index")):
        raise FileNotFoundError(f"--checkpoint={checkpoint}: no checkpoint "
                                "folder or prefix (PREFIX.index) there")
    for flag, name in (("albert_config_file", "albert_config.json"),
                       ("spm_model_file", "spm.model")):
        path = getattr(options, flag)
        if path is None:
            path = _in_model_folder(checkpoint, name, flag)
            setattr(options, flag, path)
        if "://" not in path and not os.path.isfile(path):
            raise FileNotFoundError(f"--{flag}={path}: no such file")
    safe_io.check_output_path(options.export_dir, "--export_dir")


def _in_model_folder(checkpoint, name, flag):
    """`name` in the model folder of `--checkpoint` (a folder, or the
    folder of a prefix): a training run's folder and its `best/` hold the
    config and the vocabulary beside the checkpoint."""
    folder = (checkpoint if "://" in checkpoint or os.path.isdir(checkpoint)
              else os.path.dirname(checkpoint))
    path = os.path.join(folder, name)
    if "://" not in path and not os.path.isfile(path):
        raise FileNotFoundError(
            f"--{flag} is not given and the --checkpoint folder {folder} "
            f"holds no {name}; pass --{flag}")
    logging.info("--%s: %s (in the --checkpoint folder)", flag, path)
    return path


def export(options):
    """Exports as `options` (an `ExportOptions`) say.

    The run holds `--export_dir`'s lock (one export into a folder at a
    time), and removes the staging folders that killed runs recorded
    there.

    Returns:
        What `pretrained_export.export_from_checkpoint` returns (also printed, one
        `name: path` a line).

    Raises:
        export.serving_compat.UnknownServingVersionError: an unknown
            `tf_serving_version` (refused before anything is read).
        ValueError: see `check_options`; `safe_io.OutputLockedError`:
            another run holds `--export_dir`; `safe_io.OutputError`: a
            write failed (names the file and the cause).
    """
    from export import serving_compat
    if options.tf_serving_version is not None:
        serving_compat.release_name(options.tf_serving_version)
    check_options(options)
    from export import layout
    from export import pretrained_export
    litert_quantization = (options.litert_quantization
                           if options.format == "litert" else None)
    with layout.holding(options.export_dir, PROGRAM):
        if options.version is not None:  # Before the checkpoint is read.
            layout.check_version_free(
                options.export_dir, pretrained_export.model_names(
                    options.model_name, litert_quantization is not None
                ).values(), options.version)
        kwargs = dataclasses.asdict(options)
        del kwargs["format"]
        kwargs["litert_quantization"] = litert_quantization
        if litert_quantization is None:
            del kwargs["litert_inputs"]
        # Printed below, after the paths, rather than logged.
        kwargs["announce"] = False
        paths = pretrained_export.export_from_checkpoint(**kwargs)
    for name, path in paths.items():
        print("%s: %s" % (name, path))
    print()
    print(pretrained_export.serving_block(options.export_dir,
                                          options.model_name, paths))
    return paths


def main(argv=None):
    flag_options.run_program(ExportOptions, export, argv, doc=__doc__)


if __name__ == "__main__":
    main()
