"""Fine-tunes ALBERT on SQuAD v1.1 / v2.0: `python -m albert_tf.run_squad`.

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

from albert_tf import distribute
from albert_tf.tasks import runners

_TRAIN_FILE = flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
_PREDICT_FILE = flags.DEFINE_string("predict_file", None, "SQuAD JSON to evaluate/predict.")
_VERSION_2 = flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer.")
_DOC_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
_MAX_QUERY_LENGTH = flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
_N_BEST_SIZE = flags.DEFINE_integer("n_best_size", 20, "Start/end candidates per window.")
_MAX_ANSWER_LENGTH = flags.DEFINE_integer("max_answer_length", 30, "Longest answer in pieces.")
_NA_PROB_THRESHOLD = flags.DEFINE_float("na_prob_threshold", 0.5, "v2.0: answer \"\" above this no-answer probability.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Checkpoints, eval results, predictions.")
_INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Pretrained model directory or checkpoint prefix; "
    "unset: random initialization.")
_ALBERT_CONFIG_FILE = flags.DEFINE_string(
    "albert_config_file", None, "albert_config.json; default: the one in "
    "--init_checkpoint's directory.")
_SPM_MODEL_FILE = flags.DEFINE_string(
    "spm_model_file", None, "SentencePiece model; default: spm.model in "
    "--init_checkpoint's directory.")
_DO_LOWER_CASE = flags.DEFINE_bool("do_lower_case", True, "Lowercase the text.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 384, "T.")
_TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32, "Global batch.")
_EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 8, "Eval batch.")
_PREDICT_BATCH_SIZE = flags.DEFINE_integer("predict_batch_size", 8, "Predict batch.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
_TRAIN_STEP = flags.DEFINE_integer("train_step", 1000, "Optimizer steps.")
_WARMUP_STEP = flags.DEFINE_integer("warmup_step", 200, "Warmup steps.")
_OPTIMIZER = flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
_DROPOUT = flags.DEFINE_float("dropout", 0.1, "Dropout before the head.")
_SAVE_CHECKPOINTS_STEPS = flags.DEFINE_integer(
    "save_checkpoints_steps", 1000, "Steps between checkpoints.")
_ITERATIONS_PER_LOOP = flags.DEFINE_integer(
    "iterations_per_loop", 100, "Steps per compiled call.")
_DO_TRAIN = flags.DEFINE_bool("do_train", False, "Train on --train_file.")
_DO_EVAL = flags.DEFINE_bool("do_eval", False, "Evaluate every checkpoint on --predict_file; keep the best.")
_DO_PREDICT = flags.DEFINE_bool("do_predict", False, "Write predictions for --predict_file.")
_EXPORT_DIR = flags.DEFINE_string("export_dir", None, "Write a text-in SavedModel here.")
_STRATEGY = flags.DEFINE_enum("strategy", None, list(distribute.STRATEGIES),
                              "Distribution strategy (default as pretraining).")
_TPU = flags.DEFINE_string("tpu", None, "TPU name or address; 'local' on a TPU VM.")
_TPU_ZONE = flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
_GCP_PROJECT = flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                           "bfloat16: mixed precision (float32 variables).")
_JIT_COMPILE = flags.DEFINE_bool("jit_compile", False, "Compile steps with XLA.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seed.")

flags.mark_flags_as_required(["output_dir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % argv[1:])
    if _DO_TRAIN.value and not _TRAIN_FILE.value:
        raise app.UsageError("--do_train needs --train_file.")
    if (_DO_EVAL.value or _DO_PREDICT.value) and not _PREDICT_FILE.value:
        raise app.UsageError("--do_eval and --do_predict need --predict_file.")
    strategy = distribute.get_strategy(
        _STRATEGY.value, tpu=_TPU.value, tpu_zone=_TPU_ZONE.value,
        gcp_project=_GCP_PROJECT.value)
    report = runners.run_squad(
        _OUTPUT_DIR.value, train_file=_TRAIN_FILE.value,
        predict_file=_PREDICT_FILE.value,
        version_2_with_negative=_VERSION_2.value, doc_stride=_DOC_STRIDE.value,
        max_query_length=_MAX_QUERY_LENGTH.value, n_best_size=_N_BEST_SIZE.value,
        max_answer_length=_MAX_ANSWER_LENGTH.value,
        na_prob_threshold=_NA_PROB_THRESHOLD.value,
        init_checkpoint=_INIT_CHECKPOINT.value,
        albert_config_file=_ALBERT_CONFIG_FILE.value,
        spm_model_file=_SPM_MODEL_FILE.value, do_lower_case=_DO_LOWER_CASE.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        train_batch_size=_TRAIN_BATCH_SIZE.value,
        eval_batch_size=_EVAL_BATCH_SIZE.value,
        predict_batch_size=_PREDICT_BATCH_SIZE.value,
        learning_rate=_LEARNING_RATE.value, train_step=_TRAIN_STEP.value,
        warmup_step=_WARMUP_STEP.value, optimizer=_OPTIMIZER.value,
        dropout=_DROPOUT.value,
        save_checkpoints_steps=_SAVE_CHECKPOINTS_STEPS.value,
        iterations_per_loop=_ITERATIONS_PER_LOOP.value,
        do_train=_DO_TRAIN.value, do_eval=_DO_EVAL.value,
        do_predict=_DO_PREDICT.value, export_dir=_EXPORT_DIR.value,
        strategy=strategy, dtype=_DTYPE.value, jit_compile=_JIT_COMPILE.value,
        seed=_SEED.value)
    for key in ("best", "predictions", "export"):
        if key in report:
            logging.info("%s: %s", key, report[key])


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
