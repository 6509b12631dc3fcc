"""BUILD's test targets: made from every test module, with the exception
lists following the modules' `slow` markers."""

import ast
import glob
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "BUILD")
LISTS = ("ALL_SLOW", "SOME_SLOW", "SMOKE", "LARGE")


def _build_source():
    with open(BUILD, encoding="utf-8") as f:
        return f.read()


def _build_lists():
    """BUILD's top-level assignments of literal values, by name."""
    values = {}
    for node in ast.parse(_build_source()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass  # Not a literal: TEST_MODULES is a glob.
    return values


def _glob(include, exclude=()):
    """Bazel's `glob` over the repository, as sorted relative paths."""
    def expand(patterns):
        return {os.path.relpath(path, REPO) for pattern in patterns
                for path in glob.glob(os.path.join(REPO, pattern),
                                      recursive=True)
                if os.path.isfile(path)}
    return sorted(expand(include) - expand(exclude))


def _build_targets():
    """The `py_test` targets BUILD declares: name -> their arguments.

    BUILD's Starlark is also Python: it runs here with stand-ins for
    Bazel's functions.
    """
    tests = {}

    def py_test(**kwargs):
        assert kwargs["name"] not in tests, kwargs["name"]
        tests[kwargs["name"]] = kwargs

    def ignore(*args, **kwargs):
        del args, kwargs

    env = {"glob": _glob, "py_test": py_test, "py_library": ignore,
           "package": ignore, "exports_files": ignore}
    exec(compile(_build_source(), BUILD, "exec"), env)  # noqa: S102
    return env["TEST_MODULES"], tests


def _is_slow_mark(node):
    """Whether `node` is `pytest.mark.slow`."""
    return (isinstance(node, ast.Attribute) and node.attr == "slow"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark")


def _slow_tests(path):
    """'all', 'some' or 'none': which of a module's tests are marked slow."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    module_mark = any(
        isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
        and any(_is_slow_mark(n) for n in ast.walk(node.value))
        for node in tree.body)
    tests = [node for node in tree.body if isinstance(node, ast.FunctionDef)
             and node.name.startswith("test")]
    every_test = bool(tests) and all(
        any(_is_slow_mark(d) for d in test.decorator_list) for test in tests)
    if module_mark or every_test:
        return "all"
    if any(_is_slow_mark(node) for node in ast.walk(tree)):
        return "some"
    return "none"


@pytest.fixture(scope="module")
def build():
    modules, targets = _build_targets()
    lists = _build_lists()
    return modules, targets, lists


def test_every_test_module_has_a_target(build):
    modules, targets, _ = build
    on_disk = sorted(os.path.relpath(path, REPO) for path in glob.glob(
        os.path.join(REPO, "tests", "**", "test_*.py"), recursive=True))
    assert modules == on_disk
    run = sorted(target["args"][-1] for target in targets.values()
                 if "-m" not in target["args"] or target["args"][1] != "slow")
    assert run == on_disk


def test_listed_modules_exist(build):
    modules, _, lists = build
    listed = [(name, path) for name in LISTS for path in lists[name]]
    listed += [("DATA", path) for path in lists["DATA"]]
    assert [entry for entry in listed if entry[1] not in modules] == []
    for name in LISTS:
        assert len(set(lists[name])) == len(lists[name]), name
    # DATA's files themselves: `bazel build` fails on a missing one.


def test_slow_lists_follow_the_markers(build):
    modules, _, lists = build
    found = {path: _slow_tests(path) for path in modules}
    for name, slow in (("ALL_SLOW", "all"), ("SOME_SLOW", "some")):
        want = {path for path, marked in found.items() if marked == slow}
        listed = set(lists[name])
        assert not want - listed, "add to %s: %s" % (name, sorted(want - listed))
        assert not listed - want, "remove from %s: %s" % (
            name, sorted(listed - want))
    smoke_slow = [path for path in lists["SMOKE"] if found[path] == "all"]
    assert smoke_slow == [], "a smoke target must run fast tests"


def test_targets_run_their_tests_by_marker(build):
    _, targets, lists = build
    for name, target in targets.items():
        module = target["args"][-1]
        assert target["srcs"] == [module, "tests/pytest_main.py"], name
        slow_run = target["args"][:2] == ["-m", "slow"]
        assert name.endswith("_slow") == slow_run, name
        assert ("slow" in target["tags"]) == (
            slow_run or module in lists["ALL_SLOW"]), name
        assert ("smoke" in target["tags"]) == (
            module in lists["SMOKE"] and not slow_run), name
        if module in lists["SOME_SLOW"] and not slow_run:
            assert target["args"] == ["-m", "not slow", module], name
    slow_targets = sorted(t["args"][-1] for t in targets.values()
                          if t["args"][:2] == ["-m", "slow"])
    assert slow_targets == sorted(lists["SOME_SLOW"])


@pytest.mark.parametrize("source, expected", [
    ("import pytest\npytestmark = pytest.mark.slow\ndef test_a(): pass\n",
     "all"),
    ("import pytest\n@pytest.mark.slow\ndef test_a(): pass\n"
     "@pytest.mark.slow\ndef test_b(): pass\n", "all"),
    ("import pytest\n@pytest.mark.slow\ndef test_a(): pass\n"
     "def test_b(): pass\n", "some"),
    ("import pytest\n@pytest.mark.parametrize('x', [1, pytest.param(\n"
     "    2, marks=pytest.mark.slow)])\ndef test_a(x): pass\n", "some"),
    ("import pytest\ndef test_a(): pass\n", "none"),
])
def test_slow_scan_reads_each_way_of_marking(tmp_path, source, expected):
    path = tmp_path / "test_m.py"
    path.write_text(source)
    assert _slow_tests(str(path)) == expected
