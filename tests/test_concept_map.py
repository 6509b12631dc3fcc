"""albert_tf/README.md: every file it names exists, each idea of the paper
in its table points at one file and a place in the paper, and every module,
function, class and test the fine-tuning and tokenizer tables name exists."""

import ast
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(REPO, "albert_tf")
_LINK = re.compile(r"\]\(([^)#\s]+)\)")


def _readme():
    with open(os.path.join(FOLDER, "README.md"), encoding="utf-8") as f:
        return f.read()


def _table_rows(text):
    """`(idea, file cell, paper cell)` of each row of the concept table."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and _LINK.search(cells[1]):
            rows.append(tuple(cells))
    return rows


def test_every_linked_path_exists():
    links = _LINK.findall(_readme())
    assert len(links) > 20
    missing = [link for link in links
               if not os.path.exists(os.path.join(FOLDER, link))]
    assert missing == []


def test_each_idea_has_one_file_and_a_place_in_the_paper():
    rows = _table_rows(_readme())
    ideas = " ".join(idea for idea, _, _ in rows).lower()
    for concept in ("factorized embedding", "cross-layer", "shared-attention",
                    "shared-ffn", "not-shared", "sop", "n-gram", "lamb",
                    "schedule", "encoder", "pretrainer", "masked-lm head"):
        assert concept in ideas, concept
    for idea, file_cell, paper in rows:
        (path,) = _LINK.findall(file_cell)
        assert path.endswith(".py"), idea
        assert "§" in paper or "official code" in paper, idea


# A project name in backticks: `albert_tf.tasks.glue_reader.read_examples`,
# or the module of `python -m albert_apps.run_race`.
_PACKAGES = ("albert_tf", "albert_apps", "export", "data_prep", "foundation")
_CODE = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"\b(?:%s)(?:\.\w+)+" % "|".join(_PACKAGES))
# A test cited as `tests/test_x.py::test_y`.
_TEST = re.compile(r"\b(tests/[\w/]+\.py)::(\w+)")


def _module_file(dotted):
    """The file of module `dotted`, or None when it is not a module."""
    path = os.path.join(REPO, *dotted.split("."))
    for candidate in (path + ".py", os.path.join(path, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _defined(body):
    """The names a module or class body defines (not those it imports)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target,
                                                            ast.Name):
            names.add(node.target.id)
    return names


def _resolves(dotted):
    """Whether `dotted` is a module, or a module and a name it defines (a
    top-level name, or a class and one of its attributes)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:n]))
        if path:
            break
    else:
        return False
    rest = parts[n:]
    if not rest:
        return True
    body = ast.parse(open(path, encoding="utf-8").read()).body
    for name in rest:
        if name not in _defined(body):
            return False
        found = [node for node in body
                 if isinstance(node, ast.ClassDef) and node.name == name]
        body = found[0].body if found else []
    return True


def _test_defined(path, name):
    full = os.path.join(REPO, path)
    return os.path.isfile(full) and name in _defined(
        ast.parse(open(full, encoding="utf-8").read()).body)


def unresolved_names(text):
    """The project names in backticks, and the tests cited, that do not
    exist: `["albert_tf.tasks.nowhere.run", "tests/test_x.py::test_y"]`."""
    missing = []
    for code in _CODE.findall(text):
        missing += [name for name in _NAME.findall(code) if not _resolves(name)]
        missing += [f"{path}::{name}" for path, name in _TEST.findall(code)
                    if not _test_defined(path, name)]
    return missing


def _section(text, title):
    start = text.index("\n## " + title)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_the_fine_tuning_and_tokenizer_tables_name_what_exists():
    text = _readme()
    tables = [_section(text, "Fine-tuning"), _section(text, "Text -> ids")]
    for table in tables:
        assert len(_NAME.findall(table)) > 20
    assert unresolved_names(text) == []


def test_the_fine_tuning_table_has_a_row_per_task():
    rows = [line for line in _section(_readme(), "Fine-tuning").splitlines()
            if line.startswith("| ") and not line.startswith("| task ")]
    tasks = " ".join(row.split("|")[1] for row in rows).lower()
    for task in ("glue classification", "regression", "squad v1.1",
                 "squad v2.0", "race"):
        assert task in tasks, task
    assert all(len(row.strip().strip("|").split("|")) == 7 for row in rows)


def test_the_name_check_catches_what_does_not_exist():
    text = ("`albert_tf.tasks.glue_reader.read_examples` "
            "`albert_tf.tasks.glue_reader.no_such_reader` "
            "`albert_tf.tasks.text_models.AlbertTextClassifier.fit` "
            "`albert_tf.tasks.text_models.AlbertTextClassifier.nothing` "
            "`python -m albert_apps.run_race` `python -m albert_tf.run_race` "
            "`tests/test_concept_map.py::test_every_linked_path_exists` "
            "`tests/test_concept_map.py::test_nothing_here`")
    assert unresolved_names(text) == [
        "albert_tf.tasks.glue_reader.no_such_reader",
        "albert_tf.tasks.text_models.AlbertTextClassifier.nothing",
        "albert_tf.run_race",
        "tests/test_concept_map.py::test_nothing_here"]
