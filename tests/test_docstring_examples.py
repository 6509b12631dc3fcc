"""Every `Example:` in a public docstring runs as written.

A public name (`albert_tf.__all__`) whose docstring holds `Example:` has its
fenced `python` blocks after that line run, each name's blocks in order in a
fresh namespace.
"""

import inspect
import re

import keras
import pytest

import albert_tf

# Every exported class and function shows itself in use (the presets and
# the sharing modes are data).
MUST_HAVE_EXAMPLES = tuple(
    name for name in albert_tf.__all__
    if name not in ("PRESETS", "SHARE_MODES"))
_FENCED_PYTHON = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def example_blocks(obj):
    """The fenced python blocks after `Example:` in `obj`'s docstring."""
    doc = inspect.getdoc(obj) or ""
    _, marker, examples = doc.partition("Example:")
    return _FENCED_PYTHON.findall(examples) if marker else []


def _names_with_examples():
    return [name for name in albert_tf.__all__
            if example_blocks(getattr(albert_tf, name))]


def test_the_main_classes_have_examples():
    missing = [name for name in MUST_HAVE_EXAMPLES
               if not example_blocks(getattr(albert_tf, name))]
    assert missing == []


def test_blocks_are_found_in_the_documented_format():
    class Documented:
        """Summary.

        Example:

        ```python
        import albert_tf
        x = 1
        ```
        """

    assert example_blocks(Documented) == ["import albert_tf\nx = 1\n"]


@pytest.mark.parametrize("name", _names_with_examples())
def test_example_runs(name):
    for code in example_blocks(getattr(albert_tf, name)):
        exec(compile(code, f"<{name} example>", "exec"), {"__name__": name})
    keras.backend.clear_session()
