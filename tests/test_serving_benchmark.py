"""`python -m benchmarks.serving`, each mode as its docs run it, on a tiny
model (the numbers are not checked: the tables are)."""

import os
import subprocess
import sys

import pytest

from data_prep import builtin_corpus
from data_prep import vocab

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.slow


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.serving", "--preset=tiny",
         "--seq_length=32", "--batch=4", "--iters_b1=2", "--iters_b32=2",
         "--warmup=1", *args],
        cwd=REPO, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving_benchmark")
    corpus = str(root / "corpus.txt")
    builtin_corpus.write_corpus(corpus, max_chars=300_000)
    path, _ = vocab.train_vocab(corpus, str(root / "spm"), vocab_size=2000,
                                hard_vocab_limit=False)
    return path


@pytest.mark.parametrize("mode,header", [
    ("shapes", "| request | real tokens | dynamic ms | fixed ms |"),
    ("paths", "| path | input | b1 median ms |"),
    ("precision", "| request | float32 ms | bfloat16 ms | int8 ms |"),
])
def test_each_mode_prints_its_table_and_names_the_hardware(
        spm_file, mode, header):
    done = _run("--mode=" + mode, "--spm_model_file=" + spm_file)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("Hardware: ") and "cores" in line
               for line in lines), done.stdout
    table = [line for line in lines if line.startswith("|")]
    assert table and table[0].startswith(header), done.stdout
    # Every row has as many cells as the header.
    assert len({line.count("|") for line in table}) == 1, table


def test_an_unknown_mode_is_named():
    done = _run("--mode=fastest")
    assert done.returncode != 0
    assert "mode" in done.stderr and "fastest" in done.stderr
