"""The continuation-line rules ruff does not have (pycodestyle's E12x) hold
in every tracked Python file."""

import os
import subprocess

import pycodestyle

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Continuation lines: under-indented or over-indented for a hanging or
# visual indent, a closing bracket that matches neither, and the
# indentation of a continued `if`. (E121, E123, E126 are off by default in
# pycodestyle itself: they forbid common hanging styles.)
CONTINUATION_RULES = ("E122", "E124", "E125", "E127", "E128", "E129", "E131")


def _tracked_python_files():
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    return [os.path.join(REPO, path) for path in out.split()]


class _Collected(pycodestyle.BaseReport):
    """Keeps each violation as `path:line:column: code text`."""

    found = []

    def error(self, line_number, offset, text, check):
        code = super().error(line_number, offset, text, check)
        if code:
            self.found.append(f"{os.path.relpath(self.filename, REPO)}:"
                              f"{line_number}:{offset + 1}: {text}")
        return code


def _violations(paths):
    _Collected.found = []
    pycodestyle.StyleGuide(select=CONTINUATION_RULES, quiet=True,
                           reporter=_Collected).check_files(paths)
    return list(_Collected.found)


def test_continuation_lines_line_up_in_every_tracked_file():
    paths = _tracked_python_files()
    assert len(paths) > 100
    assert _violations(paths) == []


def test_a_misaligned_continuation_line_is_found(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("total = max(1,\n    2)\nother = max(1,\n            2)\n")
    found = _violations([str(path)])
    assert len(found) == 1
    assert found[0].endswith(
        ":2:5: E128 continuation line under-indented for visual indent")
