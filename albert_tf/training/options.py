"""The options every training job shares, defined once.

`TrainingOptions` is the base of `PretrainingOptions` and of the fine-tuning
jobs' options; its fields are the flags the jobs have in common (official
names). A job subclass adds its own fields, overrides defaults by declaring
a field again, and says which of its fields count the optimizer steps
(`num_steps`, `num_warmup`): the official pretraining script calls them
`num_train_steps` / `num_warmup_steps`, the official fine-tuning scripts
`train_step` / `warmup_step`.

`PretrainingOptions` (the flags of `python -m albert_tf.run_pretraining`)
is here too. The options are values with checks of their own fields; the
code that trains builds what they describe (`distribute.get_strategy`).
This module imports no TensorFlow, so a program reads its flags (and
answers `--help`) before TensorFlow loads.
"""

import dataclasses
import os
from typing import Optional

from absl import logging

from albert_tf.config import PRESETS
from albert_tf.config import AlbertConfig
from foundation import flag_options as flag_options_lib
from foundation import redaction
from foundation.flag_options import option

# --dtype -> Keras dtype policy (None: float32 throughout).
DTYPES = {"float32": None, "bfloat16": "mixed_bfloat16"}
# --optimizer (`lamb.create_optimizer`) and --strategy
# (`distribute.get_strategy`).
OPTIMIZERS = ("lamb", "adamw")
STRATEGIES = ("tpu", "multi_worker", "mirrored", "one_device")
# The error of a count or size that is not positive (`check_fields`).
_POSITIVE = "--{name} must be positive. Received: {value}"


def parse_jit_compile(value):
    """The `jit_compile` option as True, False or None ("auto").

    Raises:
        ValueError: anything else, naming the accepted values.
    """
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError("jit_compile must be true, false or auto. Received: "
                     f"jit_compile={value!r}")


