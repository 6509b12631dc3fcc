r"""Converts ALBERT weights between formats.

Sources: this project's model directory (`albert_tf`), an official TF1 release
or TF-Hub module (`tf1`), a Hugging Face directory (`huggingface`), a keras-hub
preset (`keras_hub`). Targets: `albert_tf` (default; ready for
`run_pretraining --init_checkpoint`, fine-tuning and export), `tf1`,
`huggingface`.

    python -m albert_tf.convert_checkpoint --source=tf1 \
        --input=albert_base/ --output_dir=models/albert_base_v2
    python -m albert_tf.convert_checkpoint --source=albert_tf \
        --input=models/mine --output_dir=exports/mine_hf --target=huggingface

The output directory is written whole or not at all, and holds
`conversion_report.txt`, the fate of every source tensor.
"""

import sys

from absl import app
from absl import flags
from absl import logging

from albert_tf.convert import pretrained

_SOURCE = flags.DEFINE_enum(
    "source", None, list(pretrained.FORMATS),
    "Format of --input; detected from its files when not given.")
_INPUT = flags.DEFINE_string(
    "input", None, "Input directory (or TF1 checkpoint prefix).")
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Local directory to create with the converted model.")
_TARGET = flags.DEFINE_enum(
    "target", "albert_tf", list(pretrained.TARGETS), "Format to write.")
_CONFIG_FILE = flags.DEFINE_string(
    "config_file", None,
    "albert_config.json for a TF1 checkpoint that has none next to it "
    "(TF-Hub modules).")
_OVERWRITE = flags.DEFINE_bool(
    "overwrite", False, "Replace --output_dir if it is not empty.")

flags.mark_flags_as_required(["input", "output_dir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        report = pretrained.convert_checkpoint(
            _INPUT.value, _OUTPUT_DIR.value, source=_SOURCE.value,
            target=_TARGET.value, config_file=_CONFIG_FILE.value,
            overwrite=_OVERWRITE.value)
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        # Bad inputs, not bugs: one clear line, nothing written.
        logging.error("Conversion failed, nothing written: %s", e)
        sys.exit(1)
    logging.info("%d tensors mapped, %d skipped, %d absent; see %s/%s",
                 len(report.mapped), len(report.skipped), len(report.absent),
                 _OUTPUT_DIR.value, "conversion_report.txt")


if __name__ == "__main__":
    app.run(main)
