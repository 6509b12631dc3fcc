"""Exports a trained ALBERT as SavedModels in TF Serving layout.

`python -m export.export_saved_model --checkpoint=DIR --export_dir=/models`
writes, under one new version number, the text-in model (`serving_default`,
`serving_single`, `fill_mask`, `sop`), the TF-Hub-style encoder and
preprocessor, and with `--format=litert` a `.tflite` for phones; it checks
everything that can refuse the export before writing, stages the version
and prints the commands that serve it. Guide:
docs/serving.md#serving-with-tf-serving (on device: docs/on_device.md).
"""

import dataclasses
import os

from absl import logging

from albert_tf.training import model_dir
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
    for flag, name in (("albert_config_file", model_dir.CONFIG_NAME),
                       ("spm_model_file", model_dir.SPM_NAME)):
        path = getattr(options, flag)
        if path is None:
            path = _in_model_folder(checkpoint, name, flag)
            setattr(options, flag, path)
        if "://" not in path and not os.path.isfile(path):
            raise FileNotFoundError(f"--{flag}={path}: no such file")
    safe_io.check_output_path(options.export_dir, "--export_dir")


def _in_model_folder(checkpoint, name, flag):
    """`name` in the model folder of `--checkpoint`
    (`model_dir.model_folder`): a training run's folder and its `best/`
    hold the config and the vocabulary beside the checkpoint."""
    folder = model_dir.model_folder(checkpoint)
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
        ValueError: see `check_options`; `output_lock.OutputLockedError`:
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
