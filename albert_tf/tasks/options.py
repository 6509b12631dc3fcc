"""The options of the fine-tuning jobs: the flags of their programs.

`FinetuneOptions` holds the flags every fine-tuning job shares (the official
`run_classifier.py` / `run_squad*.py` / `run_race.py` names: `train_step`,
`warmup_step`, ...); `ClassifierOptions`, `SquadOptions` and `RaceOptions`
add each job's own. They hold values and check their own fields; this
module imports no TensorFlow, so a program reads its flags (and answers
`--help`) before TensorFlow loads. The jobs, which load the encoder and
check the files, are in `albert_tf.tasks.finetuning_jobs`.
"""

import dataclasses

from albert_tf.models.serving_dtypes import SERVING_DTYPE_CHOICES
from albert_tf.training.options import TrainingOptions
from albert_tf.training.options import local_path
from foundation.flag_options import option

SERVING_DTYPE_HELP = (
    "What the exported text-in model computes in: `float32`; `bfloat16` "
    "(fast where the CPU has AVX512_BF16 or AMX); `int8` (int8 weights and "
    "matmuls, compiled by XLA: TF Serving needs "
    "--xla_cpu_compilation_enabled=true); `auto`: the fastest of the three on "
    "this machine whose outputs agree with float32, recorded in "
    "<version>/assets.extra/serving_dtype.json.")


def serving_dtype_option():
    """The `--serving_dtype` flag of every program that exports."""
    return option("float32", SERVING_DTYPE_HELP,
                  choices=SERVING_DTYPE_CHOICES)


# What an export writes besides the SavedModels, and the weights of
# `export.litert`'s `.tflite` models (docs/on_device.md).
EXPORT_FORMATS = ("saved_model", "litert")
LITERT_QUANTIZATIONS = ("int8", "float16", "float32")


def litert_quantization_option():
    """The `--litert_quantization` flag of every program that writes
    `.tflite` models."""
    return option("int8", "Weights of the `.tflite` models: `int8` (dynamic "
                  "range), `float16` or `float32`.",
                  choices=LITERT_QUANTIZATIONS)


@dataclasses.dataclass
class FinetuneOptions(TrainingOptions):
    """The options every fine-tuning job has (the shared flags)."""

    albert_config_file: str = option(
        None, "albert_config.json; default: the one in --init_checkpoint's "
        "directory.")
    spm_model_file: str = option(
        None, "SentencePiece model; default: the one that comes with "
        "--init_checkpoint (spm.model in this project's model directory).")
    do_lower_case: bool = option(True, "Lowercase the text.")
    max_seq_length: int = option(128, "T: longer inputs are truncated.",
                                 minimum=4)
    predict_batch_size: int = option(8, "Prediction batch.", minimum=1)
    train_step: int = option(1000, "Optimizer steps.", minimum=1)
    warmup_step: int = option(200, "Linear warmup steps.", minimum=0)
    dropout: float = option(0.1, "Dropout before the head.", minimum=0,
                            maximum=0.99)
    do_predict: bool = option(False, "Write predictions for the test data.")

    _STEPS_FIELD = "train_step"
    _WARMUP_FIELD = "warmup_step"

    def validate(self, num_replicas=1):
        super().validate(num_replicas)
        if not (self.do_train or self.do_eval or self.do_predict
                or getattr(self, "export_dir", None)):
            raise ValueError("Nothing to do: pass --do_train, --do_eval, "
                             "--do_predict or --export_dir. Received: none")
        if self.predict_batch_size % num_replicas:
            raise ValueError(
                f"--predict_batch_size must be divisible by the {num_replicas}"
                f" replicas. Received: {self.predict_batch_size}")

    def run_settings(self):
        """The base's, and what the fine-tuned weights are made from: the
        vocabulary, the casing and the length (with the job's inputs)."""
        settings = super().run_settings()
        if self.do_train:
            settings.update({
                "--spm_model_file": local_path(self.spm_model_file),
                "--albert_config_file": local_path(self.albert_config_file),
                "--do_lower_case": self.do_lower_case,
                "--max_seq_length": self.max_seq_length})
        return settings