@dataclasses.dataclass
class TrainingOptions:
    """Options of the `Trainer` and the strategy, shared by every job."""

    output_dir: str = option(
        None, "Checkpoints, eval_results.txt, best/ and TensorBoard logs.",
        required=True)
    init_checkpoint: str = option(
        None, "Initial weights: a model directory or checkpoint prefix of "
        "any format, or released weights by name (albert_base_v2, "
        "hf://org/repo, a keras-hub preset, an archive URL; fetched once "
        "into $ALBERT_TF_CACHE).")
    train_batch_size: int = option(32, "Global batch per optimizer step.",
                                   minimum=1)
    eval_batch_size: int = option(8, "Global evaluation batch.", minimum=1)
    learning_rate: float = option(1e-5, "Peak learning rate.", above=0)
    optimizer: str = option("adamw", "Optimizer (official LAMB or AdamW).",
                            choices=OPTIMIZERS)
    poly_power: float = option(1.0, "Power of the learning-rate decay.",
                               above=0)
    save_checkpoints_steps: int = option(1000, "Steps between checkpoints.",
                                         minimum=1)
    keep_checkpoint_max: int = option(
        5, "Newest checkpoints kept (each is evaluated when written with "
        "--do_eval; the best stays in best/); 0: keep all.", minimum=0)
    iterations_per_loop: int = option(
        100, "Steps per compiled call at most (a call is also cut short so "
        "that a progress line comes every --progress_interval_s).",
        minimum=1)
    progress_interval_s: float = option(
        30.0, "Seconds of wall time between progress lines (step, "
        "examples/s, ETA) of training, evaluation and prediction; the "
        "first comes after the first step.", above=0)
    do_train: bool = option(False, "Train.")
    do_eval: bool = option(False, "Evaluate every checkpoint; keep the best "
                           "in best/.")
    dtype: str = option("float32", "bfloat16: mixed precision (float32 "
                        "variables); auto: bfloat16 where the hardware has "
                        "bfloat16 matmuls (TPU, GPU from Ampere on, CPU with "
                        "AVX512_BF16 or AMX), else float32.",
                        choices=tuple(DTYPES) + ("auto",))
    gradient_accumulation_steps: int = option(
        1, "Micro-batches per step (each replica's share of the batch is "
        "split into this many).", minimum=1)
    seed: int = option(12345, "Seed of initialization, dropout and data "
                       "order.", minimum=0, maximum=2**32 - 1)
    jit_compile: Optional[bool] = option(
        None, "Compile the steps with XLA: true, false, or auto (the "
        "default): XLA on TPUs and GPUs, not on a CPU-only machine; the "
        "choice is recorded in output_dir/jit_compile.json and a resumed "
        "run keeps it.")
    max_train_seconds: float = option(
        0.0, "Stop (saving a checkpoint) once this many seconds of training "
        "have passed in this run; 0: no limit. Rerun to continue.",
        minimum=0)
    strategy: str = option(
        None, "Distribution strategy; default: tpu if --tpu is set, else "
        "mirrored over the local GPUs, else one CPU device.",
        choices=STRATEGIES)
    tpu: str = option(None, "TPU name or address; 'local' on a TPU VM.")
    tpu_zone: str = option(None, "GCE zone of the TPU.")
    gcp_project: str = option(None, "GCP project of the TPU.")

    # Names of the fields holding the step counts (see the module docstring).
    _STEPS_FIELD = "num_train_steps"
    _WARMUP_FIELD = "num_warmup_steps"

    @property
    def num_steps(self):
        return getattr(self, self._STEPS_FIELD)

    @property
    def num_warmup(self):
        return getattr(self, self._WARMUP_FIELD)

    @property
    def warmup_flag(self):
        """The flag of the warm-up steps, as the user types it."""
        return f"--{self._WARMUP_FIELD}"

    def validate(self, num_replicas=1):
        """Checks every option before any work: each flag's range
        (`flag_options.check_values`), then the options that must agree.

        Raises:
            ValueError: naming the first bad option as the user types it
                (`--train_batch_size`).
        """
        flag_options_lib.check_values(self)
        if not self.output_dir:
            raise ValueError("--output_dir is required. Received: "
                             f"{self.output_dir!r}")
        if self.dtype not in tuple(DTYPES) + ("auto",):
            raise ValueError(f"--dtype must be one of {sorted(DTYPES)} or "
                             f"auto. Received: {self.dtype!r}")
        parse_jit_compile(self.jit_compile)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"--optimizer must be one of {OPTIMIZERS}. "
                             f"Received: {self.optimizer!r}")
        # Library callers may build options without the flags' ranges.
        flag_options_lib.check_fields(
            self, (self._STEPS_FIELD, "train_batch_size", "eval_batch_size",
                   "save_checkpoints_steps", "iterations_per_loop",
                   "gradient_accumulation_steps", "progress_interval_s"),
            lambda value: value > 0, _POSITIVE)
        flag_options_lib.check_fields(
            self, (self._WARMUP_FIELD, "keep_checkpoint_max",
                   "max_train_seconds"),
            lambda value: value >= 0, "--{name} must be >= 0. Received: {value}")
        unit = num_replicas * self.gradient_accumulation_steps
        if self.train_batch_size % unit:
            raise ValueError(
                "--train_batch_size must be divisible by replicas x "
                f"--gradient_accumulation_steps ({num_replicas} x "
                f"{self.gradient_accumulation_steps}). Received: "
                f"{self.train_batch_size}")
        if self.eval_batch_size % num_replicas:
            raise ValueError(
                f"--eval_batch_size must be divisible by the {num_replicas} "
                f"replicas. Received: {self.eval_batch_size}")
        if self.do_train and self.num_warmup > self.num_steps:
            logging.warning(
                "--%s=%d is more than --%s=%d: the learning rate never "
                "reaches --learning_rate.", self._WARMUP_FIELD,
                self.num_warmup, self._STEPS_FIELD, self.num_steps)

    # The program an output folder's run belongs to (`run_settings`).
    _PROGRAM = None

    def run_program(self):
        """The job's name in the output folder's run record."""
        return self._PROGRAM or type(self).__name__

    def run_settings(self):
        """The settings that make this job's output what it is, recorded in
        `<output_dir>/albert_run.json` by the first run and compared on
        every rerun (`run_record.RunRecord`): `{flag as typed: JSON value}`.

        Only what changes the run's meaning is here; what a user changes
        on resume (the step counts, the learning rate and its schedule,
        checkpoint and loop intervals, --max_train_seconds, --do_eval,
        --dtype, --jit_compile, --gradient_accumulation_steps, the
        strategy) is not. Training's own settings are recorded only when
        the run trains, so an evaluation-only run is not compared on flags
        it does not use. Subclasses add their inputs and model.
        """
        if not self.do_train:
            return {}
        return {"--init_checkpoint": model_reference(self.init_checkpoint),
                "--train_batch_size": self.train_batch_size,
                "--optimizer": self.optimizer}


def local_path(path):
    """A local path made absolute (a rerun from another folder names the
    same file the same way); URLs and None unchanged."""
    if not path or "://" in path:
        return path
    return os.path.abspath(path)


def model_reference(path):
    """`local_path` of an existing model path; a released model's name
    (`albert_base_v2`: no such file here) unchanged; a URL without its
    credentials (the run record is a file others may read)."""
    if path and not os.path.exists(path) and not os.path.exists(
            path + ".index") and "/" not in path and os.sep not in path:
        return path
    if path and "://" in path:
        return redaction.redact(path)
    return local_path(path)


def local_patterns(patterns):
    """`local_path` of each pattern of a comma-separated list."""
    if not patterns:
        return patterns
    return ",".join(local_path(p.strip()) for p in patterns.split(",")
                    if p.strip())


