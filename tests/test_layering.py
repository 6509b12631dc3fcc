"""The packages import in one direction, and `import albert_tf` is cheap.

    foundation -> data_prep -> albert_tf.config -> layers -> models
      -> training -> convert
      -> tasks -> the library's programs (albert_tf.cli and the
      `albert_tf.run_*` entry names) -> export -> tools -> the programs
      above export (albert_apps: the quickstart, the three official
      fine-tuning programs) -> benchmarks

A module may import from its own package and from the packages before it,
never from one after it: every import statement counts, also one inside a
function. Nothing under `albert_tf/` imports `export/` (a program that
exports lives in `albert_apps/`). No two modules import each other, directly
or through others, also inside one package.
"""

import ast
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Package (longest matching prefix wins) -> rank.
RANKS = {
    "foundation": -1,
    "data_prep": 0,
    "albert_tf.config": 1,
    "albert_tf.cross_layer_sharing": 1,
    "albert_tf.layers": 2,
    "albert_tf.models": 3,
    "albert_tf.training": 4,
    "albert_tf.convert": 5,
    "albert_tf.tasks": 6,
    "albert_tf": 6,  # the package itself: lazy names of the layers below
    # The library's programs: below export, which they never import.
    "albert_tf.cli": 6.5,
    "albert_tf.run_pretraining": 6.5,
    "albert_tf.convert_checkpoint": 6.5,
    "export": 7,
    "tools": 8,
    "albert_apps": 9,
    "benchmarks": 10,
}


def _rank(module):
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RANKS:
            return prefix, RANKS[prefix]
    return None, None


def _modules():
    for top in ("foundation", "data_prep", "albert_tf", "export", "tools",
                "albert_apps", "benchmarks"):
        for folder, _, files in os.walk(os.path.join(REPO, top)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    module = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
                    yield module.removesuffix(".__init__"), path


def _imports_of(tree):
    """`(line, imported)` of every import statement in `tree`, also one
    inside a function; a relative `from . import name` as `.name`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (f"{node.module}." if node.module else "")
            for alias in node.names:
                # `from albert_tf.training import trainer` imports a module.
                yield node.lineno, prefix + alias.name


def _imports(path):
    """`_imports_of` the module at `path`, its absolute imports only."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    return [(line, imported) for line, imported in _imports_of(tree)
            if not imported.startswith(".")]


def back_imports():
    """`(module, line, imported)` for every import against the direction."""
    found = []
    for module, path in _modules():
        package, rank = _rank(module)
        for line, imported in _imports(path):
            target, target_rank = _rank(imported)
            if target_rank is None or target == package:
                continue
            if target_rank > rank:
                found.append((module, line, imported))
    return found


def import_graph():
    """`{module: {project modules it imports}}` over every module.

    `from pkg import name` imports `pkg.name` when that is a module, else
    `pkg`; `import a.b.c` imports the longest of `a.b.c`, `a.b`, `a` that is
    a module. Modules outside the project are left out.
    """
    paths = dict(_modules())
    graph = {}
    for module, path in paths.items():
        targets = set()
        for _, imported in _imports(path):
            parts = imported.split(".")
            for n in range(len(parts), 0, -1):
                target = ".".join(parts[:n])
                if target in paths:
                    if target != module:
                        targets.add(target)
                    break
        graph[module] = targets
    return graph


def import_cycles():
    """The sorted modules of each import cycle (each strongly connected
    component of `import_graph` with more than one module), sorted."""
    graph = import_graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):  # Tarjan's algorithm.
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_module_imports_against_the_direction():
    assert back_imports() == []


def test_nothing_under_albert_tf_imports_export():
    """The one arrow that used to run back up: every module of the library
    package, its programs included, stays below `export/`."""
    found = [(module, line, imported) for module, path in _modules()
             if module == "albert_tf" or module.startswith("albert_tf.")
             for line, imported in _imports(path)
             if imported == "export" or imported.startswith("export.")]
    assert found == []


