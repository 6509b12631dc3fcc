"""The flags of `python -m albert_tf.convert_checkpoint`.

No TensorFlow here, so the program reads its flags (and answers `--help`)
before TensorFlow loads; the work is `albert_tf.convert.pretrained`.
"""

import dataclasses

from data_prep.flag_options import option

FORMATS = ("albert_tf", "tf1", "huggingface", "keras_hub")
TARGETS = ("albert_tf", "tf1", "huggingface")


@dataclasses.dataclass
class ConvertOptions:
    """The flags of `python -m albert_tf.convert_checkpoint`; see
    `albert_tf.convert.pretrained.convert_checkpoint` for what each
    means."""

    source: str = option(
        None, "Format of --input; detected from its files when not given.",
        choices=FORMATS)
    input: str = option(
        None, "Input directory (or TF1 checkpoint prefix), or released "
        "weights by name: albert_base_v2, hf://org/repo, a keras-hub preset, "
        "an archive URL (fetched once into $ALBERT_TF_CACHE).", required=True)
    output_dir: str = option(
        None, "Local directory to create with the converted model.",
        required=True)
    target: str = option("albert_tf", "Format to write.", choices=TARGETS)
    config_file: str = option(
        None, "albert_config.json for a TF1 checkpoint that has none next to "
        "it (TF-Hub modules).")
    overwrite: bool = option(
        False, "Replace --output_dir if it is not empty.")