@dataclasses.dataclass
class PretrainingOptions(TrainingOptions):
    """Everything a pretraining run needs; the fields are the CLI's flags.

    `config` (an `AlbertConfig`) may be given directly by library callers;
    otherwise `albert_config_file` or `preset` names it.
    """

    input_file: str = option(
        None, "TFRecord files: comma-separated paths or globs (gs:// too).",
        required=True)
    config: AlbertConfig = None
    albert_config_file: str = option(
        None, "An albert_config.json (official or this project's).")
    preset: str = option(None, "A named configuration instead of "
                         "--albert_config_file.", choices=tuple(sorted(PRESETS)))
    eval_input_file: str = option(
        None, "Evaluation records (default: --input_file).")
    spm_model_file: str = option(
        None, "The vocabulary the records were built with, copied as "
        "spm.model into --output_dir and best/ so that each is a complete "
        "model folder; default: the one the records' statistics file "
        "(stats.*.json beside them) names, else --init_checkpoint's.")
    train_batch_size: int = option(4096, "Global batch per optimizer step.",
                                   minimum=1)
    eval_batch_size: int = option(64, "Global evaluation batch.", minimum=1)
    max_seq_length: int = option(512, "L of the records.", minimum=1)
    max_predictions_per_seq: int = option(20, "P of the records.",
                                          minimum=1)
    num_train_steps: int = option(125000, "Optimizer steps.", minimum=1)
    num_warmup_steps: int = option(3125, "Linear warmup steps.", minimum=0)
    learning_rate: float = option(0.00176, "Peak learning rate.", above=0)
    optimizer: str = option("lamb", "Optimizer (official LAMB or AdamW).",
                            choices=("lamb", "adamw"))
    save_checkpoints_steps: int = option(5000, "Steps between checkpoints.",
                                         minimum=1)
    iterations_per_loop: int = option(
        1000, "Steps per compiled call at most (a call is also cut short so "
        "that a progress line comes every --progress_interval_s).",
        minimum=1)
    do_train: bool = option(True, "Train.")
    max_eval_steps: int = option(100, "Evaluation batches per checkpoint.",
                                 minimum=1)
    dynamic_masking: bool = option(
        False, "Records carry no masks: mask afresh each epoch.")
    masked_lm_prob: float = option(0.15, "Masking rate for --dynamic_masking.",
                                   above=0, maximum=1)
    skip_corrupt_records: bool = option(
        False, "On a corrupted or truncated record, skip (and log) the rest "
        "of its file instead of stopping.")

    def resolved_config(self):
        """The `AlbertConfig`: `config`, else `albert_config_file`, else
        `preset` (exactly one must be given)."""
        given = [name for name in ("config", "albert_config_file", "preset")
                 if getattr(self, name)]
        if len(given) != 1:
            raise ValueError("Give exactly one of --albert_config_file and "
                             f"--preset. Received: {given or 'neither'}")
        if self.config is not None:
            return self.config
        if self.preset:
            return AlbertConfig.from_preset(self.preset)
        return AlbertConfig.from_json_file(self.albert_config_file)

    _PROGRAM = "run_pretraining"
    # The config fields that set the model's variables and what it computes.
    _MODEL_FIELDS = ("vocab_size", "embedding_size", "hidden_size",
                     "num_hidden_layers", "num_hidden_groups",
                     "inner_group_num", "num_attention_heads",
                     "intermediate_size", "hidden_act",
                     "max_position_embeddings", "type_vocab_size", "share")

    def validate(self, num_replicas=1):
        super().validate(num_replicas)
        flag_options_lib.check_fields(
            self, ("max_seq_length", "max_predictions_per_seq",
                   "max_eval_steps"), lambda value: value > 0, _POSITIVE)
        if not self.do_train and not self.do_eval:
            raise ValueError("At least one of --do_train and --do_eval must "
                             "be true. Received: neither")
        config = self.resolved_config()
        if self.max_seq_length > config.max_position_embeddings:
            raise ValueError(
                f"--max_seq_length={self.max_seq_length} is longer than the "
                f"model's max_position_embeddings="
                f"{config.max_position_embeddings}")

    def evaluation_input(self):
        """The evaluation records: `eval_input_file`, else `input_file`."""
        return self.eval_input_file or self.input_file

    def run_settings(self):
        """The records (their files and shape), the masking, the model's
        shape-defining config fields and, for a training run, the initial
        weights, batch and optimizer (see `TrainingOptions.run_settings`).
        The evaluation records are recorded when the run evaluates (results
        on other records would be mixed into eval_results.txt and best/)."""
        settings = super().run_settings()
        settings.update({
            "--max_seq_length": self.max_seq_length,
            "--max_predictions_per_seq": self.max_predictions_per_seq,
            "--dynamic_masking": self.dynamic_masking})
        if self.dynamic_masking:
            settings["--masked_lm_prob"] = self.masked_lm_prob
        if self.do_train:
            settings["--input_file"] = local_patterns(self.input_file)
        if self.do_eval:
            settings["--eval_input_file"] = local_patterns(
                self.evaluation_input())
        config = self.resolved_config().to_dict()
        for field in self._MODEL_FIELDS:
            settings[f"{field} (--albert_config_file/--preset)"] = config[field]
        return settings
