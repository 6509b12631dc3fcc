"""Runs pytest on the test files given as arguments (the Bazel `py_test` main)."""

import sys

import pytest

if __name__ == "__main__":
    # One module a target, in one process (Bazel runs targets side by side).
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-n", "0",
                          *sys.argv[1:]]))
