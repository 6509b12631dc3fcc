"""The command blocks of the README and of `docs/`, and the test that runs
each command.

A command block is a fenced block marked `bash`, `sh`, `shell` or
`console`; each of its commands is one logical line (lines ending in `\\`
joined, comment lines left out). The journeys do not keep copies of these
commands: they read them here, with `command(key, ...)`, and run them with
the changes a test needs (tiny sizes, the workspace's paths), so what the
documentation says is what runs. `code_block(key)` is the same for a
Python block: a test runs it as written, with only its placeholder paths
filled in.

`JOURNEYS` names, for every documented command, the journey module that
runs it; `ELSEWHERE` the few that another runner covers (CI's install,
the Bazel targets, the long studies' quick mode), and `NOT_RUN_HERE` the
ones that need what no test machine has (Docker, a Dataflow or Flink
cluster). A key is a piece of the command's text that picks out exactly one
command (the same command in several files counts once).
`PYTHON_BLOCKS` names, for every documented Python block, the test module
that runs it (`code_block(key)`), and `PYTHON_NOT_RUN_HERE` the few that
need what no test machine has, with what runs in their place.
`tests/test_documented_commands.py` checks all of this without running
anything, so a new command or Python block that nothing runs fails the
default tests.
"""

import dataclasses
import glob
import os
import pathlib
import re
import shlex

REPO = str(pathlib.Path(__file__).resolve().parents[2])
DOCUMENTS = ("README.md", "docs/*.md")
COMMAND_LANGUAGES = ("bash", "sh", "shell", "console")

_PRETRAIN = "tests/journeys/test_pretrain_journey.py"
_FINETUNE = "tests/journeys/test_finetune_journey.py"
_CONVERT = "tests/journeys/test_convert_journey.py"
_COMMON = "tests/journeys/common.py"
_DASK = "tests/journeys/test_dask_journey.py"

# Key -> the journey module that reads the command with `command(key)`.
JOURNEYS = {
    # docs/pretraining_data.md
    "python -m data_prep.build_vocab --input_file='corpus/*.txt'": _COMMON,
    "--input_file='corpus/*.txt.gz' --output_file=data/train.tfrecord":
        _COMMON,
    # docs/beam.md
    "--runner=DirectRunner": _PRETRAIN,
    "dask scheduler --host 127.0.0.1": _DASK,
    "dask worker tcp://127.0.0.1:8786": _DASK,
    "build_vocab --runner=DaskRunner": _DASK,
    "create_pretraining_data --runner=DaskRunner": _DASK,
    "kill %2 %1": _DASK,
    # docs/pretraining.md
    "python -m albert_tf.run_pretraining --input_file='data/train.tfrecord-*'":
        _COMMON,
    "--checkpoint=runs/tiny/best": _PRETRAIN,
    # README.md: TPUStrategy
    "python -m albert_tf.run_pretraining --tpu=local": _PRETRAIN,
    # README.md, docs/serving.md
    "--export_dir=$EXPORT_DIR --model_name=albert --max_seq_length=128":
        _PRETRAIN,
    "python -m export.serving_compat $EXPORT_DIR": _PRETRAIN,
    # docs/on_device.md
    "--format=litert": "tests/journeys/test_litert_journey.py",
    # docs/finetuning.md
    "python -m albert_apps.run_classifier": _FINETUNE,
    "python -m albert_apps.run_squad": _FINETUNE,
    "python -m albert_apps.run_race": _FINETUNE,
    # docs/converting.md
    "--source=tf1 --input=albert_base --output_dir": _CONVERT,
    "--source=tf1 --input=albert_base_hub": _CONVERT,
    "--source=huggingface --input=albert-base-v2": _CONVERT,
    "--output_dir=exports/mine_tf1 --target=tf1": _CONVERT,
    "--output_dir=exports/mine_hf --target=huggingface": _CONVERT,
}