def test_a_program_importing_export_is_reported(tmp_path, monkeypatch):
    """Also from the library's own programs (no exception for them)."""
    bad = tmp_path / "albert_tf" / "cli"
    bad.mkdir(parents=True)
    (bad / "run_bad.py").write_text(
        "def run():\n    from export import finetuned_exports\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", str(tmp_path))
    assert back_imports() == [("albert_tf.cli.run_bad", 2, "export.finetuned_exports")]


def test_the_check_catches_a_back_import(tmp_path, monkeypatch):
    """A layer importing the training code is reported."""
    bad = tmp_path / "albert_tf" / "layers"
    bad.mkdir(parents=True)
    (bad / "bad.py").write_text(
        "def f():\n    from albert_tf.training import trainer\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", str(tmp_path))
    assert back_imports() == [("albert_tf.layers.bad", 2,
                               "albert_tf.training.trainer")]


def aliases_not_named_for_their_module():
    """`(module, line, "name as alias")` for every project module imported
    under another name than its own or `<name>_lib` (the one form where its
    own name clashes with another)."""
    found = []
    for module, path in _modules():
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module
                    and not node.level and _rank(node.module)[0]):
                continue
            for alias in node.names:
                if alias.asname not in (None, alias.name, alias.name + "_lib"):
                    found.append((module, node.lineno,
                                  f"{alias.name} as {alias.asname}"))
    return found


def test_project_modules_are_imported_under_their_own_names():
    assert aliases_not_named_for_their_module() == []


def test_the_alias_check_catches_another_name(tmp_path, monkeypatch):
    (tmp_path / "data_prep").mkdir()
    (tmp_path / "data_prep" / "x.py").write_text(
        "from foundation import flag_options as options_lib\n"
        "from foundation import safe_io as safe_io_lib\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", str(tmp_path))
    assert aliases_not_named_for_their_module() == [
        ("data_prep.x", 1, "flag_options as options_lib")]


# Library modules tested in a test module of another name: module -> the
# test module that covers it. Every other library module has its own
# `tests/test_<name>.py` (in `tests/` or a folder under it).
TESTED_ELSEWHERE = {
    "albert_apps.quickstart.data": "tests/test_quickstart.py",
    "albert_apps.quickstart.defaults": "tests/test_quickstart.py",
    "albert_apps.quickstart.inputs": "tests/hostile/test_main_job.py",
    "albert_apps.quickstart.job": "tests/test_quickstart.py",
    "albert_apps.quickstart.queries": "tests/test_quickstart.py",
    "albert_apps.quickstart.stage_results": "tests/test_resume.py",
    "albert_apps.quickstart.stages": "tests/test_quickstart.py",
    "albert_apps.quickstart.stages_downstream": "tests/test_resume.py",
    "albert_apps.run_classifier": "tests/test_run_finetune.py",
    "albert_apps.run_squad": "tests/test_run_finetune.py",
    "albert_tf.cli": "tests/test_run_pretraining.py",
    "albert_tf.convert.options": "tests/test_convert_checkpoint.py",
    "albert_tf.convert.weight_set": "tests/test_pretrained.py",
    "albert_tf.layers.task_heads": "tests/test_task_models.py",
    "albert_tf.models.config_mixin": "tests/test_encoder.py",
    "albert_tf.models.serving_dtypes": "tests/test_pretrained_export.py",
    "albert_apps.run_race": "tests/test_run_finetune.py",
    "albert_tf.tasks.finetuning_jobs": "tests/test_run_finetune.py",
    "albert_tf.tasks.options": "tests/test_run_finetune.py",
    "albert_tf.training.baselines": "tests/test_training_progress.py",
    "albert_tf.training.evaluation": "tests/test_trainer.py",
    "albert_tf.training.options": "tests/test_run_pretraining.py",
    "albert_tf.training.results": "tests/test_resume.py",
    "albert_tf.training.train_loop": "tests/test_trainer.py",
    "albert_tf.training.trainer_task": "tests/test_trainer.py",
    "data_prep.static_masking": "tests/test_ngram_masking.py",
    "export.export_saved_model": "tests/test_pretrained_export.py",
    "export.options": "tests/test_pretrained_export.py",
    "export.signatures": "tests/test_pretrained_export.py",
}


