"""The main job in one command: `python -m albert_tf.quickstart`.

Pretrains a small ALBERT on English text already on the machine, exports it
and queries the exported model, offline, in about ten minutes on 2 CPU cores.
Each stage is a function of `albert_tf.quickstart.stages` (or `.report`)
calling the library of the matching command-line tool:

1. corpus (`write_corpus`): the Python standard library's docstrings
   (`data_prep.builtin_corpus`) or `--input_file`; one document in 20 is
   held out for evaluation.
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
   (`export.exporter.export_from_checkpoint`, the library of
   `python -m export.export_saved_model`).
6. query (`query`): a fill-mask query and a nearest-neighbour query through
   the exported SavedModel's signatures.
7. report (`report.summarize`, `report.write_report`): `report.txt`,
   `report.json` and `training_curves.png`.

Everything goes under `--output_dir`. Running again with the same output_dir
resumes (`albert_tf.quickstart.resume`): finished stages are skipped,
training continues from its newest checkpoint, and the export is reused when
it holds the current best checkpoint (else the next version is exported).

    from albert_tf import quickstart
    report = quickstart.run("runs/quickstart", train_seconds=60)
"""

from albert_tf.quickstart.data import EVAL_EVERY
from albert_tf.quickstart.data import masked_token_baseline
from albert_tf.quickstart.data import split_corpus
from albert_tf.quickstart.job import run
from albert_tf.quickstart.queries import query_saved_model
from albert_tf.quickstart.report import format_report
from albert_tf.quickstart.report import training_curves

__all__ = ["EVAL_EVERY", "format_report", "masked_token_baseline",
           "query_saved_model", "run", "split_corpus", "training_curves"]
