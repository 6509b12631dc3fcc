"""Fine-tuning here against Hugging Face's PyTorch ALBERT, from one
checkpoint: step parity, SQuAD features and outcome over seeds (guide:
docs/finetuning.md#parity-with-the-reference; the code's map and results:
docs/benchmarks.md#fine-tuning-parity-with-the-reference).

`python -m benchmarks.finetune_parity --output_dir=parity` converts a
checkpoint of this project with `convert_checkpoint --target=huggingface`,
fine-tunes both sides on the same data, compares them, writes
`parity.json` and prints the tables; PyTorch and `transformers` come from
`requirements-peers.txt`.
"""

import dataclasses
import json
import os
import platform
import sys
import time

from benchmarks.finetune_parity.features import features_parity
from benchmarks.finetune_parity.outcome import fingerprint
from benchmarks.finetune_parity.outcome import ours_outcome
from benchmarks.finetune_parity.outcome import outcome_pair
from benchmarks.finetune_parity.outcome import outcome_rows
from benchmarks.finetune_parity.reference import REFERENCE_RECIPES
from benchmarks.finetune_parity.reference import reference_classification_outcome
from benchmarks.finetune_parity.reference import reference_squad_outcome
from benchmarks.finetune_parity.steps import step_parity
from benchmarks.finetune_parity.tasks import _spm_file
from benchmarks.finetune_parity.tasks import build_tiny_checkpoint
from benchmarks.finetune_parity.tasks import check_corpus
from benchmarks.finetune_parity.tasks import check_lengths
from benchmarks.finetune_parity.tasks import classification_data
from benchmarks.finetune_parity.tasks import convert_to_huggingface
from benchmarks.finetune_parity.tasks import model_dir_of
from benchmarks.finetune_parity.tasks import squad_data
from benchmarks.finetune_parity.tasks import write_classification_task
from benchmarks.finetune_parity.tasks import write_squad_files
from foundation import safe_io