# Key -> (runner, text the runner holds, why not a journey).
ELSEWHERE = {
    "pip install -r requirements.txt -e . && python -m pytest": (
        ".ci/run", "python -m pytest",
        "CI installs from requirements.txt into a fresh virtual environment "
        "and runs the tests"),
    "pip install -r requirements.txt -e . && python -m albert_apps.quickstart":
        (".ci/run", "-r requirements.txt -e .",
         "CI installs as the command does; the job's stages run in "
         "tests/test_quickstart*.py"),
    "bazel test": (".ci/run", "bazel test",
                   "CI builds every Bazel target and runs the smoke ones "
                   "(pytest has run every module before)"),
    "python -m benchmarks.paper_claims": (
        "tests/test_paper_claims.py", '"benchmarks.paper_claims", "--quick"',
        "the default study takes 46 minutes; the test runs it with --quick"),
    "--source=keras_hub --input=albert_base_en_uncased": (
        "tests/test_keras_hub.py", 'source="keras_hub"',
        "a keras-hub preset needs keras_hub to write; that test writes one "
        "and converts it"),
}

# Key -> why no test runs it, and what runs instead.
NOT_RUN_HERE = {
    "docker run": "needs Docker and the tensorflow/serving image; "
                  "tests/test_rest_examples.py sends every documented "
                  "request to the export the command serves",
    "--runner=DataflowRunner": "needs a Google Cloud project; the journeys "
                               "run the DirectRunner command and the Dask "
                               "block",
    "--runner=FlinkRunner": "needs a Flink cluster, and the runner downloads "
                            "a job-server jar from Maven Central, which test "
                            "machines cannot reach; the journeys run the "
                            "DirectRunner command and the Dask block",
}


_PYTHON = "tests/journeys/test_python_blocks.py"

# Python blocks: key -> the test module that runs the block it picks out,
# with `code_block(key)`.
PYTHON_BLOCKS = {
    # README.md: Keras on raw text
    'AlbertTextPreprocessor("runs/keras/spm.model"': _PYTHON,
    # README.md: Load as a Keras layer
    'load_pretrained("albert_base_v2").encoder': "tests/test_model_cache.py",
    'keras_layer.load_exported_encoder("/models/albert_encoder/1")':
        "tests/test_keras_layer.py",
    # docs/model.md
    'AlbertConfig.from_preset("albert_base_v2")': _PYTHON,
    # docs/serving.md
    'tf.saved_model.load("$EXPORT_DIR/albert/1")': _PYTHON,
    # docs/on_device.md
    "InterpreterWithCustomOps(": "tests/journeys/test_litert_journey.py",
}

# Python block key -> why no test runs it, and what runs instead.
PYTHON_NOT_RUN_HERE = {
    'distribute.get_strategy("tpu", tpu="local")':
        "needs a TPU and a gs:// bucket; "
        "tests/journeys/test_pretrain_journey.py runs the same library entry "
        "through the README's command on the CPU",
    'model = AlbertTextClassifier("albert_base_v2"':
        "fine-tunes the 12M-parameter release (a download); "
        "tests/test_text_models.py runs the same calls on a tiny encoder "
        "and tests/test_finetuned_exports.py the export",
    'AlbertMaskedLM("albert_base/")':
        "fine-tunes a released model from its folder; "
        "tests/test_masked_lm.py runs the same calls on a tiny model",
    "keras_hub.models.AlbertBackbone.from_preset":
        "downloads a keras-hub preset from Kaggle; tests/test_encoder.py "
        "converts a keras-hub backbone built in the test",
}

@dataclasses.dataclass(frozen=True)
class Command:
    """One documented command: where it is and its text (one line)."""

    path: str
    line: int
    text: str


def documents(root=REPO):
    """The documentation files, relative to `root`."""
    found = []
    for pattern in DOCUMENTS:
        found += sorted(os.path.relpath(p, root)
                        for p in glob.glob(os.path.join(root, pattern)))
    return found


def _fences(lines):
    """`(language, first line number, body lines)` of each fenced block."""
    block = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if block is None:
            if stripped.startswith("```"):
                block = (stripped[3:].strip().lower(), number + 1, [])
        elif stripped.startswith("```"):
            yield block
            block = None
        else:
            block[2].append(line)


