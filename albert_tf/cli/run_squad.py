r"""Fine-tunes ALBERT on SQuAD v1.1 / v2.0: `python -m albert_tf.run_squad`.

    python -m albert_tf.run_squad --train_file=squad/train-v2.0.json \
      --predict_file=squad/dev-v2.0.json --version_2_with_negative \
      --init_checkpoint=models/albert_base --output_dir=runs/squad2 \
      --do_train --do_eval --do_predict --max_seq_length=384 \
      --doc_stride=128 --max_query_length=64 --train_batch_size=48 \
      --learning_rate=3e-5 --train_step=8144 --warmup_step=814

Flags follow the official `run_squad_v1.py` / `run_squad_v2.py`. `--do_eval`
scores every checkpoint on `--predict_file` (official EM/F1; v2.0 with the
no-answer threshold search) and keeps the best; `--do_predict` writes
`predictions.json` (+ `null_odds.json` for v2.0).
"""

from absl import app, flags, logging

from albert_tf.tasks import cli, runners

_TRAIN_FILE = flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
_PREDICT_FILE = flags.DEFINE_string("predict_file", None, "SQuAD JSON to evaluate/predict.")
_VERSION_2 = flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer.")
_DOC_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
_MAX_QUERY_LENGTH = flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
_N_BEST_SIZE = flags.DEFINE_integer("n_best_size", 20, "Start/end candidates per window.")
_MAX_ANSWER_LENGTH = flags.DEFINE_integer("max_answer_length", 30, "Longest answer in pieces.")
_NA_PROB_THRESHOLD = flags.DEFINE_float("na_prob_threshold", 0.5, "v2.0: answer \"\" above this no-answer probability.")
cli.define_common_flags(
    max_seq_length=384, learning_rate=5e-5,
    do_train_help="Train on --train_file.",
    do_eval_help="Evaluate every checkpoint on --predict_file; keep the best.",
    do_predict_help="Write predictions for --predict_file.")

flags.mark_flags_as_required(["output_dir"])


def main(argv):
    cli.check_no_arguments(argv)
    if flags.FLAGS.do_train and not _TRAIN_FILE.value:
        raise app.UsageError("--do_train needs --train_file.")
    if ((flags.FLAGS.do_eval or flags.FLAGS.do_predict) and
            not _PREDICT_FILE.value):
        raise app.UsageError("--do_eval and --do_predict need --predict_file.")
    report = runners.run_squad(
        flags.FLAGS.output_dir, train_file=_TRAIN_FILE.value,
        predict_file=_PREDICT_FILE.value,
        version_2_with_negative=_VERSION_2.value, doc_stride=_DOC_STRIDE.value,
        max_query_length=_MAX_QUERY_LENGTH.value, n_best_size=_N_BEST_SIZE.value,
        max_answer_length=_MAX_ANSWER_LENGTH.value,
        na_prob_threshold=_NA_PROB_THRESHOLD.value, **cli.common_kwargs())
    cli.log_report(report, ("best", "predictions", "export"))


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