def _test_modules():
    found = {}
    for folder, _, files in os.walk(os.path.join(REPO, "tests")):
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                found.setdefault(name, os.path.relpath(
                    os.path.join(folder, name), REPO))
    return found


def test_every_library_module_has_a_test_module():
    tests = _test_modules()
    missing, stale = [], []
    for module, path in _modules():
        name = module.rsplit(".", 1)[-1]
        if (module.startswith("benchmarks")
                or os.path.basename(path) in ("__init__.py", "__main__.py")):
            continue
        own = tests.get(f"test_{name}.py")
        elsewhere = TESTED_ELSEWHERE.get(module)
        if own and elsewhere:
            stale.append(module)
        elif not own and not (elsewhere and os.path.exists(
                os.path.join(REPO, elsewhere))):
            missing.append(module)
    assert not missing, f"add tests/test_<name>.py for: {missing}"
    assert not stale, f"has its own test module now, drop from " \
        f"TESTED_ELSEWHERE: {stale}"


def _imports_with_scripts(path):
    """`(line, imported)` of `_imports_of`, over the file and over the code
    in its strings: the scripts its tests run in a new process."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    yield from _imports_of(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and "import" in node.value):
            try:
                script = ast.parse(textwrap.dedent(node.value))
            except SyntaxError:
                continue  # Text, not code.
            for line, imported in _imports_of(script):
                yield node.lineno + line - 1, imported


def imports_of_test_modules():
    """`(file, line, imported)` for every import of a test module (a
    `test_*` module of the `tests` package) by a file under tests/, also in
    a script it runs; a test module running its own helpers in a new
    process is not counted. What test modules share lives in
    `tests/fixtures_*.py`, conftest.py and helper modules such as
    tests/hostile/common.py: only pytest imports a test module."""
    found = []
    for folder, _, files in os.walk(os.path.join(REPO, "tests")):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            own = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
            for line, imported in _imports_with_scripts(path):
                parts = imported.split(".")
                if (parts[0] in ("tests", "") and imported != own
                        and not imported.startswith(own + ".")
                        and any(p.startswith("test_") for p in parts)):
                    found.append((os.path.relpath(path, REPO), line, imported))
    return sorted(found)


def test_test_modules_import_no_other_test_module():
    assert imports_of_test_modules() == []


def test_the_test_import_check_catches_each_form(tmp_path, monkeypatch):
    """A fixtures module importing a test module, a test module importing
    another at the top, inside a function, relatively and in a script;
    not a test module's script importing its own module, nor another
    package's `test_*` module."""
    # "{t}" is filled in at run time: written out, the sources below would
    # be scripts importing test modules to this check.
    tests = tmp_path / "tests"
    (tests / "hostile").mkdir(parents=True)
    (tests / "fixtures_x.py").write_text("from tests import {t}_a\n".format(
        t="test"))
    (tests / "test_a.py").write_text(
        "from tests import fixtures_x\n"
        "from tests.hostile import common\n"
        "SCRIPT = '''\n"
        "    from tests.{t}_a import helper\n"
        "    from tests.{t}_b import other\n"
        "'''\n".format(t="test"))
    (tests / "hostile" / "test_c.py").write_text(
        "import tests.{t}_b\n"
        "def f():\n"
        "    from tests.{t}_a import helper\n"
        "    from . import {t}_d\n"
        "    from tensorflow.python.framework import {t}_util\n".format(
            t="test"))
    monkeypatch.setattr(sys.modules[__name__], "REPO", str(tmp_path))
    assert imports_of_test_modules() == [
        ("tests/fixtures_x.py", 1, "tests.test_a"),
        ("tests/hostile/test_c.py", 1, "tests.test_b"),
        ("tests/hostile/test_c.py", 3, "tests.test_a.helper"),
        ("tests/hostile/test_c.py", 4, ".test_d"),
        ("tests/test_a.py", 5, "tests.test_b.other"),
    ]


