"""The log lines a program leaves out (`foundation.tf_startup`), and the real
ones it keeps, in the order they came.

The samples are lines TensorFlow 2.21, tf.data and the TFLite converter
printed in runs of these programs (pretraining, export, the LiteRT export)
on an AVX-512 CPU without a GPU driver.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from foundation import tf_startup

REPO = str(pathlib.Path(__file__).resolve().parents[1])

# One sample per kind of quiet line (the kind's `why` names it).
SAMPLES = [
    b"I0000 00:00:1795854516.618277   23106 cudart_stub.cc:31] Could not "
    b"find cuda drivers on your machine, GPU will not be used.\n",
    b"E0000 00:00:1795854523.306338   23106 cuda_platform.cc:52] failed call "
    b"to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR "
    b"(303)\n",
    b"WARNING: All log messages before absl::InitializeLog() is called are "
    b"written to STDERR\n",
    b"I0000 00:00:1795854516.665545   23106 cpu_feature_guard.cc:227] This "
    b"TensorFlow binary is optimized to use available CPU instructions in "
    b"performance-critical operations.\n"
    b"To enable the following instructions: AVX2 AVX512F AVX512_VNNI "
    b"AVX512_BF16 AVX_VNNI FMA, in other operations, rebuild TensorFlow with "
    b"the appropriate compiler flags.\n",
    b"I0000 00:00:1795854516.617993   23106 port.cc:153] oneDNN custom "
    b"operations are on. You may see slightly different numerical results "
    b"due to floating-point round-off errors from different computation "
    b"orders. To turn them off, set the environment variable "
    b"`TF_ENABLE_ONEDNN_OPTS=0`.\n",
    b"E0000 00:00:1795854595.939983   24563 util.cc:131] oneDNN supports "
    b"DT_INT64 only on platforms with AVX-512. Falling back to the default "
    b"Eigen-based implementation if present.\n",
    b"W0000 00:00:1795854620.468406   24947 flatbuffer_export.cc:4248] The "
    b"following operation(s) need TFLite custom op implementation(s):\n"
    b"Custom ops: TFText>FastSentencepieceTokenize\n"
    b"Details:\n"
    b"\ttf.TFText>FastSentencepieceTokenize(tensor<443000xui8>, "
    b"tensor<?x!tf_type.string>) -> (tensor<?xi32>, tensor<?xi32>)\n"
    b"See instructions: https://www.tensorflow.org/lite/guide/ops_custom\n",
    b"W0000 00:00:1795854620.240778   24947 tf_tfl_flatbuffer_helpers.cc:364]"
    b" Ignored output_format.\n",
    b"W0000 00:00:1795855803.586481   21860 op_level_cost_estimator.cc:699] "
    b"Error in PredictCost() for the op: goo.gle/debugonly   op: \"Softmax\" "
    b"attr { key: \"T\" value { type: DT_FLOAT } }\n",
    b"W0000 00:00:1795854593.479080   24563 dataset.cc:997] Input of "
    b"GeneratorDatasetOp::Dataset will not be optimized because the dataset "
    b"does not implement the AsGraphDefInternal() method needed to apply "
    b"optimizations.\n",
    b"I1128 08:30:05.278235 139806810803072 signature_serialization.py:156] "
    b"Function `serve` contains input name(s) 1012, 2378, resource with "
    b"unsupported characters which will be renamed to unknown in the "
    b"SavedModel.\n",
    b"I1128 08:30:06.090182 139806810803072 functional_saver.py:440] "
    b"Sharding callback duration: 18 microseconds\n",
    b"I0000 00:00:1795854619.091109   24947 builder.cc:183] Loading CharsMap "
    b"of size=348140\n",
]

# Lines that must come through: the programs' own log, real C++ warnings
# and errors, a traceback, a progress bar's redraws.
KEPT = [
    b"I1128 08:34:02.065587 139713721858944 trainer.py:337] Saved checkpoint "
    b"runs/tiny2/ckpt-6\n",
    b"W1128 08:34:16.219204 139808735427456 litert.py:526] The int8 "
    b"encoder.tflite does not agree with the float32 model\n",
    b"W0000 00:00:1795854620.240778   24947 op_kernel.cc:1857] OP_REQUIRES "
    b"failed at save_restore_v2_ops.cc:150 : NOT_FOUND: runs/x\n",
    b"E0000 00:00:1795854620.240778   24947 meta_optimizer.cc:966] layout "
    b"failed: INVALID_ARGUMENT: Size of values 0 does not match size\n",
    b"\tindented program output\n",
    b"Details: of the program\n",
    b"Traceback (most recent call last):\n",
    b"  File \"x.py\", line 1, in <module>\n",
    b"fetch  40%|####      | 4/10\r",
    b"fetch 100%|##########| 10/10\r\n",
]


def _filtered(data, has_gpu=False, piece=None):
    line_filter = tf_startup.LineFilter(has_gpu)
    if piece is None:
        return line_filter.feed(data) + line_filter.finish()
    out = b"".join(line_filter.feed(data[i:i + piece])
                   for i in range(0, len(data), piece))
    return out + line_filter.finish()


@pytest.mark.parametrize("sample", SAMPLES, ids=range(len(SAMPLES)))
def test_each_quiet_line_is_left_out_whole(sample):
    assert _filtered(sample) == b""


def test_each_kind_of_quiet_line_has_a_sample():
    for kind in tf_startup.QUIET_LINES:
        one = tf_startup.LineFilter()
        one._kinds = [k for k, quiet in zip(one._kinds, tf_startup.QUIET_LINES)
                      if quiet is kind]
        assert any(_filtered_by(one, s) == b"" for s in SAMPLES), kind.why


def _filtered_by(line_filter, data):
    return line_filter.feed(data) + line_filter.finish()


@pytest.mark.parametrize("piece", [None, 1, 7])
def test_real_lines_come_through_in_order_between_quiet_ones(piece):
    stream = b"".join(s + k for s, k in zip(SAMPLES, KEPT))
    stream += b"".join(SAMPLES[len(KEPT):])
    assert _filtered(stream, piece=piece) == b"".join(KEPT)


def test_a_continuation_ends_at_the_first_line_of_another_kind():
    notice = SAMPLES[6]  # The custom-op notice and its four lines.
    assert _filtered(notice + KEPT[6] + KEPT[7]) == KEPT[6] + KEPT[7]
    assert _filtered(notice + b"Custom ops: mine\n") == b""
    assert _filtered(KEPT[0] + b"Custom ops: mine\n") == (
        KEPT[0] + b"Custom ops: mine\n")


def test_a_gpu_keeps_the_cuda_lines():
    assert _filtered(SAMPLES[1], has_gpu=True) == SAMPLES[1]
    # An INFO line, as quiet as every C++ INFO line.
    assert _filtered(SAMPLES[0], has_gpu=True) == b""
    assert _filtered(SAMPLES[5], has_gpu=True) == b""


def test_a_line_is_written_once_complete_and_a_last_one_at_the_end():
    line_filter = tf_startup.LineFilter()
    assert line_filter.feed(b"step 1/3") == b""
    assert line_filter.feed(b"\rstep 2/3\r") == b"step 1/3\rstep 2/3\r"
    assert line_filter.feed(b"done") == b""
    assert line_filter.finish() == b"done"
    assert tf_startup.without_startup_noise(
        SAMPLES[4].decode() + "kept\n") == "kept\n"


# A program's process: TensorFlow imported as the programs import it, then
# lines written straight to file descriptor 2 as the C++ runtime writes
# them, and the process ended without flushing or exiting Python (a crash).
_PROGRAM = textwrap.dedent("""
    import os, sys
    from foundation import tf_startup
    tf = tf_startup.import_tensorflow()
    tf.constant([1, 2], tf.int64) + 1
    os.write(2, {quiet!r})
    os.write(2, b"W0000 00:00:1.0  1 real.cc:1] a real C++ warning\\n")
    sys.stderr.write("a Python line\\n")
    sys.stderr.flush()
    print(sys.stderr.isatty(), flush=True)
    os.write(2, b"last words\\n")
    os._exit(3)
