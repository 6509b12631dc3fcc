"""`python -m benchmarks.serving`, each mode as its docs run it, on a tiny
model (the numbers are not checked: the tables are)."""

import os
import re
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


def test_runtimes_mode_times_every_runtime_and_names_what_it_skips(
        spm_file):
    """`--mode=runtimes` with ONNX Runtime made unimportable: its row says
    why, the others are measured (PyTorch's where it is installed), every
    ratio is in words."""
    args = ["--mode=runtimes", "--spm_model_file=" + spm_file]
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['onnxruntime'] = "
         "None; from absl import app; from benchmarks import serving; "
         "app.run(serving.main)", "--preset=tiny", "--seq_length=32",
         "--iters_b1=2", "--warmup=1", *args],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("CPU: ") and "AMX" in line for line in lines)
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].startswith("| runtime | input | median ms | speed vs "
                               "float32 SavedModel |"), done.stdout
    rows = {line.split(" | ")[0][2:]: line for line in table[1:]}
    assert "the reference" in rows["float32 SavedModel"]
    for name in ("bfloat16 SavedModel", "int8 SavedModel",
                 "int8 .tflite, text in (XNNPACK)",
                 "int8 .tflite, ids in (XNNPACK)"):
        assert re.search(r"\| \d+\.\d\dx (faster than|the latency of) "
                         r"float32 \|", rows[name]), rows[name]
    # onnx is asked for first: where it is missing too, the row names it.
    assert re.search(r"\| - \| skipped: onnx(runtime)? is not installed",
                     rows["ONNX Runtime dynamic int8"])
    assert "PyTorch dynamic int8" in rows


def test_a_missing_runtime_is_a_row_not_a_crash():
    from benchmarks import serving_runtimes

    with pytest.raises(serving_runtimes.Skipped, match="not installed"):
        serving_runtimes._peers("json", "no_such_runtime_module")
    text = serving_runtimes.format_table(
        [("float32 SavedModel", "text", 0.2, 1.0, None),
         ("int8 SavedModel", "text", 0.1, 0.99, None),
         ("bfloat16 SavedModel", "text", 0.25, 0.99, None),
         ("PyTorch dynamic int8", "ids", None, None, "torch is not "
          "installed")], "tiny", 32, "a CPU")
    assert "| 2.00x faster than float32 |" in text
    assert "| 1.25x the latency of float32 |" in text
    assert "| - | skipped: torch is not installed | - |" in text


def test_an_unknown_mode_is_named():
    done = _run("--mode=fastest")
    assert done.returncode != 0
    assert "mode" in done.stderr and "fastest" in done.stderr
