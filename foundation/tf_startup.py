"""TensorFlow's first import, without the log lines that look like errors
and are not.

TensorFlow and the libraries it loads print lines that read as errors or
as advice and mean nothing to a user of these programs: CUDA probes on a
machine without a GPU driver ("Could not find cuda drivers", "failed call
to cuInit"), a note to rebuild TensorFlow for the CPU's instructions,
"oneDNN supports DT_INT64 only on platforms with AVX-512" (printed on
AVX-512 CPUs too; the op falls back to Eigen with the same results), the
TFLite converter's list of custom ops (the export registers its one custom
op itself), Keras' note on renamed SavedModel input names, and TensorFlow's
C++ INFO lines. `QUIET_LINES` lists each one and why; docs/troubleshooting.md
explains them to users.

Programs call `import_tensorflow()` once, before their work
(`foundation.flag_options.run_program` does it for every program). It
imports TensorFlow and lists its devices with the standard error stream
captured, writes back what was captured less the quiet lines, then passes
the stream through a small filter process for the rest of the run, so the
same lines printed later (by the C++ runtime, straight to the stream) are
left out too. Everything else, real warnings and errors included, comes
through in order. Where a GPU is found, the CUDA lines are kept.

`--verbosity=1` (or ALBERT_TF_SHOW_STARTUP=1) keeps every line. Inside a
test runner or an interactive session, which share the stream, only the
start-up lines are filtered.
This module imports nothing heavy itself, so a program's `--help` stays
fast; the filter process runs this file with the standard library alone.
"""

import collections
import os
import re
import signal
import subprocess
import sys
import tempfile

SHOW_STARTUP_ENV = "ALBERT_TF_SHOW_STARTUP"

# One kind of quiet line: the pattern of its first line, the pattern of the
# lines that continue it (or None), whether it is quiet only where there is
# no GPU, and why it is quiet.
QuietLine = collections.namedtuple("QuietLine",
                                   "pattern follows no_gpu_only why")

# A C++ INFO line's prefix: level, date, time, thread, source file and line
# (`I0000 00:00:1795854593.476162   24563 port.cc:153] ...`).
_CPP_INFO = r"^I\d{4} [\d:.]+ +\d+ [\w.-]+\.(?:cc|h|cpp):\d+\] "

QUIET_LINES = (
    QuietLine(r"cudart_stub\.cc|cuda_platform\.cc|cuda_executor\.cc|"
              r"cuda_dnn\.cc|cuda_fft\.cc|cuda_blas\.cc|"
              r"failed call to cuInit|Could not find cuda drivers|"
              r"Unable to register cu(?:DNN|FFT|BLAS) factory|"
              r"computation placer already registered", None, True,
              "CUDA probes on a machine without a GPU driver"),
    QuietLine(r"^WARNING: All log messages before absl::InitializeLog\(\) "
              r"is called", None, False,
              "the C++ logging library's preamble to the lines below"),
    QuietLine(r"cpu_feature_guard\.cc", r"^To enable the following "
              r"instructions:", False,
              "advice to rebuild TensorFlow for this CPU's instructions"),
    QuietLine(r"oneDNN custom operations are on", None, False,
              "oneDNN's default on x86 CPUs; results differ from Eigen's "
              "only by float round-off"),
    QuietLine(r"oneDNN supports DT_INT64 only on platforms with AVX-512",
              None, False,
              "printed on AVX-512 CPUs too; the int64 op runs on Eigen with "
              "the same results"),
    QuietLine(r"need TFLite custom op implementation", r"^(?:Custom ops:|"
              r"Details:|\t|See instructions:)", False,
              "the .tflite export registers its one custom op "
              "(docs/on_device.md)"),
    QuietLine(r"tf_tfl_flatbuffer_helpers\.cc:\d+\] Ignored ", None, False,
              "converter options TensorFlow itself passes and ignores"),
    QuietLine(r"op_level_cost_estimator\.cc:\d+\] Error in PredictCost\(\)",
              None, False,
              "Grappler's cost model meets an op whose shapes are known only "
              "at run time; the graph is optimized and runs all the same"),
    QuietLine(r"Input of GeneratorDatasetOp::Dataset will not be optimized",
              None, False, "tf.data's note on Python generators"),
    QuietLine(r"contains input name\(s\) .* with unsupported characters "
              r"which will be renamed", None, False,
              "captured variables get internal names in a SavedModel; the "
              "signatures' input names are kept"),
    QuietLine(r"Sharding callback duration:", None, False,
              "a checkpoint writer's timing"),
    QuietLine(_CPP_INFO + "|^INFO: Created TensorFlow Lite XNNPACK delegate",
              None, False,
              "TensorFlow's C++ INFO lines: its own progress, not the "
              "program's"),
)


