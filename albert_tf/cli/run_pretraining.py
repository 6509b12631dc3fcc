"""Pretrains ALBERT (MLM + SOP): `python -m albert_tf.run_pretraining`.

Flags keep the official `run_pretraining.py` names; `--strategy`, `--dtype`,
`--gradient_accumulation_steps`, `--preset` and `--dynamic_masking` are this
project's. The work is done by `albert_tf.training.pretraining.run_pretraining`.

Example (CPU, tiny model):

    python -m albert_tf.run_pretraining --input_file='data/*.tfrecord' \\
        --output_dir=runs/tiny --preset=tiny --train_batch_size=32 \\
        --max_seq_length=128 --num_train_steps=1000 --num_warmup_steps=100 \\
        --learning_rate=1e-3 --iterations_per_loop=50 --do_eval
"""

from absl import app, flags, logging

from albert_tf.training import distribute
from albert_tf.training import pretraining as train_lib
from albert_tf.config import AlbertConfig, PRESETS

_INPUT_FILE = flags.DEFINE_string(
    "input_file", None, "TFRecord files: comma-separated paths or globs (gs:// too).")
_EVAL_INPUT_FILE = flags.DEFINE_string(
    "eval_input_file", None, "Evaluation records (default: --input_file).")
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Checkpoints, TensorBoard logs and eval results.")
_ALBERT_CONFIG_FILE = flags.DEFINE_string(
    "albert_config_file", None, "An albert_config.json (official or this project's).")
_PRESET = flags.DEFINE_enum(
    "preset", None, sorted(PRESETS), "A named configuration instead of "
    "--albert_config_file.")
_INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Initial model weights (checkpoint or model directory).")
_TRAIN_BATCH_SIZE = flags.DEFINE_integer(
    "train_batch_size", 4096, "Global batch per optimizer step.")
_EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 64, "Global eval batch.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 512, "L of the records.")
_MAX_PREDICTIONS = flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "P of the records.")
_NUM_TRAIN_STEPS = flags.DEFINE_integer("num_train_steps", 125000, "Optimizer steps.")
_NUM_WARMUP_STEPS = flags.DEFINE_integer("num_warmup_steps", 3125, "Warmup steps.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
_OPTIMIZER = flags.DEFINE_enum("optimizer", "lamb", ["lamb", "adamw"], "Optimizer.")
_POLY_POWER = flags.DEFINE_float("poly_power", 1.0, "Power of the LR decay.")
_SAVE_CHECKPOINTS_STEPS = flags.DEFINE_integer(
    "save_checkpoints_steps", 5000, "Steps between checkpoints.")
_KEEP_CHECKPOINT_MAX = flags.DEFINE_integer(
    "keep_checkpoint_max", 5, "Checkpoints kept.")
_ITERATIONS_PER_LOOP = flags.DEFINE_integer(
    "iterations_per_loop", 1000, "Steps per compiled call (and per log line).")
_DO_TRAIN = flags.DEFINE_bool("do_train", True, "Train.")
_DO_EVAL = flags.DEFINE_bool("do_eval", False, "Evaluate every saved checkpoint.")
_MAX_EVAL_STEPS = flags.DEFINE_integer("max_eval_steps", 100, "Eval batches.")
_TPU = flags.DEFINE_string("tpu", None, "TPU name or address; 'local' on a TPU VM.")
_TPU_ZONE = flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
_GCP_PROJECT = flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
_STRATEGY = flags.DEFINE_enum(
    "strategy", None, list(distribute.STRATEGIES), "Distribution strategy; "
    "default: tpu if --tpu is set, else mirrored over the local GPUs, else one "
    "CPU device.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                           "bfloat16: mixed precision (float32 variables).")
_GRADIENT_ACCUMULATION_STEPS = flags.DEFINE_integer(
    "gradient_accumulation_steps", 1, "Micro-batches per step (each replica's "
    "share of --train_batch_size is split into this many).")
_DYNAMIC_MASKING = flags.DEFINE_bool(
    "dynamic_masking", False, "Records carry no masks: mask afresh each epoch.")
_MASKED_LM_PROB = flags.DEFINE_float(
    "masked_lm_prob", 0.15, "Masking rate for --dynamic_masking.")
_SEED = flags.DEFINE_integer("seed", 12345, "Seed of initialization and data order.")
_JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile", None, "Compile steps with XLA; default: yes on TPUs and "
    "GPUs, no on a CPU-only machine (TensorFlow's CPU kernels are faster).")
_MAX_TRAIN_SECONDS = flags.DEFINE_float(
    "max_train_seconds", 0, "Stop (saving a checkpoint) once this many seconds "
    "of training have passed in this run; 0: no limit. Rerun to continue.")


def _config():
    if bool(_ALBERT_CONFIG_FILE.value) == bool(_PRESET.value):
        raise app.UsageError("Give exactly one of --albert_config_file, --preset.")
    if _PRESET.value:
        return AlbertConfig.from_preset(_PRESET.value)
    return AlbertConfig.from_json_file(_ALBERT_CONFIG_FILE.value)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % argv[1:])
    if not _INPUT_FILE.value or not _OUTPUT_DIR.value:
        raise app.UsageError("--input_file and --output_dir are required.")
    options = train_lib.PretrainingOptions(
        input_file=_INPUT_FILE.value, output_dir=_OUTPUT_DIR.value,
        config=_config(), init_checkpoint=_INIT_CHECKPOINT.value,
        train_batch_size=_TRAIN_BATCH_SIZE.value,
        eval_batch_size=_EVAL_BATCH_SIZE.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        max_predictions_per_seq=_MAX_PREDICTIONS.value,
        num_train_steps=_NUM_TRAIN_STEPS.value,
        num_warmup_steps=_NUM_WARMUP_STEPS.value,
        learning_rate=_LEARNING_RATE.value, optimizer=_OPTIMIZER.value,
        poly_power=_POLY_POWER.value,
        save_checkpoints_steps=_SAVE_CHECKPOINTS_STEPS.value,
        keep_checkpoint_max=_KEEP_CHECKPOINT_MAX.value,
        iterations_per_loop=_ITERATIONS_PER_LOOP.value,
        do_train=_DO_TRAIN.value, do_eval=_DO_EVAL.value,
        max_eval_steps=_MAX_EVAL_STEPS.value,
        eval_input_file=_EVAL_INPUT_FILE.value, dtype=_DTYPE.value,
        gradient_accumulation_steps=_GRADIENT_ACCUMULATION_STEPS.value,
        seed=_SEED.value, jit_compile=_JIT_COMPILE.value,
        dynamic_masking=_DYNAMIC_MASKING.value,
        masked_lm_prob=_MASKED_LM_PROB.value,
        max_train_seconds=_MAX_TRAIN_SECONDS.value)
    strategy = distribute.get_strategy(
        _STRATEGY.value, tpu=_TPU.value, tpu_zone=_TPU_ZONE.value,
        gcp_project=_GCP_PROJECT.value)
    report = train_lib.run_pretraining(options, strategy)
    for result in report.get("eval_results", []):
        logging.info("eval %s", result)


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
