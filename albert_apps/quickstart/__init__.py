"""The main job in one command: `python -m albert_apps.quickstart`.

Shows what ALBERT is for, offline, in about ten minutes on 2 CPU cores:
pretrain a small ALBERT on English text already on the machine, measure
what the exported encoder learned on tasks of text it never saw (against
the same model from random initialization), fine-tune it on one, and serve
the result from raw text. Each stage
is a function of `albert_apps.quickstart.stages` (or `.report`) calling the
library of the matching command-line tool:

1. corpus (`write_corpus`): docstrings of the standard library and the
   installed packages (`data_prep.builtin_corpus`), or `--input_file`; one
   document in 10 is held out for evaluation, and whole standard-library
   packages (`data.DOWNSTREAM_PACKAGES`; of a user's corpus, one document
   in 3 to 10, chosen from the corpus) are kept for the downstream tasks
   (`downstream.write_task`).
2. vocab (`build_vocabulary`): a SentencePiece model
   (`data_prep.vocab.train_vocab`, the library of
   `python -m data_prep.build_vocab`).
3. records (`build_records`): pretraining TFRecords
   (`data_prep.pipeline.create_pretraining_data`, the library of
   `python -m data_prep.create_pretraining_data`).
4. pretrain (`pretrain`): the `tiny` preset, widened
   (`albert_tf.training.pretraining.run_pretraining`, the library of
   `python -m albert_tf.run_pretraining`), evaluating every checkpoint on
   the held-out records; the best goes to `pretrain/best/`.
5. export (`export_model`): the SavedModels
   (`export.pretrained_export.export_from_checkpoint`, the library of
   `python -m export.export_saved_model`).
6. finetune (`stages_downstream.finetune`): the exported encoder's weights
   (checked against the SavedModel loaded as a Keras layer,
   `export.keras_layer.load_encoder`) probed on each downstream task
   (`probing`: a linear classifier of the frozen features), against random
   initialization over several seeds; then fine-tuned on the first task
   (`finetuning.Finetuner`) and exported as a text-in SavedModel
   (`export.finetuned_exports.export_classifier`).
7. query (`query`): fill-mask on held-out sentences and the classifier on
   the task's dev pairs, through the SavedModels' signatures.
8. report (`report.summarize`, `report.write_report`): `report.txt`,
   `report.json` and `training_curves.png`.

Everything goes under `--output_dir`. Running again with the same output_dir
resumes (`albert_apps.quickstart.resume`): finished stages are skipped,
training continues from its newest checkpoint, and the exports and the
downstream results are reused when they hold the current best checkpoint
(else the next version is exported and measured again). Before any of it,
`albert_apps.quickstart.inputs` checks the flags, the corpus and the folder,
locks the folder for this job alone, and refuses a rerun made from another
corpus or other settings before anything in the folder changes.

    from albert_apps import quickstart
    report = quickstart.run("runs/quickstart", train_seconds=60)
"""

import importlib

_EXPORTS = {
    "EVAL_EVERY": "albert_apps.quickstart.data",
    "masked_token_baseline": "albert_apps.quickstart.data",
    "split_corpus": "albert_apps.quickstart.data",
    "run": "albert_apps.quickstart.job",
    "format_report": "albert_apps.quickstart.report",
    "training_curves": "albert_apps.quickstart.report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    # Loaded on first use, so `--help` imports no TensorFlow.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(
            f"module 'albert_apps.quickstart' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
