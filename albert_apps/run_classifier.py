r"""Fine-tunes ALBERT on a GLUE task: `python -m albert_apps.run_classifier`.

    python -m albert_apps.run_classifier --task_name=MRPC \
      --data_dir=glue_data/MRPC --init_checkpoint=albert_base_v2 \
      --output_dir=runs/mrpc --do_train --do_eval --do_predict \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
      --train_step=800 --warmup_step=200 --export_dir=serving

Flags follow the official `run_classifier.py`; they are the fields of
`albert_tf.tasks.options.ClassifierOptions`; it sits above `export/` (it
exports), so it lives in `albert_apps`.
"""


from albert_tf import cli
from albert_tf.tasks.options import ClassifierOptions

PROGRAM = "run_classifier"


def run(options, strategy=None):
    """Fine-tunes, predicts and exports as `options` say; returns the report."""
    # Here, not at the top: TensorFlow loads after the flags are read.
    from albert_tf.tasks import finetuning_jobs
    from albert_tf.tasks import finetuning_task
    from export import finetuned_exports
    from export import layout
    strategy = strategy or cli.strategy_for(options)
    trainer, report = finetuning_jobs.run_classifier(options, strategy)
    if options.export_dir:
        task = report["task"]
        litert = options.export_format == "litert"
        with layout.holding(options.export_dir, PROGRAM):
            # The .tflite is staged with the SavedModel: both appear in
            # the same version, or neither does.
            report["export"] = finetuned_exports.export_classifier(
                trainer.model, finetuning_task.spm_model_file(options),
                options.export_dir,
                labels=trainer.task.task_info["labels"] or None,
                max_seq_length=options.max_seq_length,
                do_lower_case=options.do_lower_case,
                model_name=f"albert_{task.replace('-', '_')}",
                serving_dtype=options.serving_dtype,
                litert_quantization=(options.litert_quantization
                                     if litert else None))
            if litert:
                report["export_litert"] = finetuned_exports.litert_file(
                    report["export"])
    cli.log_report(report, ("best", "submission", "export", "export_litert"))
    return report


def main(argv=None):
    cli.run_training_program(ClassifierOptions, run, __doc__, argv)


if __name__ == "__main__":
    main()
