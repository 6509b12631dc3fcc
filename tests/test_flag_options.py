"""Options dataclasses and the flags they define (`foundation.flag_options`)."""

import dataclasses
import importlib
import re
import subprocess
import sys

import pytest
from absl import app
from absl import flags

from albert_tf.tasks.options import ClassifierOptions
from albert_tf.tasks.options import FinetuneOptions
from albert_tf.tasks.options import RaceOptions
from albert_tf.tasks.options import SquadOptions
from albert_tf.training.options import PretrainingOptions
from foundation import flag_options as options_lib
from foundation.flag_options import option

# Every program of the project (their flags are defined only when run).
PROGRAMS = ("albert_tf.run_pretraining", "albert_apps.run_classifier",
            "albert_apps.run_squad", "albert_apps.run_race",
            "albert_tf.convert_checkpoint", "albert_apps.quickstart",
            "data_prep.build_vocab", "data_prep.create_pretraining_data",
            "export.export_saved_model")


@dataclasses.dataclass
class _Options:
    name: str = option(None, "A name.", required=True)
    count: int = option(3, "A count.")
    rate: float = option(0.5, "A rate.")
    flag: bool = option(False, "A switch.")
    mode: str = option("a", "A mode.", choices=("a", "b"))
    not_a_flag: object = None


def _flags(cls=_Options):
    fv = flags.FlagValues()
    options_lib.define_flags(cls, fv, module_name="prog")
    return fv


def test_fields_become_flags_with_their_defaults_and_types():
    fv = _flags()
    fv(["prog", "--name=x", "--count=7", "--flag", "--mode=b"])
    parsed = options_lib.from_flags(_Options, fv, not_a_flag="obj")
    assert parsed == _Options(name="x", count=7, rate=0.5, flag=True,
                              mode="b", not_a_flag="obj")
    assert "not_a_flag" not in fv


def test_required_and_choices_are_enforced():
    with pytest.raises(flags.IllegalFlagValueError):
        _flags()(["prog", "--name=x", "--mode=c"])
    fv = _flags()
    with pytest.raises(flags.IllegalFlagValueError, match="name"):
        fv(["prog"])


def test_unsupported_field_type_is_refused():
    @dataclasses.dataclass
    class Bad:
        items: list = option(None, "A list.")

    with pytest.raises(TypeError, match="items"):
        _flags(Bad)


def test_positional_arguments_are_refused():
    options_lib.check_no_arguments(["prog"])
    with pytest.raises(app.UsageError, match="Unexpected arguments"):
        options_lib.check_no_arguments(["prog", "extra"])


def test_jobs_share_the_common_flags_with_their_own_defaults():
    """One definition of the shared options; each job keeps the official
    names and defaults."""
    pre, cls = PretrainingOptions(), ClassifierOptions()
    squad, race = SquadOptions(), RaceOptions()
    assert (pre.train_batch_size, pre.learning_rate, pre.optimizer) == (
        4096, 0.00176, "lamb")
    assert (cls.train_batch_size, cls.learning_rate, cls.optimizer) == (
        32, 1e-5, "adamw")
    assert (cls.max_seq_length, squad.max_seq_length,
            race.max_seq_length) == (128, 384, 512)
    assert (pre.num_steps, pre.num_warmup) == (125000, 3125)
    assert (cls.num_steps, cls.num_warmup) == (1000, 200)
    common = {f.name for f, _ in options_lib.flag_fields(
        FinetuneOptions)}
    for cls_ in (ClassifierOptions, SquadOptions,
                 RaceOptions):
        assert common <= {f.name for f, _ in options_lib.flag_fields(cls_)}
    assert "export_dir" not in {f.name for f, _ in
                                options_lib.flag_fields(RaceOptions)}


def test_every_program_imports_in_one_process_defining_no_flags():
    before = set(flags.FLAGS)
    for name in PROGRAMS:
        importlib.import_module(name)
    assert set(flags.FLAGS) == before


