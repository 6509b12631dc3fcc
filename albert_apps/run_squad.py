r"""Fine-tunes ALBERT on SQuAD v1.1 / v2.0: `python -m albert_apps.run_squad`.

    python -m albert_apps.run_squad --train_file=squad/train-v2.0.json \
      --predict_file=squad/dev-v2.0.json --version_2_with_negative \
      --init_checkpoint=albert_base_v2 --output_dir=runs/squad2 \
      --do_train --do_eval --do_predict --max_seq_length=384 \
      --doc_stride=128 --max_query_length=64 --train_batch_size=48 \
      --learning_rate=3e-5 --train_step=8144 --warmup_step=814

Flags follow the official `run_squad_v1.py` / `run_squad_v2.py`. `--do_eval`
scores every checkpoint on `--predict_file` (official EM/F1; v2.0 with the
no-answer threshold search) and keeps the best; `--do_predict` writes
`predictions.json` (+ `null_odds.json` for v2.0). The flags are the fields
of `albert_tf.tasks.options.SquadOptions`; it sits above `export/` (it
exports), so it lives in `albert_apps`.
"""

from albert_tf import cli
from albert_tf.tasks.options import SquadOptions

PROGRAM = "run_squad"


def run(options, strategy=None):
    """Fine-tunes, predicts and exports as `options` say; returns the report."""
    # Here, not at the top: TensorFlow loads after the flags are read.
    from albert_tf.tasks import finetuning_jobs
    from albert_tf.tasks import finetuning_task
    from export import finetuned_exports
    from export import layout
    strategy = strategy or cli.strategy_for(options)
    trainer, report = finetuning_jobs.run_squad(options, strategy)
    if options.export_dir:
        v2 = options.version_2_with_negative
        with layout.holding(options.export_dir, PROGRAM):
            report["export"] = finetuned_exports.export_span_extractor(
                trainer.model, finetuning_task.spm_model_file(options),
                options.export_dir,
                max_seq_length=options.max_seq_length,
                max_query_length=options.max_query_length,
                max_answer_length=options.max_answer_length,
                do_lower_case=options.do_lower_case,
                model_name="albert_squad_v2" if v2 else "albert_squad",
                serving_dtype=options.serving_dtype)
    cli.log_report(report, ("best", "predictions", "export"))
    return report


def main(argv=None):
    cli.run_training_program(SquadOptions, run, __doc__, argv)


if __name__ == "__main__":
    main()
