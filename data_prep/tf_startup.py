"""TensorFlow's first import, without its CUDA start-up lines on a CPU machine.

The pip `tensorflow` package looks for CUDA when it loads and when it first
lists its devices. On a machine without a GPU driver that prints lines such
as "Could not find cuda drivers on your machine" and "failed call to cuInit:
... UNKNOWN ERROR (303)": they read as errors and are not. Programs call
`import_tensorflow()` once, before their work (`data_prep.flag_options.run_program` does
it for every program): it imports TensorFlow and lists the devices with the
standard error stream captured, then writes back what was captured. Where no
GPU is found, the start-up lines (`STARTUP_NOISE`) are left out; everything
else, real warnings included, is written back as it came. Where a GPU is
found, nothing is left out.

This module imports nothing heavy itself, so a program's `--help` stays fast.
Set ALBERT_TF_SHOW_STARTUP=1 to see every line.
"""

import os
import re
import sys
import tempfile

# The lines TensorFlow prints at start-up on a machine without a GPU: the
# CUDA probes, their preamble, and the note on the CPU instructions it was
# built for (with its continuation line).
STARTUP_NOISE = re.compile(
    r"cudart_stub\.cc|cuda_platform\.cc|cuda_executor\.cc|cuda_dnn\.cc|"
    r"cuda_fft\.cc|cuda_blas\.cc|failed call to cuInit|"
    r"Could not find cuda drivers|Unable to register cu(DNN|FFT|BLAS) "
    r"factory|computation placer already registered|"
    r"All log messages before absl::InitializeLog\(\) is called|"
    r"cpu_feature_guard\.cc|^To enable the following instructions:")

SHOW_STARTUP_ENV = "ALBERT_TF_SHOW_STARTUP"


def without_startup_noise(text):
    """Returns `text` without its TensorFlow start-up lines."""
    kept = [line for line in text.splitlines(keepends=True)
            if not STARTUP_NOISE.search(line)]
    return "".join(kept)


def import_tensorflow():
    """Imports TensorFlow (once) and lists its devices, leaving out the CUDA
    start-up lines where there is no GPU; returns the `tensorflow` module."""
    if "tensorflow" in sys.modules or os.environ.get(SHOW_STARTUP_ENV):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return tf
    sys.stderr.flush()
    saved = os.dup(2)
    has_gpu = True  # Nothing is left out unless the listing says otherwise.
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            has_gpu = bool(tf.config.list_physical_devices("GPU"))
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            sys.stderr.write(text if has_gpu else without_startup_noise(text))
            sys.stderr.flush()
    return tf