""")


def _run_program(extra_env=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", tf_startup.SHOW_STARTUP_ENV)}
    env.update(PYTHONPATH=REPO, **(extra_env or {}))
    quiet = SAMPLES[5] + SAMPLES[6] + SAMPLES[10]
    return subprocess.run([sys.executable, "-c", _PROGRAM.format(quiet=quiet)],
                          cwd=REPO, env=env, capture_output=True, timeout=120)


# Words of the quiet lines, checked without the module's own patterns.
_QUIET_WORDS = [b"cuda drivers", b"cuInit", b"cpu_feature_guard",
                b"absl::InitializeLog", b"oneDNN", b"DT_INT64",
                b"custom op", b"contains input name", b"PredictCost"]


def test_a_program_prints_its_real_lines_and_no_quiet_one():
    done = _run_program()
    assert done.returncode == 3, done.stderr[-3000:]
    for words in _QUIET_WORDS:
        assert words not in done.stderr, (words, done.stderr[-3000:])
    assert done.stderr.endswith(
        b"a real C++ warning\na Python line\nlast words\n"), done.stderr
    assert done.stdout == b"False\n"  # A pipe here, not a terminal.


@pytest.mark.slow
def test_asked_for_every_line_a_program_prints_them_all():
    done = _run_program({tf_startup.SHOW_STARTUP_ENV: "1"})
    assert done.returncode == 3, done.stderr[-3000:]
    for words in (b"oneDNN custom operations", b"DT_INT64", b"custom op",
                  b"contains input name"):
        assert words in done.stderr, words


def _user_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES",
                        tf_startup.SHOW_STARTUP_ENV)}
    return dict(env, PYTHONPATH=REPO)


def _run_as_a_user(cwd, *argv):
    done = subprocess.run([sys.executable, "-m", *argv], cwd=cwd,
                          env=_user_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_pretraining_and_a_litert_export_print_no_quiet_line(tmp_path):
    """The programs as a user runs them (no TF_CPP_MIN_LOG_LEVEL): a tiny
    pretraining run with evaluation, then the LiteRT export, whose runs
    printed every kind of quiet line before."""
    from data_prep import builtin_corpus
    from data_prep import vocab

    builtin_corpus.write_corpus(str(tmp_path / "corpus.txt"),
                                max_chars=300_000)
    vocab.train_vocab(str(tmp_path / "corpus.txt"), str(tmp_path / "spm"),
                      vocab_size=1000)
    _run_as_a_user(
        tmp_path, "data_prep.create_pretraining_data",
        "--input_file=corpus.txt", "--output_file=data/train.tfrecord",
        "--spm_model_file=spm.model", "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--dupe_factor=1")
    runs = [_run_as_a_user(
        tmp_path, "albert_tf.run_pretraining",
        "--input_file=data/train.tfrecord*", "--output_dir=run",
        "--preset=tiny", "--train_batch_size=16", "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--num_train_steps=4",
        "--num_warmup_steps=1", "--iterations_per_loop=2", "--do_eval",
        "--eval_batch_size=16", "--max_eval_steps=1")]
    runs.append(_run_as_a_user(
        tmp_path, "export.export_saved_model", "--format=litert",
        "--checkpoint=run", "--albert_config_file=run/albert_config.json",
        "--spm_model_file=spm.model", "--export_dir=exports",
        "--max_seq_length=32"))
    for done in runs:
        for words in _QUIET_WORDS:
            assert words.decode() not in done.stderr, (words, done.stderr)
    assert "Saved checkpoint run/ckpt-4" in runs[0].stderr
    assert "encoder.tflite" in runs[1].stderr


@pytest.mark.slow
def test_on_a_terminal_a_progress_bar_still_draws(tmp_path):
    """The stream passes through the filter yet ends at the terminal:
    `progress.interactive()` says so and a bar is drawn, with no quiet
    line."""
    code = textwrap.dedent("""
        from foundation import progress, tf_startup
        tf_startup.import_tensorflow()
        print(progress.interactive(), flush=True)
        with progress.bar(total=3, description="work") as bar:
            bar.update(3)
    """)
    terminal, program_side = os.openpty()
    done = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                            env=_user_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=program_side)
    os.close(program_side)
    out, _ = done.communicate(timeout=120)
    shown = b""
    while True:
        try:
            data = os.read(terminal, 1 << 16)
        except OSError:  # The program side is closed.
            break
        if not data:
            break
        shown += data
    os.close(terminal)
    assert done.returncode == 0, shown[-3000:]
    assert out == b"True\n"
    assert b"work: 100%" in shown and b"3/3" in shown
    for words in _QUIET_WORDS:
        assert words not in shown, words