def parse(text, path="<text>"):
    """The commands of the command blocks of one Markdown text.

    Raises:
        ValueError: an unmarked block that holds a `python -m` command (it
            would escape the check).
    """
    commands = []
    for language, start, body in _fences(text.splitlines()):
        if language not in COMMAND_LANGUAGES:
            if not language and any(
                    line.strip().startswith(("python -m", "$ python"))
                    for line in body):
                raise ValueError(f"{path}:{start - 1}: a command in a block "
                                 "with no language; mark it ```bash")
            continue
        pending, first = [], None
        for offset, line in enumerate(body):
            stripped = line.strip()
            if not pending and (not stripped or stripped.startswith("#")):
                continue
            if language == "console":
                stripped = stripped.removeprefix("$ ")
            if first is None:
                first = start + offset
            pending.append(stripped.removesuffix("\\").strip())
            if not stripped.endswith("\\"):
                commands.append(Command(path, first, " ".join(pending)))
                pending, first = [], None
        if pending:
            commands.append(Command(path, first, " ".join(pending)))
    return commands


def code_blocks(text, language="python"):
    """The bodies of the fenced blocks of one Markdown text marked
    `language`, each as one string."""
    return ["\n".join(body) + "\n" for marked, _, body in
            _fences(text.splitlines()) if marked == language]


def code_block(key, language="python", root=REPO):
    """The one `language` block of the documentation that holds `key`, for
    a test that runs the documented code as written.

    Raises:
        LookupError: no block, or several different ones, hold it.
    """
    found = set()
    for path in documents(root):
        text = pathlib.Path(root, path).read_text(encoding="utf-8")
        found.update(b for b in code_blocks(text, language) if key in b)
    if len(found) != 1:
        raise LookupError(f"{key!r} picks out {len(found)} documented "
                          f"{language} blocks, not one")
    return found.pop()


def all_code_blocks(root=REPO, language="python"):
    """`(path, block)` of every `language` block of the documentation."""
    found = []
    for path in documents(root):
        text = pathlib.Path(root, path).read_text(encoding="utf-8")
        found += [(path, block) for block in code_blocks(text, language)]
    return found


def all_commands(root=REPO):
    """Every command of every documentation file."""
    commands = []
    for path in documents(root):
        text = pathlib.Path(root, path).read_text(encoding="utf-8")
        commands += parse(text, path)
    return commands


def matching(key, commands):
    """The distinct command texts that hold `key`."""
    return sorted({c.text for c in commands if key in c.text})


def documented(key, root=REPO):
    """The one documented command text that holds `key`.

    Raises:
        LookupError: no command, or several different ones, hold it.
    """
    texts = matching(key, all_commands(root))
    if len(texts) != 1:
        raise LookupError(f"{key!r} picks out {len(texts)} documented "
                          f"commands, not one: {texts}")
    return texts[0]


def _flag_name(token):
    match = re.match(r"--([A-Za-z0-9_]+)(=|$)", token)
    return match.group(1) if match else None


def adapt(text, env=None, set=None, drop=()):
    """A command with the changes a test makes.

    Args:
        text: the documented command.
        env: `$NAME` -> value, replaced in the text first.
        set: flag name -> value: replaces the flag's value where the
            command has the flag, else adds `--name=value` (True: `--name`).
        drop: flag names to leave out (`--name`, `--name=...`, `--noname`).

    Returns:
        The command line, quoted as a POSIX shell reads it.
    """
    for name, value in (env or {}).items():
        text = re.sub(r"\$%s\b" % name, str(value), text)
    set = dict(set or {})
    argv = []

    def flag(name, value):
        return f"--{name}" if value is True else f"--{name}={value}"

    for token in shlex.split(text):
        name = _flag_name(token)
        bare = name and name.startswith("no") and name[2:] in drop
        if name in drop or bare:
            continue
        if name in set:
            argv.append(flag(name, set.pop(name)))
        else:
            argv.append(token)
    argv += [flag(name, value) for name, value in set.items()]
    return shlex.join(argv)


def keys():
    """Every key of `JOURNEYS`, `ELSEWHERE` and `NOT_RUN_HERE`."""
    return list(JOURNEYS) + list(ELSEWHERE) + list(NOT_RUN_HERE)


def uncovered(commands):
    """The commands that no key picks out: nothing runs them."""
    return [c for c in commands if not any(key in c.text for key in keys())]


def command(key, env=None, set=None, drop=()):
    """The documented command that `key` picks out, adapted (see `adapt`)."""
    return adapt(documented(key), env=env, set=set, drop=drop)