@dataclasses.dataclass
class ClassifierOptions(FinetuneOptions):
    """`python -m albert_apps.run_classifier`'s flags."""

    task_name: str = option(
        None, "GLUE task: cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm "
        "(mismnli), qnli, rte, wnli.", required=True)
    data_dir: str = option(None, "The task's folder of TSV files.",
                           required=True)
    export_dir: str = option(None, "Write a text-in SavedModel here.")
    serving_dtype: str = serving_dtype_option()
    export_format: str = option(
        "saved_model", "`saved_model`: the SavedModel; `litert`: also "
        "`<export_dir>/albert_<task>_litert/<version>/classifier.tflite`, "
        "text in, for phones (docs/on_device.md). Not for sts-b "
        "(a regression).", choices=EXPORT_FORMATS)
    litert_quantization: str = litert_quantization_option()

    _PROGRAM = "run_classifier"

    def validate(self, num_replicas=1):
        super().validate(num_replicas)
        if self.export_format == "litert" and not self.export_dir:
            raise ValueError("--export_format=litert writes into "
                             "--export_dir. Received: no --export_dir")

    def run_settings(self):
        settings = super().run_settings()
        if self.do_train:
            settings.update({"--task_name": self.task_name.lower(),
                             "--data_dir": local_path(self.data_dir)})
        return settings


@dataclasses.dataclass
class SquadOptions(FinetuneOptions):
    """`python -m albert_apps.run_squad`'s flags."""

    train_file: str = option(None, "SQuAD JSON for training.")
    predict_file: str = option(
        None, "SQuAD JSON to evaluate (with answers) and predict.")
    version_2_with_negative: bool = option(
        False, "SQuAD v2.0: questions may have no answer.")
    max_seq_length: int = option(384, "T: question + window of the context.",
                                 minimum=5)
    learning_rate: float = option(5e-5, "Peak learning rate.", above=0)
    doc_stride: int = option(128, "Pieces between window starts.", minimum=1)
    max_query_length: int = option(64, "Longer questions are truncated.",
                                   minimum=1)
    n_best_size: int = option(20, "Start/end candidates per window.",
                              minimum=1)
    max_answer_length: int = option(30, "Longest answer, in pieces.",
                                    minimum=1)
    na_prob_threshold: float = option(
        0.5, "v2.0: answer nothing above this no-answer probability.",
        minimum=0, maximum=1)
    export_dir: str = option(None, "Write a text-in SavedModel here.")
    serving_dtype: str = serving_dtype_option()

    _PROGRAM = "run_squad"

    def validate(self, num_replicas=1):
        super().validate(num_replicas)
        if self.do_train and not self.train_file:
            raise ValueError("--do_train needs --train_file. Received: none")
        if (self.do_eval or self.do_predict) and not self.predict_file:
            raise ValueError("--do_eval and --do_predict need --predict_file. "
                             "Received: none")
        if self.max_seq_length < self.max_query_length + 4:
            raise ValueError(
                "--max_seq_length must leave room for the context after the "
                "question (at least --max_query_length + 4). Received: "
                f"--max_seq_length={self.max_seq_length}, "
                f"--max_query_length={self.max_query_length}")

    def run_settings(self):
        settings = super().run_settings()
        if self.do_train:
            settings.update({
                "--train_file": local_path(self.train_file),
                "--version_2_with_negative": self.version_2_with_negative})
        return settings


@dataclasses.dataclass
class RaceOptions(FinetuneOptions):
    """`python -m albert_apps.run_race`'s flags."""

    data_dir: str = option(None, "The RACE folder (train/, dev/, test/).",
                           required=True)
    max_seq_length: int = option(512, "T of each (passage, question + "
                                 "option) sequence.", minimum=4)
    max_qa_length: int = option(128, "Longest question + option, in pieces.",
                                minimum=1)
    num_choices: int = option(4, "Options per question.", minimum=2,
                              maximum=26)

    _PROGRAM = "run_race"

    def run_settings(self):
        settings = super().run_settings()
        if self.do_train:
            settings.update({"--data_dir": local_path(self.data_dir),
                             "--num_choices": self.num_choices})
        return settings
