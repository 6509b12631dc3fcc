"""The flags of `python -m albert_tf.convert_checkpoint`.

No TensorFlow here, so the program reads its flags (and answers `--help`)
before TensorFlow loads; the work is `albert_tf.convert.pretrained`.
"""

import dataclasses
from typing import Optional

from foundation.flag_options import option

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
    spm_model_file: str = option(
        None, "The SentencePiece model the weights were trained with, where "
        "none comes with --input (a training run's folder whose records do "
        "not name it) or another is meant; copied to --output_dir.")
    do_lower_case: Optional[bool] = option(
        None, "Whether the Hugging Face tokenizer lowercases text (true, "
        "false or auto). auto: what --input records (its tokenizer, a "
        "training run's records), else what the vocabulary says (a "
        "vocabulary with uppercase pieces keeps case).")
