r"""Fine-tunes ALBERT on RACE: `python -m albert_apps.run_race`.

    python -m albert_apps.run_race --data_dir=RACE \
      --init_checkpoint=albert_base_v2 --output_dir=runs/race \
      --do_train --do_eval --do_predict --max_seq_length=512 \
      --max_qa_length=128 --train_batch_size=32 --learning_rate=1e-5 \
      --train_step=12000 --warmup_step=1000

Flags follow the official `run_race.py`. `--data_dir` holds `train/`, `dev/`,
`test/`, each with `high/` and `middle/` JSON files. `--do_eval` scores every
checkpoint on dev (accuracy) and keeps the best; `--do_predict` writes
`predictions.json` for test (and its accuracy when the files hold answers).
It sits beside the other official fine-tuning programs, `run_classifier` and
`run_squad`; its flags are the fields of `albert_tf.tasks.options.RaceOptions`.
"""


from albert_tf import cli
from albert_tf.tasks.options import RaceOptions


def run(options, strategy=None):
    """Fine-tunes and predicts as `options` say; returns the report."""
    # Here, not at the top: TensorFlow loads after the flags are read.
    from albert_tf.tasks import finetuning_jobs
    strategy = strategy or cli.strategy_for(options)
    _, report = finetuning_jobs.run_race(options, strategy)
    cli.log_report(report, ("best", "predictions", "test_accuracy"))
    return report


def main(argv=None):
    cli.run_training_program(RaceOptions, run, __doc__, argv)


if __name__ == "__main__":
    main()
