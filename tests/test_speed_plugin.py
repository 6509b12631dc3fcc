"""The test suite's grouping over xdist workers and its XLA flags
(tests/speed_plugin.py)."""

import ast
import glob
import os
import re
import subprocess
import sys

from tests import speed_plugin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Session fixtures worth making once -> the group their readers share.
SHARED_RUNS = {
    "exported_albert": "exports",
    "loaded_serving_model": "exports",
    "reduced_precision_exports": "exports",
    "exported_tasks": "exports",
    "short_pretraining_run": "short_pretraining_run",
    "builtin_quickstart": "builtin_quickstart",
}


def test_group_of_reads_the_module_file_name():
    assert speed_plugin.group_of(
        "tests/test_pretrained_export.py::test_fill_mask_matches_keras_pretrainer") \
        == "exports"
    assert speed_plugin.group_of(
        "tests/journeys/test_convert_journey.py::test_x[a]") == "journeys"
    alone = "tests/test_config.py::test_presets"
    assert speed_plugin.group_of(alone) == alone
    for names in speed_plugin.XDIST_GROUPS.values():
        for name in names:
            found = [root for root, _, files in os.walk(
                os.path.join(REPO, "tests")) if name in files]
            assert found, name


def _fixtures_read(path):
    """The names a test module's functions take as arguments or name in
    `usefixtures`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names.update(a.arg for a in node.args.args)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def test_every_reader_of_a_shared_run_is_in_its_group():
    modules = glob.glob(os.path.join(REPO, "tests", "**", "test_*.py"),
                        recursive=True)
    readers = {}
    for path in modules:
        if os.path.samefile(path, __file__):
            continue
        for fixture in _fixtures_read(path) & set(SHARED_RUNS):
            readers.setdefault(fixture, set()).add(os.path.basename(path))
    assert set(readers) == set(SHARED_RUNS), readers
    for fixture, names in readers.items():
        group = SHARED_RUNS[fixture]
        assert names <= set(speed_plugin.XDIST_GROUPS[group]), (
            fixture, names - set(speed_plugin.XDIST_GROUPS[group]))


def test_user_environment_restores_the_users_xla_flags(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", speed_plugin.FAST_COMPILE_XLA_FLAGS)
    monkeypatch.setenv(speed_plugin.USER_XLA_FLAGS, "")
    assert "XLA_FLAGS" not in speed_plugin.user_environment()
    monkeypatch.setenv(speed_plugin.USER_XLA_FLAGS, "--xla_dump_to=/tmp/x")
    assert speed_plugin.user_environment()["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"


_CONFTEST = """
import importlib.util
spec = importlib.util.spec_from_file_location("speed", {path!r})
speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speed)
speed._GROUP_OF.update({{"test_g1.py": "g", "test_g2.py": "g"}})
pytest_xdist_make_scheduler = speed.pytest_xdist_make_scheduler
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
        path=os.path.join(REPO, "tests", "speed_plugin.py")))
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
