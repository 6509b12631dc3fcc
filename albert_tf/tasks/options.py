"""The options of the fine-tuning jobs: the flags of their programs.

`FinetuneOptions` holds the flags every fine-tuning job shares (the official
`run_classifier.py` / `run_squad*.py` / `run_race.py` names: `train_step`,
`warmup_step`, ...); `ClassifierOptions`, `SquadOptions` and `RaceOptions`
add each job's own. This module imports no TensorFlow, so a program reads
its flags (and answers `--help`) before TensorFlow loads; the methods that
need the library import it when called. The jobs themselves are in
`albert_tf.tasks.finetune_jobs`.
"""

import dataclasses
import os

from data_prep.flag_options import option

from albert_tf.training.options import TrainingOptions, local_path

# What an export's text-in model computes in (`export.serving_dtype_auto.
# CHOICES`, which imports TensorFlow; tests check they agree).
SERVING_DTYPES = ("float32", "bfloat16", "int8", "auto")
SERVING_DTYPE_HELP = (
    "What the exported text-in model computes in: `float32`; `bfloat16` "
    "(fast where the CPU has AVX512_BF16 or AMX); `int8` (int8 weights and "
    "matmuls, compiled by XLA: TF Serving needs "
    "--xla_cpu_compilation_enabled=true); `auto`: the fastest of the three on "
    "this machine whose outputs agree with float32, recorded in "
    "<version>/assets.extra/serving_dtype.json.")


def serving_dtype_option():
    """The `--serving_dtype` flag of every program that exports."""
    return option("float32", SERVING_DTYPE_HELP, choices=SERVING_DTYPES)


@dataclasses.dataclass
class FinetuneOptions(TrainingOptions):
    """The options every fine-tuning job has (the shared flags)."""

    albert_config_file: str = option(
        None, "albert_config.json; default: the one in --init_checkpoint's "
        "directory.")
    spm_model_file: str = option(
        None, "SentencePiece model; default: spm.model in --init_checkpoint's "
        "directory.")
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

    def output_files(self):
        """The files of `output_dir` this job writes besides the
        `Trainer`'s (its prediction files)."""
        return []

    def input_files(self):
        """The files this job reads (to refuse writing over one)."""
        return [path for path in (self.spm_model_file,
                                  self.albert_config_file) if path]

    def check_outputs(self):
        """Refuses, before any work, outputs that cannot be written or that
        would overwrite one of the job's inputs.

        Raises:
            safe_io.OutputError: naming the flag and the file.
        """
        from data_prep import safe_io  # pylint: disable=import-outside-toplevel
        safe_io.check_output_path(self.output_dir, "--output_dir")
        export_dir = getattr(self, "export_dir", None)
        if export_dir:
            safe_io.check_output_path(export_dir, "--export_dir")
        inputs = {os.path.realpath(p) for p in self.input_files()
                  if "://" not in p}
        for path in self.output_files():
            if "://" not in path and os.path.realpath(path) in inputs:
                raise safe_io.OutputError(
                    f"--output_dir={self.output_dir} would overwrite the "
                    f"input {path} with this run's predictions; choose "
                    "another --output_dir")

    def spm_path(self):
        """The SentencePiece model: `spm_model_file`, else `spm.model` in the
        `init_checkpoint` directory."""
        if self.spm_model_file:
            return self.spm_model_file
        from albert_tf.training import checkpoint as checkpoint_lib  # pylint: disable=import-outside-toplevel
        if self.init_checkpoint:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            folder = self.init_checkpoint
            if not tf.io.gfile.isdir(folder):
                folder = os.path.dirname(folder)
            candidate = os.path.join(folder, checkpoint_lib.SPM_NAME)
            if tf.io.gfile.exists(candidate):
                return candidate
        raise ValueError("A SentencePiece model is needed: pass "
                         "--spm_model_file or an --init_checkpoint directory "
                         f"holding {checkpoint_lib.SPM_NAME}. Received: neither")

    def encoder(self, dtype):
        """The encoder to fine-tune, under the dtype policy `dtype`.

        Raises:
            ValueError: `max_seq_length` is longer than its position table.
        """
        from albert_tf.tasks.finetune import load_encoder  # pylint: disable=import-outside-toplevel
        encoder = load_encoder(self.init_checkpoint, self.albert_config_file,
                               dtype)
        positions = encoder.config.max_position_embeddings
        if self.max_seq_length > positions:
            raise ValueError(f"max_seq_length={self.max_seq_length} is longer "
                             "than the encoder's max_position_embeddings="
                             f"{positions}")
        return encoder


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

    _PROGRAM = "run_classifier"

    def run_settings(self):
        settings = super().run_settings()
        if self.do_train:
            settings.update({"--task_name": self.task_name.lower(),
                             "--data_dir": local_path(self.data_dir)})
        return settings

    def output_files(self):
        from albert_tf.tasks import glue  # pylint: disable=import-outside-toplevel
        return [os.path.join(self.output_dir,
                             glue.get_task(self.task_name).submission_name)]

    def input_files(self):
        from albert_tf.tasks import glue  # pylint: disable=import-outside-toplevel
        task = glue.get_task(self.task_name)
        return super().input_files() + [
            os.path.join(self.data_dir, name) for name in task.files.values()]


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

    def output_files(self):
        return [os.path.join(self.output_dir, name)
                for name in ("predictions.json", "null_odds.json")]

    def input_files(self):
        return super().input_files() + [
            path for path in (self.train_file, self.predict_file) if path]


@dataclasses.dataclass
class RaceOptions(FinetuneOptions):
    """`python -m albert_tf.run_race`'s flags."""

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

    def output_files(self):
        return [os.path.join(self.output_dir, "predictions.json")]