@pytest.mark.parametrize("module,flag", [
    ("albert_apps.run_classifier", "task_name"),
    ("albert_apps.run_squad", "version_2_with_negative"),
    ("albert_apps.run_race", "max_qa_length"),
    ("albert_tf.run_pretraining", "max_predictions_per_seq"),
])
def test_each_job_lists_its_own_and_the_common_flags(module, flag):
    done = subprocess.run([sys.executable, "-m", module, "--help"],
                          capture_output=True, text=True, timeout=300)
    for name in (flag, "output_dir", "do_train", "jit_compile", "seed"):
        assert re.search(r"^  --(\[no\])?%s:" % name, done.stdout, re.M), name


def _imported_modules(importtime_log):
    """Module names from `python -X importtime` output."""
    return [line.rsplit("|", 1)[-1].strip()
            for line in importtime_log.splitlines()
            if line.startswith("import time:") and "|" in line]


@pytest.mark.parametrize("module", PROGRAMS)
def test_help_answers_without_importing_tensorflow(module):
    """`--help` lists the flags from the options dataclass alone: no
    TensorFlow (or Keras) is imported, so it answers at once and prints no
    CUDA start-up lines."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", module,
                           "--help"], capture_output=True, text=True,
                          timeout=120)
    assert re.search(r"^  --", done.stdout, re.M), done.stdout[-2000:]
    heavy = [name for name in _imported_modules(done.stderr)
             if name.split(".")[0] in ("tensorflow", "keras", "tf_keras")]
    assert heavy == [], heavy[:5]


def test_the_flag_choices_are_the_library_values():
    """The TensorFlow-free options modules spell out values the library
    defines again beside its TensorFlow code."""
    from albert_tf.layers import preprocessing
    from albert_tf.training import distribute
    from albert_tf.training import lamb
    from albert_tf.training import options as training_options
    from export import options as export_options

    assert export_options.SERVING_SHAPES == preprocessing.SERVING_SHAPES
    assert distribute.STRATEGIES is training_options.STRATEGIES
    assert lamb.OPTIMIZERS is training_options.OPTIMIZERS


@pytest.mark.parametrize("argv, code, line", [
    (["--rate=nan"], 1, "prog: error: --rate must be a finite number > 0. "
                        "Received: nan"),
    (["--rat=1"], 1, "prog: error: Unknown command line flag 'rat'"),
    (["--count=x"], 1, "prog: error: flag --count=x: invalid literal"),
    (["--interrupt"], 130, "prog: interrupted (Ctrl-C)"),
    (["--stop"], 143, "prog: stopped by SIGTERM at step 7"),
])
def test_a_program_ends_with_one_line(tmp_path, argv, code, line):
    """Ranges are checked before the work; a mistyped flag, a bad value and
    Ctrl-C are one line each, never a traceback."""
    script = tmp_path / "prog.py"
    script.write_text(
        "import dataclasses\n"
        "from foundation import flag_options as options_lib\n"
        "from foundation.flag_options import option\n"
        "@dataclasses.dataclass\n"
        "class Options:\n"
        "    rate: float = option(0.5, 'A rate.', above=0)\n"
        "    count: int = option(3, 'A count.')\n"
        "    interrupt: bool = option(False, 'Ctrl-C in the work.')\n"
        "    stop: bool = option(False, 'SIGTERM in training.')\n"
        "def main(options):\n"
        "    if options.interrupt:\n"
        "        raise KeyboardInterrupt\n"
        "    if options.stop:\n"
        "        from albert_tf.training.errors import TrainingStopped\n"
        "        raise TrainingStopped('SIGTERM', 15, 7, 'runs/x/ckpt-7')\n"
        "    print('worked')\n"
        "options_lib.run_program(Options, main, tensorflow=False)\n")
    done = subprocess.run([sys.executable, str(script), *argv],
                          capture_output=True, text=True, timeout=60,
                          env=_environment())
    assert done.returncode == code
    assert "worked" not in done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(line), done.stderr


def _environment():
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return dict(os.environ, PYTHONPATH=root)