class LineFilter:
    """Leaves the quiet lines out of a byte stream, line by line.

    A line ends at a newline or a carriage return (a progress bar redraws
    its line with one), so those pass as soon as they are complete.

    Args:
        has_gpu: whether a GPU was found (the CUDA lines are then kept).
    """

    def __init__(self, has_gpu=False):
        kinds = [k for k in QUIET_LINES if not (has_gpu and k.no_gpu_only)]
        self._kinds = [(re.compile(k.pattern.encode()),
                        k.follows and re.compile(k.follows.encode()))
                       for k in kinds]
        self._pending = b""
        self._follows = None  # The continuation pattern of a quiet line.

    def feed(self, data):
        """The complete lines of `data` (with what came before) to write."""
        self._pending += data
        lines = re.split(rb"(?<=[\r\n])", self._pending)
        self._pending = lines.pop()  # b"" or a line not complete yet.
        return b"".join(line for line in lines if self._keep(line))

    def finish(self):
        """What is left at the end of the stream (a last unfinished line)."""
        rest, self._pending = self._pending, b""
        return rest if rest and self._keep(rest) else b""

    def _keep(self, line):
        text = line.rstrip(b"\r\n")
        if self._follows is not None:
            if self._follows.search(text):
                return False
            self._follows = None
        for pattern, follows in self._kinds:
            if pattern.search(text):
                self._follows = follows or None
                return False
        return True


def without_startup_noise(text, has_gpu=False):
    """Returns `text` without its quiet lines."""
    line_filter = LineFilter(has_gpu)
    data = line_filter.feed(text.encode("utf-8", "surrogateescape"))
    data += line_filter.finish()
    return data.decode("utf-8", "surrogateescape")


def _show_everything():
    """Whether the user asked for every line (`--verbosity=1` or the
    environment variable)."""
    if os.environ.get(SHOW_STARTUP_ENV):
        return True
    absl_logging = sys.modules.get("absl.logging")
    try:
        return bool(absl_logging and absl_logging.get_verbosity() >= 1)
    except Exception:  # noqa: BLE001 - flags not parsed: the default
        return False


def _stream_is_shared():
    """Whether the stream is not the program's alone: a test runner
    captures it itself (a filter under it would outlive the test), and an
    interactive session writes its prompts there (a filter would hold an
    unfinished line)."""
    return "_pytest" in sys.modules or hasattr(sys, "ps1")


_filter_process = None


def _filter_the_stream(has_gpu):
    """Passes file descriptor 2 through a filter process (once) for the
    rest of the run.

    The filter is a separate process, not a thread, so that whatever the
    program writes before it dies (a crash's last words included) is still
    written: the filter reads to the end of the stream and exits when the
    program and everything it started have closed it.
    """
    global _filter_process
    if _filter_process is not None or _stream_is_shared():
        return
    try:
        os.fstat(2)
        was_terminal = sys.stderr.isatty()
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__),
             "--filter", "gpu" if has_gpu else "cpu"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    except (OSError, ValueError, AttributeError):
        return  # No stream to filter, or no way to: lines come through.
    sys.stderr.flush()
    os.dup2(process.stdin.fileno(), 2)
    process.stdin.close()
    _filter_process = process
    if was_terminal:
        # The stream still ends at the user's terminal: progress bars ask.
        sys.stderr.isatty = lambda: True


def import_tensorflow():
    """Imports TensorFlow (once) and lists its devices, leaving out the
    quiet lines (`QUIET_LINES`) then and for the rest of the run; returns
    the `tensorflow` module."""
    if _show_everything():
        import tensorflow as tf
        return tf
    if "tensorflow" in sys.modules:
        import tensorflow as tf
        _filter_the_stream(bool(tf.config.list_physical_devices("GPU")))
        return tf
    sys.stderr.flush()
    saved = os.dup(2)
    has_gpu = True  # Nothing is left out unless the listing says otherwise.
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf
            has_gpu = bool(tf.config.list_physical_devices("GPU"))
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            sys.stderr.write(without_startup_noise(text, has_gpu))
            sys.stderr.flush()
    _filter_the_stream(has_gpu)
    return tf


def _write_all(fd, data):
    """Writes all of `data`; False once the stream is gone (a closed
    pipe): the filter then reads on, so the program never blocks."""
    while data:
        try:
            data = data[os.write(fd, data):]
        except OSError:
            return False
    return True


def _run_filter(mode):
    """The filter process: standard input to standard error, less the
    quiet lines, until the program closes its end."""
    # Ctrl-C and a stop signal reach the whole process group: the filter
    # stays to pass on the program's last lines, and ends with the stream.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    line_filter = LineFilter(has_gpu=mode == "gpu")
    writing = True
    while True:
        data = os.read(0, 1 << 16)
        if not data:
            break
        kept = line_filter.feed(data)
        if kept and writing:
            writing = _write_all(2, kept)
    if writing:
        _write_all(2, line_filter.finish())


if __name__ == "__main__" and sys.argv[1:2] == ["--filter"]:
    _run_filter(sys.argv[2])
