"""Flags shared by `run_classifier`, `run_squad` and `run_race`.

Each of those modules calls `define_common_flags` with its own defaults and
help texts, defines its task flags, and passes `common_kwargs()` to its runner
in `albert_tf.tasks.runners`.
"""

from absl import app, flags, logging

from albert_tf.training import distribute

FLAGS = flags.FLAGS


def define_common_flags(max_seq_length, learning_rate, do_train_help,
                        do_eval_help, do_predict_help, export=True,
                        flag_values=FLAGS):
    """Defines the flags every fine-tuning job has.

    Args:
        max_seq_length: default of `--max_seq_length`.
        learning_rate: default of `--learning_rate`.
        do_train_help, do_eval_help, do_predict_help: what each mode reads
            and writes for this task.
        export: whether the job has `--export_dir`.
        flag_values: where to define them (tests pass their own).
    """
    fv = {"flag_values": flag_values}
    flags.DEFINE_string("output_dir", None,
                        "Checkpoints, eval results, predictions.", **fv)
    flags.DEFINE_string(
        "init_checkpoint", None, "Pretrained model directory or checkpoint "
        "prefix; unset: random initialization.", **fv)
    flags.DEFINE_string(
        "albert_config_file", None, "albert_config.json; default: the one in "
        "--init_checkpoint's directory.", **fv)
    flags.DEFINE_string(
        "spm_model_file", None, "SentencePiece model; default: spm.model in "
        "--init_checkpoint's directory.", **fv)
    flags.DEFINE_bool("do_lower_case", True, "Lowercase the text.", **fv)
    flags.DEFINE_integer("max_seq_length", max_seq_length, "T.", **fv)
    flags.DEFINE_integer("train_batch_size", 32, "Global batch.", **fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Eval batch.", **fv)
    flags.DEFINE_integer("predict_batch_size", 8, "Predict batch.", **fv)
    flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.",
                       **fv)
    flags.DEFINE_integer("train_step", 1000, "Optimizer steps.", **fv)
    flags.DEFINE_integer("warmup_step", 200, "Warmup steps.", **fv)
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.",
                      **fv)
    flags.DEFINE_float("dropout", 0.1, "Dropout before the head.", **fv)
    flags.DEFINE_integer("save_checkpoints_steps", 1000,
                         "Steps between checkpoints.", **fv)
    flags.DEFINE_integer("iterations_per_loop", 100,
                         "Steps per compiled call.", **fv)
    flags.DEFINE_bool("do_train", False, do_train_help, **fv)
    flags.DEFINE_bool("do_eval", False, do_eval_help, **fv)
    flags.DEFINE_bool("do_predict", False, do_predict_help, **fv)
    if export:
        flags.DEFINE_string("export_dir", None,
                            "Write a text-in SavedModel here.", **fv)
    flags.DEFINE_enum("strategy", None, list(distribute.STRATEGIES),
                      "Distribution strategy (default as pretraining).", **fv)
    flags.DEFINE_string("tpu", None,
                        "TPU name or address; 'local' on a TPU VM.", **fv)
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.", **fv)
    flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.", **fv)
    flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                      "bfloat16: mixed precision (float32 variables).", **fv)
    flags.DEFINE_bool("jit_compile", False, "Compile steps with XLA.", **fv)
    flags.DEFINE_integer("seed", 12345, "Seed.", **fv)


def check_no_arguments(argv):
    """Raises `app.UsageError` on positional arguments."""
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % argv[1:])


def common_kwargs(flag_values=FLAGS):
    """The runner keyword arguments of the common flags, with the strategy."""
    fv = flag_values
    strategy = distribute.get_strategy(
        fv.strategy, tpu=fv.tpu, tpu_zone=fv.tpu_zone,
        gcp_project=fv.gcp_project)
    names = ("init_checkpoint", "albert_config_file", "spm_model_file",
             "do_lower_case", "max_seq_length", "train_batch_size",
             "eval_batch_size", "predict_batch_size", "learning_rate",
             "train_step", "warmup_step", "optimizer", "dropout",
             "save_checkpoints_steps", "iterations_per_loop", "do_train",
             "do_eval", "do_predict", "dtype", "jit_compile", "seed")
    kwargs = {name: fv[name].value for name in names}
    if "export_dir" in fv:
        kwargs["export_dir"] = fv.export_dir
    kwargs["strategy"] = strategy
    return kwargs


def log_report(report, keys):
    """Logs the report entries named by `keys` that are present."""
    for key in keys:
        if key in report:
            logging.info("%s: %s", key, report[key])
