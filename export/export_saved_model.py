r"""Exports a trained ALBERT as SavedModels in TF Serving layout.

    python -m export.export_saved_model \
        --checkpoint=DIR_OR_PREFIX --albert_config_file=albert_config.json \
        --spm_model_file=spm.model --export_dir=/models \
        [--model_name=albert] [--version=N] [--max_seq_length=128]

writes, all with the same version number (the next free one by default; an
existing version is never overwritten):

    <export_dir>/<model_name>/<version>/               text in: serving_default,
                                                       fill_mask, sop
    <export_dir>/<model_name>_encoder/<version>/       TF-Hub-style encoder (ids in)
                                     .../encoder.keras the same encoder, Keras format
    <export_dir>/<model_name>_preprocessor/<version>/  TF-Hub-style preprocessor

Signatures and outputs are listed in `export.saved_models`. Every folder is
written under `<export_dir>/.staging-*` and renamed into place when complete.
The SavedModels need tensorflow and tensorflow-text only (import
`tensorflow_text` before `tf.saved_model.load`).
"""

from absl import app
from absl import flags

from export import exporter

_CHECKPOINT = flags.DEFINE_string(
    "checkpoint", None,
    "Checkpoint prefix, or a directory (its newest `ckpt-N`, else "
    "`model.ckpt`), holding an AlbertPretrainer under the key `model`.")
_ALBERT_CONFIG_FILE = flags.DEFINE_string(
    "albert_config_file", None, "The model's albert_config.json.")
_SPM_MODEL_FILE = flags.DEFINE_string(
    "spm_model_file", None, "The SentencePiece model the model was trained with.")
_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "TF Serving base folder (the model server's "
    "--model_base_path without the model name).")
_MODEL_NAME = flags.DEFINE_string(
    "model_name", "albert", "Name of the text-in model; the encoder and the "
    "preprocessor get `_encoder` and `_preprocessor` appended.")
_VERSION = flags.DEFINE_integer(
    "version", None, "Version number; default: one more than the highest "
    "existing version of the three models.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer(
    "max_seq_length", 128, "Sequence length of the text-in signatures and "
    "the preprocessor's default; longer text is truncated.")
_DO_LOWER_CASE = flags.DEFINE_bool(
    "do_lower_case", True, "Lowercase the text (as the vocabulary was built).")
_TOP_K = flags.DEFINE_integer(
    "top_k", 5, "Predictions per mask returned by the fill_mask signature.")
_SAVE_KERAS = flags.DEFINE_bool(
    "save_keras", True, "Also save the encoder as `encoder.keras`.")


def main(argv):
    del argv
    paths = exporter.export_from_checkpoint(
        checkpoint=_CHECKPOINT.value,
        albert_config_file=_ALBERT_CONFIG_FILE.value,
        spm_model_file=_SPM_MODEL_FILE.value,
        export_dir=_EXPORT_DIR.value,
        model_name=_MODEL_NAME.value,
        version=_VERSION.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        do_lower_case=_DO_LOWER_CASE.value,
        top_k=_TOP_K.value,
        save_keras=_SAVE_KERAS.value)
    for name, path in paths.items():
        print("%s: %s" % (name, path))


if __name__ == "__main__":
    flags.mark_flags_as_required(
        ["checkpoint", "albert_config_file", "spm_model_file", "export_dir"])
    app.run(main)
