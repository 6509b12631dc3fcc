"""The test suite's grouping over xdist workers (tests/conftest.py)."""

import os
import re
import subprocess
import sys

from tests import conftest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_group_of_reads_the_module_file_name():
    assert conftest.group_of(
        "tests/test_pretrained_export.py::test_fill_mask_matches_keras_pretrainer") \
        == "exports"
    assert conftest.group_of(
        "tests/journeys/test_convert_journey.py::test_x[a]") == "journeys"
    alone = "tests/test_config.py::test_presets"
    assert conftest.group_of(alone) == alone
    for names in conftest.XDIST_GROUPS.values():
        for name in names:
            found = [root for root, _, files in os.walk(
                os.path.join(REPO, "tests")) if name in files]
            assert found, name


_CONFTEST = """
import importlib.util
spec = importlib.util.spec_from_file_location("suite", {path!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
suite._GROUP_OF.update({{"test_g1.py": "g", "test_g2.py": "g"}})
pytest_xdist_make_scheduler = suite.pytest_xdist_make_scheduler
"""

_TEST = """
import time
def test_a():
    time.sleep(0.2)
def test_b():
    time.sleep(0.2)
"""


def test_a_group_runs_on_one_of_two_workers(tmp_path):
    (tmp_path / "conftest.py").write_text(_CONFTEST.format(
        path=os.path.join(REPO, "tests", "conftest.py")))
    for name in ("test_g1.py", "test_g2.py", "test_x1.py", "test_x2.py"):
        (tmp_path / name).write_text(_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-v", "-c", os.devnull,
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
        env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = dict(
        (nodeid, worker) for worker, nodeid in re.findall(
            r"\[(gw\d)\] +\[ *\d+%\] PASSED (\S+)", done.stdout))
    assert len(workers) == 8, done.stdout[-3000:]
    grouped = {w for n, w in workers.items() if n.startswith("test_g")}
    assert len(grouped) == 1, workers