def test_no_import_cycles():
    assert import_cycles() == []


def test_the_check_catches_a_cycle_inside_a_package(tmp_path, monkeypatch):
    """Two modules of one package importing each other, one of them inside
    a function and by a name it defines."""
    package = tmp_path / "albert_tf" / "training"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from albert_tf.training import b\n")
    (package / "b.py").write_text(
        "def f():\n    from albert_tf.training.a import NAME\n")
    (package / "c.py").write_text("from albert_tf.training import a\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", str(tmp_path))
    assert import_cycles() == [["albert_tf.training.a",
                                "albert_tf.training.b"]]


def _fresh_lines(code):
    """The lines `code` prints in a new interpreter."""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


# Each public name, and a package it must not load. One fresh process takes
# them in this order, each needing more than the one before, and prints the
# modules loaded so far after each.
_NEEDS = [
    ("AlbertConfig", "tensorflow"),
    ("AlbertEncoder", "albert_tf.convert"),
    ("AlbertPretrainer", "albert_tf.training"),
]

# Then the same process resolves every public name, and imports every
# library module: none may define an absl flag at import (tests import
# library modules next to each other and next to programs: only programs
# define flags).
_EVERY_NAME_AND_MODULE = """
import importlib, pkgutil
for n in albert_tf.__all__:
    getattr(albert_tf, n)
print("names", " ".join(albert_tf.__all__))
from absl import flags
for package in ("albert_tf", "foundation", "data_prep", "export"):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        spec = importlib.util.find_spec(info.name)
        source = open(spec.origin, encoding="utf-8").read()
        if "app.run(" in source:
            continue  # a program that defines flags at import
        importlib.import_module(info.name)
        print("module", info.name)
print("flags", " ".join(m for m in flags.FLAGS.flags_by_module_dict()
                        if any(p in m for p in ("albert_tf", "foundation",
                                                "data_prep", "export"))))
"""


@pytest.fixture(scope="module")
def fresh_process():
    """What one new interpreter printed, from a bare `import albert_tf`:
    {"loaded": {public name in `_NEEDS`: the modules loaded once it (and
    the names before it) had been resolved}, "names": [...], "module":
    [...], "flags": [...]} (`_EVERY_NAME_AND_MODULE`)."""
    lines = _fresh_lines("import sys, albert_tf\n" + "".join(
        f"albert_tf.{name}\nprint('loaded', ' '.join(sys.modules))\n"
        for name, _ in _NEEDS) + _EVERY_NAME_AND_MODULE)
    loaded = []
    printed = {"names": [], "module": [], "flags": []}
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "loaded":
            loaded.append(rest.split())
        else:
            printed[key] += rest.split()
    assert len(loaded) == len(_NEEDS)
    printed["loaded"] = {name: modules
                         for (name, _), modules in zip(_NEEDS, loaded)}
    return printed


@pytest.mark.parametrize("name,absent", _NEEDS)
def test_importing_a_public_name_loads_only_what_it_needs(
        fresh_process, name, absent):
    loaded = fresh_process["loaded"][name]
    assert not [m for m in loaded if m == absent or m.startswith(absent + ".")]


def test_every_public_name_resolves(fresh_process):
    assert {"AlbertConfig", "AlbertEncoder", "load_pretrained"} <= set(
        fresh_process["names"])


def test_library_modules_define_no_flags(fresh_process):
    # Programs were skipped, library modules imported: many of them.
    assert "albert_tf.training.trainer" in fresh_process["module"]
    assert "export.pretrained_export" in fresh_process["module"]
    assert fresh_process["flags"] == []