# === Report ===

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    flags = open("/proc/cpuinfo").read()
                    isa = ("AVX-512" if " avx512f" in flags else
                           "AVX2" if " avx2" in flags else "no AVX2")
                    return f"{name} ({isa}, {os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def format_tables(result):
    lines = [f"CPU: {result['cpu']}"]
    if result.get("step_parity"):
        lines += ["", "| task | steps | max rel. loss diff | "
                  "min weight cosine | min update cosine |",
                  "|---|---|---|---|---|"]
    for task, row in result.get("step_parity", {}).items():
        lines.append(
            f"| {task} | {row['steps']} | {row['max_rel_loss_diff']:.2e} | "
            f"{row['min_weight_cosine']:.7f} | "
            f"{(row['min_update_cosine'] or float('nan')):.6f} |")
    if result.get("features"):
        lines += ["", "| SQuAD file | examples | features here | reference | "
                  "differences | causes |", "|---|---|---|---|---|---|"]
        for task, row in result["features"].items():
            lines.append(
                f"| {task} | {row['examples']} | {row['ours']} | "
                f"{row['reference']} | {row['differences'] or 'none'} | "
                f"{row['differing_examples_by_cause'] or 'none'} |")
    if result.get("outcome"):
        if result.get("reference_recipe", "pytorch") != "pytorch":
            lines += ["", "The reference's outcome runs follow this "
                      "project's official optimizer rule and schedule "
                      "(--reference_recipe=official)."]
        lines += ["", "| task | metric | here (mean ± sd) | reference | "
                  "seeds | difference [95% CI] | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for task, row in result["outcome"].items():
            low, high = row["diff_ci95"]
            lines.append(
                f"| {task} | {row['metric']} | {row['ours_mean']:.1f} ± "
                f"{row['ours_sd']:.1f} | {row['reference_mean']:.1f} ± "
                f"{row['reference_sd']:.1f} | {row['seeds']} | "
                f"{row['diff']:+.1f} [{low:+.1f}, {high:+.1f}] | "
                f"{row['verdict']} |")
    return "\n".join(lines)


@dataclasses.dataclass
class ParityOptions:
    """The benchmark's options: its flags, checked by `validate`.

    Example:

    ```python
    from benchmarks import finetune_parity

    options = finetune_parity.ParityOptions(
        "parity", steps=20, seeds=2, parts=("steps", "features"))
    result = finetune_parity.run(options)  # also writes parity/parity.json
    print(finetune_parity.format_tables(result))
    ```
    """

    output_dir: str
    init_checkpoint: str = None
    task_name: str = None
    data_dir: str = None
    train_file: str = None
    predict_file: str = None
    version_2_with_negative: bool = False
    steps: int = 200
    batch_size: int = 8
    learning_rate: float = 1e-4
    seeds: int = 5
    first_seed: int = 0
    outcome_steps: int = 1000
    outcome_learning_rate: float = 5e-4
    outcome_dropout: float = 0.1
    reference_recipe: str = "pytorch"
    max_seq_length: int = 64
    squad_max_seq_length: int = 128
    doc_stride: int = 64
    max_query_length: int = 32
    parts: tuple = ("steps", "features", "outcome")
    outcome_tasks: tuple = ("classification", "squad")
    corpus: str = "docstrings"

    def validate(self):
        check_corpus(self.corpus)
        if bool(self.task_name) != bool(self.data_dir):
            raise ValueError("--task_name and --data_dir go together. "
                             f"Received: --task_name={self.task_name}, "
                             f"--data_dir={self.data_dir}")
        if bool(self.train_file) != bool(self.predict_file):
            raise ValueError("--train_file and --predict_file go together. "
                             f"Received: --train_file={self.train_file}, "
                             f"--predict_file={self.predict_file}")
        if not 0.0 <= self.outcome_dropout < 1.0:
            raise ValueError("--outcome_dropout is a probability in [0, 1). "
                             f"Received: --outcome_dropout={self.outcome_dropout}")
        if self.reference_recipe not in REFERENCE_RECIPES:
            raise ValueError("--reference_recipe takes "
                             f"{', '.join(REFERENCE_RECIPES)}. Received: "
                             f"--reference_recipe={self.reference_recipe}")
        if self.first_seed < 0:
            raise ValueError("--first_seed must be 0 or more. Received: "
                             f"--first_seed={self.first_seed}")
        for name in ("steps", "batch_size", "seeds", "outcome_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be positive. Received: "
                                 f"--{name}={getattr(self, name)}")
        for path in (self.data_dir, self.init_checkpoint):
            if path and not os.path.exists(path):
                raise ValueError(f"Nothing at {path}. Received: {path}")
        for path in (self.train_file, self.predict_file):
            if path and not os.path.isfile(path):
                raise ValueError(f"No SQuAD file at {path}. Received: {path}")
        unknown = set(self.parts) - {"steps", "features", "outcome"}
        if unknown:
            raise ValueError("--parts takes steps, features, outcome. "
                             f"Received: {sorted(unknown)}")
        unknown = set(self.outcome_tasks) - {"classification", "squad"}
        if unknown or not self.outcome_tasks:
            raise ValueError("--outcome_tasks takes classification, squad. "
                             f"Received: {sorted(unknown or ['(none)'])}")


def run(options, log=print):
    """Runs the benchmark; returns the result written to `parity.json`."""
    options.validate()
    work = options.output_dir
    os.makedirs(work, exist_ok=True)
    start = time.time()
    init = (model_dir_of(options.init_checkpoint, work)
            if options.init_checkpoint
            else build_tiny_checkpoint(os.path.join(work, "tiny_model")))
    check_lengths(init, {"--max_seq_length": options.max_seq_length,
                         "--squad_max_seq_length": options.squad_max_seq_length})
    hf_dir = convert_to_huggingface(init, os.path.join(work, "huggingface"))
    spm_file = _spm_file(init)
    if spm_file is None:
        raise ValueError("The checkpoint has no SentencePiece model (spm.model "
                         f"beside it). Received: --init_checkpoint={init}")
    task_name, data_dir = options.task_name, options.data_dir
    if not data_dir:
        task_name = "sst-2"
        data_dir = write_classification_task(
            os.path.join(work, "data", "sst"), options.corpus)
    squad_files = {}
    if options.train_file:
        version = "squad_v2.0" if options.version_2_with_negative else "squad_v1.1"
        squad_files[version] = (options.train_file, options.predict_file)
    else:
        squad_files["squad_v1.1"] = write_squad_files(
            os.path.join(work, "data", "squad1"), False, options.corpus)
        squad_files["squad_v2.0"] = write_squad_files(
            os.path.join(work, "data", "squad2"), True, options.corpus)
    result = {"cpu": cpu_name(), "init_checkpoint": init,
              "reference_recipe": options.reference_recipe,
              "reference": _reference_versions(),
              "corpus": None if options.data_dir and options.train_file
              else options.corpus,
              "classification_task": {"task_name": task_name,
                                      "data_dir": data_dir},
              "squad_files": squad_files, "step_parity": {},
              "features": {}, "outcome": {}}
    squad_window = dict(max_seq_length=options.squad_max_seq_length,
                        doc_stride=options.doc_stride,
                        max_query_length=options.max_query_length)
    if "steps" in options.parts:
        datasets = [classification_data(task_name, data_dir, spm_file,
                                        options.max_seq_length)]
        for version, (train_file, _) in squad_files.items():
            datasets.append(squad_data(train_file, spm_file,
                                       version == "squad_v2.0", **squad_window))
        for data in datasets:
            t = time.time()
            row = step_parity(data, init, hf_dir, work, options.steps,
                              options.batch_size, options.learning_rate)
            row["seconds"] = round(time.time() - t, 1)
            result["step_parity"][data.kind] = row
            _write(work, result)
            log(f"step parity {data.kind}: {row['steps']} steps, max rel. "
                f"loss diff {row['max_rel_loss_diff']:.2e}, min cosine "
                f"{row['min_weight_cosine']:.7f} ({row['seconds']} s)")
    if "features" in options.parts:
        for version, (train_file, _) in squad_files.items():
            result["features"][version] = features_parity(
                train_file, version == "squad_v2.0", spm_file, hf_dir,
                **squad_window)
            _write(work, result)
            log(f"features {version}: {result['features'][version]}")
    if "outcome" in options.parts:
        _outcome(options, result, init, hf_dir, task_name, data_dir,
                 squad_files, log)
    result["seconds"] = round(time.time() - start, 1)
    _write(work, result)
    return result


def _write(work, result):
    safe_io.write_atomically(os.path.join(work, "parity.json"),
                             json.dumps(result, indent=2))


def _outcome(options, result, init, hf_dir, task_name, data_dir, squad_files,
             log):
    common = dict(steps=options.outcome_steps, batch_size=options.batch_size * 2,
                  learning_rate=options.outcome_learning_rate,
                  dropout=options.outcome_dropout)
    recipe = dict(recipe=options.reference_recipe)
    # Results of the reference's own recipe keep the key they always had.
    keyed = recipe if options.reference_recipe != "pytorch" else {}
    runs = {}
    if "classification" in options.outcome_tasks:
        sentence = dict(max_seq_length=options.max_seq_length)
        runs["classification"] = (
            [init, data_dir],
            dict(common, task_name=task_name, **sentence, **keyed),
            lambda seed, work: ours_outcome(
                "classification", init, work, seed, task_name=task_name,
                data_dir=data_dir, **sentence, **common),
            lambda seed: reference_classification_outcome(
                hf_dir, task_name, data_dir, seed, **sentence, **common,
                **recipe))
    version = "squad_v1.1"
    if version in squad_files and "squad" in options.outcome_tasks:
        train_file, predict_file = squad_files[version]
        window = dict(max_seq_length=options.squad_max_seq_length,
                      doc_stride=options.doc_stride)
        runs[version] = (
            [init, train_file, predict_file],
            dict(common, max_query_length=options.max_query_length, **window,
                 **keyed),
            lambda seed, work: ours_outcome(
                "squad", init, work, seed, train_file=train_file,
                predict_file=predict_file,
                max_query_length=options.max_query_length, **window,
                **common),
            lambda seed: reference_squad_outcome(
                hf_dir, train_file, predict_file, seed, **window, **common,
                **recipe))
    for name, (inputs, settings, ours_run, reference_run) in runs.items():
        inputs = fingerprint(inputs)  # once a task: a checkpoint can be large
        ours, theirs = [], []
        for seed in range(options.first_seed,
                          options.first_seed + options.seeds):
            pair = outcome_pair(options.output_dir, name, seed, inputs,
                                settings, ours_run, reference_run)
            ours.append(pair["ours"])
            theirs.append(pair["reference"])
            log(f"outcome {name} seed {seed}: here {pair['ours']}, reference "
                f"{pair['reference']}" + (" (measured before, read back)"
                                          if pair["read_back"] else ""))
            if len(ours) > 1 or len(ours) == options.seeds:  # a row a seed
                result["outcome"].update(outcome_rows(name, ours, theirs))
                _write(options.output_dir, result)


def _reference_versions():
    try:
        import torch
        import transformers
    except ImportError:
        return None
    return {"torch": torch.__version__, "transformers": transformers.__version__}


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.finetune_parity",
        description=__doc__.split("\n\n")[0])
    defaults = ParityOptions(output_dir=None)
    for field in dataclasses.fields(ParityOptions):
        default = getattr(defaults, field.name)
        if field.name in ("parts", "outcome_tasks"):
            parser.add_argument(f"--{field.name}", default=",".join(default))
        elif field.type is bool or isinstance(default, bool):
            parser.add_argument(f"--{field.name}", action="store_true")
        else:
            kind = type(default) if default is not None else str
            parser.add_argument(f"--{field.name}", type=kind, default=default,
                                required=field.name == "output_dir")
    args = vars(parser.parse_args(argv))
    for name in ("parts", "outcome_tasks"):
        args[name] = tuple(p for p in args[name].split(",") if p)
    options = ParityOptions(**args)
    try:
        options.validate()
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        print(f"finetune_parity: the reference needs PyTorch and transformers "
              f"(pip install -r requirements-peers.txt). Received: {error}",
              file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"finetune_parity: {error}", file=sys.stderr)
        return 2
    try:
        result = run(options)
    except (ValueError, OSError) as error:
        print(f"finetune_parity: {error}", file=sys.stderr)
        return 1
    print(format_tables(result))
    return 0
