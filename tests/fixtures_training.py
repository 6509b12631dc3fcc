"""Training runs made once per session and read by several test modules
(a pytest plugin that tests/conftest.py loads).

- `short_pretraining_run`: tests/test_trainer.py, test_memory.py,
  test_progress.py and test_xla_autotune.py.
- `builtin_quickstart` (slow tests only): tests/test_finetune_transfer.py and
  test_pretraining_real_text.py.

Each group of readers runs on one xdist worker (`XDIST_GROUPS` in
tests/speed_plugin.py), so each run is made once.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import time
import types

import pytest

from tests import speed_plugin

# The job's defaults (docstrings corpus, vocabulary, records, model, probes
# and fine-tuning), with pretraining fixed at the number of steps its time
# budget reaches on 2 cores, so what the tests check does not depend on the
# machine's speed; train_seconds only guards against a hung machine (the
# test fails rather than compare a model trained for fewer steps).
BUILTIN_QUICKSTART = ("--num_train_steps=1200", "--train_seconds=1800")


@pytest.fixture(scope="session")
def builtin_quickstart(tmp_path_factory):
    """The report (`report.json`) of one run of the main job as the README
    runs it, `python -m albert_apps.quickstart`, on the built-in corpus with
    `BUILTIN_QUICKSTART`, shared by the tests of what it learned."""
    output_dir = str(tmp_path_factory.mktemp("builtin_quickstart"))
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "albert_apps.quickstart",
         "--output_dir=" + output_dir, *BUILTIN_QUICKSTART],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        env=speed_plugin.user_environment(), capture_output=True, text=True,
        timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    print("main job on the built-in corpus: %.0f s" % (time.time() - start))
    with open(os.path.join(output_dir, "report.json")) as f:
        return json.load(f)


@pytest.fixture(scope="session")
def short_pretraining_run(tmp_path_factory):
    """A finished 4-step pretraining run on 40 random records, as the
    driver's library entry `run_pretraining` makes it (checkpoints 2 and 4,
    `jit_compile` left to "auto", not on a terminal), made once.

    Returns:
        A `types.SimpleNamespace` with `data` (the records), `out` (the
        output folder: tests that write there copy it first), `report`
        (what `run_pretraining` returned), `lines` (the absl info lines
        it logged) and `stderr` (what it wrote to `sys.stderr`).
    """
    # Imported here: TensorFlow must load after speed_plugin sets XLA_FLAGS.
    from absl import logging

    from albert_tf.training import pretraining
    from foundation import progress
    from tests import fixtures_pretraining

    root = tmp_path_factory.mktemp("short_run")
    data = fixtures_pretraining.write_records(str(root / "data.tfrecord"), 40)
    out = str(root / "out")
    lines = []
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(
            io.StringIO()) as stderr:
        patch.setattr(logging, "info", lambda msg, *args: lines.append(
            msg % args if args else msg))
        patch.setattr(progress, "interactive", lambda stream=None: False)
        report = pretraining.run_pretraining(fixtures_pretraining.options(
            data, out, num_train_steps=4, keep_checkpoint_max=2,
            jit_compile=None))
    return types.SimpleNamespace(data=data, out=out, report=report,
                                 lines=lines, stderr=stderr.getvalue())
