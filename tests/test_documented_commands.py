"""Every command block of the README and of `docs/` is run by a test.

Fast: nothing is run here. `tests/journeys/documented.py` names the test
that runs each documented command; these tests check that the list covers
every command block, that each key picks out one command, and that each
journey named really reads its command from the documentation.
"""

import ast
import os

import pytest

from tests.journeys import documented

REPO = documented.REPO
COMMANDS = documented.all_commands()


def test_the_readme_and_the_guides_have_command_blocks():
    paths = {c.path for c in COMMANDS}
    assert "README.md" in paths
    assert {"docs/pretraining.md", "docs/finetuning.md",
            "docs/serving.md", "docs/converting.md"} <= paths


@pytest.mark.parametrize("command", COMMANDS,
                         ids=[f"{c.path}:{c.line}" for c in COMMANDS])
def test_every_documented_command_is_run_by_a_test(command):
    keys = [key for key in documented.keys() if key in command.text]
    assert keys, (
        f"{command.path}:{command.line}: no test runs `{command.text}`. "
        "Run it in a journey (read it with documented.command(key, ...)) "
        "and add the key to tests/journeys/documented.py.")
    assert len(keys) == 1, (command.text, keys)


@pytest.mark.parametrize("key", documented.keys())
def test_each_key_picks_out_one_command(key):
    assert len(documented.matching(key, COMMANDS)) == 1, key


def _keys_passed_to(path, function):
    """The string keys `path` passes to `documented.<function>(...)` (a
    literal or a module-level name bound to one)."""
    tree = ast.parse(open(os.path.join(REPO, path), encoding="utf-8").read())
    names = {node.targets[0].id: node.value.value for node in tree.body
             if isinstance(node, ast.Assign) and len(node.targets) == 1
             and isinstance(node.targets[0], ast.Name)
             and isinstance(node.value, ast.Constant)}
    found = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == function
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "documented" and node.args):
            first = node.args[0]
            if isinstance(first, ast.Constant):
                found.add(first.value)
            elif isinstance(first, ast.Name) and first.id in names:
                found.add(names[first.id])
    return found


def _documented_keys_read_by(path):
    return _keys_passed_to(path, "command")


@pytest.mark.parametrize("key", list(documented.JOURNEYS))
def test_each_journey_reads_its_command_from_the_documentation(key):
    journey = documented.JOURNEYS[key]
    assert journey.startswith("tests/journeys/"), journey
    assert key in _documented_keys_read_by(journey), (
        f"{journey} does not run documented.command({key!r}, ...)")


@pytest.mark.parametrize("key", list(documented.ELSEWHERE))
def test_the_other_runners_hold_their_command(key):
    runner, text, why = documented.ELSEWHERE[key]
    assert why
    with open(os.path.join(REPO, runner), encoding="utf-8") as f:
        assert text in f.read(), (runner, text)


def test_every_command_not_run_here_says_why_and_what_runs_instead():
    for key, why in documented.NOT_RUN_HERE.items():
        assert len(why) > 40, key


PYTHON_BLOCKS = documented.all_code_blocks()


def _python_keys():
    return list(documented.PYTHON_BLOCKS) + list(documented.PYTHON_NOT_RUN_HERE)


def test_the_readme_opens_with_a_python_block_on_raw_text():
    blocks = [b for path, b in PYTHON_BLOCKS if path == "README.md"]
    assert "AlbertTextPreprocessor(" in blocks[0]
    assert ".fit(" in blocks[0] and ".predict(" in blocks[0]


@pytest.mark.parametrize("path,block", PYTHON_BLOCKS,
                         ids=[p for p, _ in PYTHON_BLOCKS])
def test_every_documented_python_block_is_run_by_a_test(path, block):
    keys = [key for key in _python_keys() if key in block]
    assert keys, (
        f"{path}: no test runs the Python block starting "
        f"{block.splitlines()[0]!r}. Run it in a test (read it with "
        "documented.code_block(key)) and add the key to "
        "tests/journeys/documented.py's PYTHON_BLOCKS.")
    assert len(keys) == 1, (path, keys)


@pytest.mark.parametrize("key", _python_keys())
def test_each_python_key_picks_out_one_block(key):
    assert documented.code_block(key)


def _code_block_keys_read_by(path):
    return _keys_passed_to(path, "code_block")


@pytest.mark.parametrize("key", list(documented.PYTHON_BLOCKS))
def test_each_python_block_runner_reads_its_block(key):
    runner = documented.PYTHON_BLOCKS[key]
    assert key in _code_block_keys_read_by(runner), (
        f"{runner} does not run documented.code_block({key!r})")


def test_every_python_block_not_run_here_says_why_and_what_runs_instead():
    for key, why in documented.PYTHON_NOT_RUN_HERE.items():
        assert len(why) > 40 and "test" in why, key


_SAMPLE = """
Text.

```bash
# a comment
python -m pkg.a --x=1 \\
    --y='b/*'

python -m pkg.b
```

```python
print("not a command")
```

```console
$ python -m pkg.c --z
```
"""


def test_commands_are_logical_lines_of_the_command_blocks():
    commands = documented.parse(_SAMPLE, "sample.md")
    assert [(c.line, c.text) for c in commands] == [
        (6, "python -m pkg.a --x=1 --y='b/*'"),
        (9, "python -m pkg.b"),
        (17, "python -m pkg.c --z"),
    ]


def test_code_blocks_are_the_blocks_of_their_language():
    assert documented.code_blocks(_SAMPLE) == ['print("not a command")\n']
    assert documented.code_blocks(_SAMPLE, "console") == [
        "$ python -m pkg.c --z\n"]


def test_a_code_block_is_picked_out_by_its_key():
    assert "keras.Model(" in documented.code_block(
        'keras_layer.load_exported_encoder("/models/albert_encoder/1")')
    with pytest.raises(LookupError, match="picks out 0"):
        documented.code_block("no such code in any guide")


def test_a_command_no_test_runs_is_reported():
    commands = documented.parse(_SAMPLE, "sample.md")
    assert documented.uncovered(commands) == commands
    assert documented.uncovered(COMMANDS) == []


def test_a_command_in_an_unmarked_block_is_refused():
    with pytest.raises(ValueError, match="mark it"):
        documented.parse("```\npython -m pkg.a\n```\n", "sample.md")


def test_adapt_sets_adds_drops_flags_and_fills_variables():
    text = ("python -m pkg.a --tpu=local --input_file='gs://b/*' "
            "--do_eval --nohard_limit --out=$DIR/x")
    assert documented.adapt(
        text, env={"DIR": "/tmp/w"},
        set={"input_file": "data/*", "steps": 2, "flag": True},
        drop=("tpu", "hard_limit")) == (
        "python -m pkg.a '--input_file=data/*' --do_eval --out=/tmp/w/x "
        "--steps=2 --flag")
