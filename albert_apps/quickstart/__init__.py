"""The main job in one command: `python -m albert_apps.quickstart`.

Pretrains a small ALBERT on English text already on the machine, measures
what the exported encoder learned on tasks of text it never saw (against the
same model from random initialization), fine-tunes it on one and serves the
result from raw text. Each stage calls the library of the matching
command-line tool:

1. corpus: `stages.write_corpus` (`data_prep.builtin_corpus`, or
   `--input_file`), held-out and downstream documents set apart;
2. vocab: `stages.build_vocabulary` (`data_prep.vocab.train_vocab`);
3. records: `stages.build_records`
   (`data_prep.pipeline.create_pretraining_data`);
4. pretrain: `stages.pretrain`
   (`albert_tf.training.pretraining.run_pretraining`);
5. export: `stages.export_model`
   (`export.pretrained_export.export_from_checkpoint`);
6. finetune: `stages_downstream.finetune` (linear probes, `probing`; one
   fine-tuning run, `finetuning.Finetuner`; its text-in export);
7. query: `stages_downstream.query`, through the SavedModels' signatures;
8. report: `report.summarize`, `report.write_report`.

`inputs` checks the flags, the corpus and the output folder before any work
and locks the folder; `resume` makes a rerun continue where the last one
stopped. What each stage does, its files and a full report:
docs/quickstart.md.

Example:

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
