r"""Fine-tunes ALBERT on RACE: `python -m albert_tf.run_race`.

    python -m albert_tf.run_race --data_dir=RACE \
      --init_checkpoint=models/albert_base --output_dir=runs/race \
      --do_train --do_eval --do_predict --max_seq_length=512 \
      --max_qa_length=128 --train_batch_size=32 --learning_rate=1e-5 \
      --train_step=12000 --warmup_step=1000

Flags follow the official `run_race.py`. `--data_dir` holds `train/`, `dev/`,
`test/`, each with `high/` and `middle/` JSON files. `--do_eval` scores every
checkpoint on dev (accuracy) and keeps the best; `--do_predict` writes
`predictions.json` for test (and its accuracy when the files hold answers).
"""

from absl import app, flags, logging

from albert_tf.tasks import cli, runners

_DATA_DIR = flags.DEFINE_string("data_dir", None, "The RACE folder.")
_MAX_QA_LENGTH = flags.DEFINE_integer("max_qa_length", 128, "Question+option pieces kept.")
_NUM_CHOICES = flags.DEFINE_integer("num_choices", 4, "Options per question.")
cli.define_common_flags(
    max_seq_length=512, learning_rate=1e-5,
    do_train_help="Train on train/.",
    do_eval_help="Evaluate every checkpoint on dev/; keep the best.",
    do_predict_help="Write predictions for test/.", export=False)

flags.mark_flags_as_required(["data_dir", "output_dir"])


def main(argv):
    cli.check_no_arguments(argv)
    report = runners.run_race(
        _DATA_DIR.value, flags.FLAGS.output_dir,
        max_qa_length=_MAX_QA_LENGTH.value, num_choices=_NUM_CHOICES.value,
        **cli.common_kwargs())
    cli.log_report(report, ("best", "predictions", "test_accuracy"))


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
