"""The flags of `python -m export.export_saved_model`.

No TensorFlow here, so the program reads its flags (and answers `--help`)
before TensorFlow loads; the work is `export.pretrained_export`.
"""

import dataclasses
from typing import Optional

from albert_tf.tasks.options import EXPORT_FORMATS
from albert_tf.tasks.options import litert_quantization_option
from albert_tf.tasks.options import serving_dtype_option
from foundation.flag_options import option

# `export.litert.LITERT_INPUTS` (that module imports TensorFlow).
LITERT_INPUTS = ("text", "ids")
# `albert_tf.layers.preprocessing.SERVING_SHAPES` (tests check they agree;
# that module imports TensorFlow).
SERVING_SHAPES = ("dynamic", "fixed")


@dataclasses.dataclass
class ExportOptions:
    """The flags of `python -m export.export_saved_model`; each field is the
    argument of `export_from_checkpoint` of the same name."""

    checkpoint: str = option(
        None, "Checkpoint prefix, or a directory (its newest `ckpt-N`, else "
        "`model.ckpt`), holding an AlbertPretrainer under the key `model`.",
        required=True)
    albert_config_file: str = option(
        None, "The model's albert_config.json; default: the one in the "
        "--checkpoint folder (a model folder, such as a run's best/).")
    spm_model_file: str = option(
        None, "The SentencePiece model the model was trained with; default: "
        "the spm.model in the --checkpoint folder.")
    export_dir: str = option(
        None, "TF Serving base folder (the model server's --model_base_path "
        "without the model name).", required=True)
    model_name: str = option(
        "albert", "Name of the text-in model; the encoder and the "
        "preprocessor get `_encoder` and `_preprocessor` appended.")
    version: Optional[int] = option(
        None, "Version number; default: one more than the highest existing "
        "version of the three models.", minimum=1)
    max_seq_length: int = option(
        128, "Sequence length of the text-in signatures and the "
        "preprocessor's default; longer text is truncated.", minimum=3)
    do_lower_case: bool = option(
        True, "Lowercase the text (as the vocabulary was built).")
    top_k: int = option(
        5, "Predictions per mask returned by the fill_mask signature.",
        minimum=1)
    save_keras: bool = option(
        True, "Also save the encoder as `encoder.keras`.")
    tf_serving_version: Optional[str] = option(
        None, "Refuse the export unless this TF Serving release (e.g. 2.19) "
        "links every op it uses; default: only record them "
        "(<version>/assets.extra/ops.json) and log the oldest release that "
        "can serve it. See export.serving_compat.")
    serving_shape: str = option(
        "dynamic", "Sequence length T of the text-in signatures: `dynamic` "
        "pads each batch to its longest text, rounded up to a multiple of 8 "
        "and capped at --max_seq_length; `fixed` always pads to "
        "--max_seq_length (static shapes, for TPU serving and batching "
        "servers).", choices=SERVING_SHAPES)
    serving_dtype: str = serving_dtype_option()
    format: str = option(
        "saved_model", "`saved_model`: the SavedModels; `litert`: also "
        "`<model_name>_litert/<version>/encoder.tflite`, text in, for phones "
        "(see docs/on_device.md).", choices=EXPORT_FORMATS)
    litert_quantization: str = litert_quantization_option()
    litert_inputs: str = option(
        "text", "With --format=litert: `text`, `encoder.tflite` with the "
        "tokenizer inside (a LiteRT custom op), for phones; `ids`, "
        "`model.tflite` on token ids with LiteRT builtin ops only (the file "
        "TF Serving's --prefer_tflite_model reads; unverified there).",
        choices=LITERT_INPUTS)


def check_model_name(name, flag="--model_name"):
    """Refuses a model name that is not one plain folder name.

    TF Serving reads `<export_dir>/<model_name>/<version>/`; a name such as
    `../x`, `a/b`, `/abs`, `.` or `` would put the export somewhere else
    than the folder the user named (or into the export folder itself), and
    a hidden name could be taken for a staging folder.

    Args:
        name: the model name.
        flag: the flag it came from, as typed.

    Raises:
        ValueError: naming the flag, the value and the rule.
    """
    if (not name or name in (".", "..") or name.startswith(".")
            or "/" in name or "\\" in name or "\0" in name
            or name != name.strip()):
        raise ValueError(
            f"{flag}={name!r} is not a folder name inside --export_dir: "
            "use one name (letters, digits, '_', '-', '.'; not starting "
            "with '.', no '/')")
