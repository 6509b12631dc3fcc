"""The main job in one command, `python -m albert_apps.quickstart`: pretrains
a small ALBERT on English text already on the machine, measures what the
exported encoder learned on tasks of text it never saw (against the same
model from random initialization), fine-tunes it on one and serves the
result from raw text. `run` does it all, resuming; its stages, and the few
pieces the benchmarks build on, are the names below (`__all__`), each
returning a dataclass of `stage_results`. The stages, their files, the
report and these names in use: docs/quickstart.md.
"""

import importlib

_EXPORTS = {
    "run": "albert_apps.quickstart.job",
    "format_report": "albert_apps.quickstart.report",
    "write_corpus": "albert_apps.quickstart.stages",
    "build_vocabulary": "albert_apps.quickstart.stages",
    "build_records": "albert_apps.quickstart.stages",
    "default_max_predictions": "albert_apps.quickstart.stages",
    "model_config": "albert_apps.quickstart.stages",
    "pretraining_options": "albert_apps.quickstart.stages",
    "pretrain": "albert_apps.quickstart.stages",
    "EVAL_DUPE_FACTOR": "albert_apps.quickstart.stages",
    "FINETUNE_STEPS": "albert_apps.quickstart.defaults",
    "read_documents": "albert_apps.quickstart.data",
    "builtin_documents": "albert_apps.quickstart.data",
    "load_task": "albert_apps.quickstart.downstream",
    "finetune": "albert_apps.quickstart.downstream",
    "Records": "albert_apps.quickstart.stage_results",
    "Report": "albert_apps.quickstart.stage_results",
    "Vocabulary": "albert_apps.quickstart.stage_results",
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
