"""The options every training job shares, defined once.

`TrainingOptions` is the base of `PretrainingOptions` and of the fine-tuning
jobs' options; its fields are the flags the jobs have in common (official
names). A job subclass adds its own fields, overrides defaults by declaring
a field again, and says which of its fields count the optimizer steps
(`num_steps`, `num_warmup`): the official pretraining script calls them
`num_train_steps` / `num_warmup_steps`, the official fine-tuning scripts
`train_step` / `warmup_step`.

`PretrainingOptions` (the flags of `python -m albert_tf.run_pretraining`)
is here too. This module imports no TensorFlow, so a program reads its
flags (and answers `--help`) before TensorFlow loads; the methods that need
the library import it when called.
"""

import dataclasses
from typing import Optional

from data_prep.options import option

from albert_tf.config import AlbertConfig, PRESETS

# --dtype -> Keras dtype policy (None: float32 throughout).
DTYPES = {"float32": None, "bfloat16": "mixed_bfloat16"}
# --optimizer (`optimization.create_optimizer`) and --strategy
# (`distribute.get_strategy`).
OPTIMIZERS = ("lamb", "adamw")
STRATEGIES = ("tpu", "multi_worker", "mirrored", "one_device")


class TrainingDivergedError(RuntimeError):
    """The loss or the weights became NaN or infinite.

    Raised by the `Trainer`; defined here so that the programs name it (one
    line, not a traceback) without importing the training code first.
    """


@dataclasses.dataclass
class TrainingOptions:
    """Options of the `Trainer` and the strategy, shared by every job."""

    output_dir: str = option(
        None, "Checkpoints, eval_results.txt, best/ and TensorBoard logs.",
        required=True)
    init_checkpoint: str = option(
        None, "Initial weights: a model directory or checkpoint prefix.")
    train_batch_size: int = option(32, "Global batch per optimizer step.")
    eval_batch_size: int = option(8, "Global evaluation batch.")
    learning_rate: float = option(1e-5, "Peak learning rate.")
    optimizer: str = option("adamw", "Optimizer (official LAMB or AdamW).",
                            choices=OPTIMIZERS)
    poly_power: float = option(1.0, "Power of the learning-rate decay.")
    save_checkpoints_steps: int = option(1000, "Steps between checkpoints.")
    keep_checkpoint_max: int = option(
        5, "Newest checkpoints kept (each is evaluated when written with "
        "--do_eval; the best stays in best/).")
    iterations_per_loop: int = option(
        100, "Steps per compiled call (and per progress line).")
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
        "split into this many).")
    seed: int = option(12345, "Seed of initialization, dropout and data "
                       "order.")
    jit_compile: Optional[bool] = option(
        None, "Compile the steps with XLA: true, false, or auto (the "
        "default): the first steps are timed both ways and the faster is "
        "kept and remembered in output_dir (always XLA on TPUs).")
    max_train_seconds: float = option(
        0.0, "Stop (saving a checkpoint) once this many seconds of training "
        "have passed in this run; 0: no limit. Rerun to continue.")
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

    def make_strategy(self):
        """The `tf.distribute.Strategy` the strategy fields describe."""
        from albert_tf.training import distribute  # pylint: disable=import-outside-toplevel
        return distribute.get_strategy(
            self.strategy, tpu=self.tpu, tpu_zone=self.tpu_zone,
            gcp_project=self.gcp_project)

    def validate(self, num_replicas=1):
        """Raises `ValueError` naming the first inconsistent option."""
        if not self.output_dir:
            raise ValueError("output_dir is required. Received: "
                             f"output_dir={self.output_dir!r}")
        if self.dtype not in tuple(DTYPES) + ("auto",):
            raise ValueError(f"dtype must be one of {sorted(DTYPES)} or auto. "
                             f"Received: dtype={self.dtype!r}")
        from albert_tf.training import compile_choice  # pylint: disable=import-outside-toplevel
        compile_choice.parse(self.jit_compile)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}. "
                             f"Received: optimizer={self.optimizer!r}")
        positive = (self._STEPS_FIELD, "train_batch_size", "eval_batch_size",
                    "save_checkpoints_steps", "iterations_per_loop",
                    "gradient_accumulation_steps")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive. "
                                 f"Received: {name}={getattr(self, name)}")
        for name in (self._WARMUP_FIELD, "keep_checkpoint_max",
                     "max_train_seconds"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0. "
                                 f"Received: {name}={getattr(self, name)}")
        unit = num_replicas * self.gradient_accumulation_steps
        if self.train_batch_size % unit:
            raise ValueError(
                "train_batch_size must be divisible by replicas x "
                f"gradient_accumulation_steps ({num_replicas} x "
                f"{self.gradient_accumulation_steps}). Received: "
                f"train_batch_size={self.train_batch_size}")
        if self.eval_batch_size % num_replicas:
            raise ValueError(
                f"eval_batch_size must be divisible by the {num_replicas} "
                f"replicas. Received: eval_batch_size={self.eval_batch_size}")


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
    train_batch_size: int = option(4096, "Global batch per optimizer step.")
    eval_batch_size: int = option(64, "Global evaluation batch.")
    max_seq_length: int = option(512, "L of the records.")
    max_predictions_per_seq: int = option(20, "P of the records.")
    num_train_steps: int = option(125000, "Optimizer steps.")
    num_warmup_steps: int = option(3125, "Linear warmup steps.")
    learning_rate: float = option(0.00176, "Peak learning rate.")
    optimizer: str = option("lamb", "Optimizer (official LAMB or AdamW).",
                            choices=("lamb", "adamw"))
    save_checkpoints_steps: int = option(5000, "Steps between checkpoints.")
    iterations_per_loop: int = option(
        1000, "Steps per compiled call (and per progress line).")
    do_train: bool = option(True, "Train.")
    max_eval_steps: int = option(100, "Evaluation batches per checkpoint.")
    dynamic_masking: bool = option(
        False, "Records carry no masks: mask afresh each epoch.")
    masked_lm_prob: float = option(0.15, "Masking rate for --dynamic_masking.")
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

    def validate(self, num_replicas=1):
        super().validate(num_replicas)
        for name in ("max_seq_length", "max_predictions_per_seq",
                     "max_eval_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive. "
                                 f"Received: {name}={getattr(self, name)}")
        if not self.do_train and not self.do_eval:
            raise ValueError("At least one of do_train and do_eval must be "
                             "True. Received: neither")
        config = self.resolved_config()
        if self.max_seq_length > config.max_position_embeddings:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} is longer than the "
                f"model's max_position_embeddings="
                f"{config.max_position_embeddings}")
