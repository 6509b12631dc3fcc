"""Every project module says what it is in one short docstring.

A module's docstring is a paragraph and a link to the guide section where
the rest lives (STYLE.md), so it stays at most `MAX_LINES` lines; a longer
one moves its facts into the guide. An empty file (a package marker) needs
none.
"""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("foundation", "data_prep", "albert_tf", "export", "albert_apps",
            "benchmarks", "tools")
MAX_LINES = 30


def project_modules(root=REPO):
    """The repository-relative paths of every `.py` file under `PACKAGES`."""
    paths = []
    for package in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            paths += [os.path.relpath(os.path.join(folder, name), root)
                      for name in sorted(files) if name.endswith(".py")]
    return paths


def docstring_problem(source):
    """Why `source`'s module docstring breaks the rule, or None."""
    if not source.strip():
        return None
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    if docstring is None:
        return "no module docstring"
    lines = len(docstring.splitlines())
    if lines > MAX_LINES:
        return (f"a module docstring of {lines} lines (at most {MAX_LINES}: "
                "one paragraph and a link to the guide)")
    return None


def test_the_packages_have_modules():
    assert len(project_modules()) > 100


@pytest.mark.parametrize("path", project_modules())
def test_module_docstring_is_short(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        problem = docstring_problem(f.read())
    assert problem is None, f"{path}: {problem}"


def test_the_check_counts_the_docstrings_lines():
    body = "\n".join(f"line {n}" for n in range(MAX_LINES - 1))
    assert docstring_problem(f'"""Summary.\n{body}\n"""\n') is None
    long_body = body + "\nline 30"
    assert "of 31 lines" in docstring_problem(
        f'"""Summary.\n{long_body}\n"""\nimport os\n')


def test_the_check_wants_a_docstring_but_not_in_an_empty_file():
    assert docstring_problem("import os\n") == "no module docstring"
    assert docstring_problem("") is None
