r"""Fine-tunes ALBERT on a GLUE task: `python -m albert_tf.run_classifier`.

    python -m albert_tf.run_classifier --task_name=MRPC \
      --data_dir=glue_data/MRPC --init_checkpoint=models/albert_base \
      --output_dir=runs/mrpc --do_train --do_eval --do_predict \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
      --train_step=800 --warmup_step=200 --export_dir=serving

Flags follow the official `run_classifier.py`. See `albert_tf.tasks.runners`.
"""

from absl import app, flags, logging

from albert_tf.tasks import cli, runners

_TASK_NAME = flags.DEFINE_string(
    "task_name", None, "GLUE task: cola, sst-2, mrpc, sts-b, qqp, mnli, "
    "mnli-mm (mismnli), qnli, rte, wnli.")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "The task's folder of TSV files.")
cli.define_common_flags(
    max_seq_length=128, learning_rate=1e-5,
    do_train_help="Train on train.tsv.",
    do_eval_help="Evaluate every checkpoint on dev; keep the best.",
    do_predict_help="Write the test submission file.")

flags.mark_flags_as_required(["task_name", "data_dir", "output_dir"])


def main(argv):
    cli.check_no_arguments(argv)
    report = runners.run_classifier(
        _TASK_NAME.value, _DATA_DIR.value, flags.FLAGS.output_dir,
        **cli.common_kwargs())
    cli.log_report(report, ("best", "submission", "export"))


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
