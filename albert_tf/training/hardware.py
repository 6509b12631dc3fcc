"""What the machine can do fast: CPU model and flags, accelerators, bfloat16.

Every benchmark prints `describe()`, and `--dtype=auto` asks
`fast_bfloat16()`: bfloat16 halves memory traffic everywhere, but its matmuls
run faster than float32 only with hardware support (TPUs, GPUs from Ampere
on, CPUs with AVX512_BF16 or AMX); on an AVX2-only CPU they are no faster
and the casts cost extra (docs/benchmarks.md).
"""

import functools
import os
import platform
import statistics
import time

import tensorflow as tf

# /proc/cpuinfo flag -> the name benchmarks print.
CPU_FLAGS = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX512_BF16",
             "amx_bf16": "AMX"}


@functools.lru_cache(maxsize=None)
def _cpuinfo():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model():
    """The CPU's model name (`/proc/cpuinfo`, else `platform.processor()`)."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def cpu_flags():
    """`{name: bool}` for each of `CPU_FLAGS` (all False where unknown)."""
    present = set()
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            break
    return {name: flag in present for flag, name in CPU_FLAGS.items()}


def accelerators():
    """Kinds of the accelerators TensorFlow sees: a subset of {"GPU", "TPU"}."""
    return {kind for kind in ("GPU", "TPU")
            if tf.config.list_logical_devices(kind)}


def _gpu_has_bfloat16():
    for device in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(device).get(
            "compute_capability", (0, 0))
        if capability < (8, 0):
            return False
    return True


def fast_bfloat16():
    """Whether bfloat16 matmuls run faster than float32 here."""
    kinds = accelerators()
    if "TPU" in kinds:
        return True
    if "GPU" in kinds:
        return _gpu_has_bfloat16()
    flags = cpu_flags()
    return flags["AVX512_BF16"] or flags["AMX"]


def resolve_dtype(dtype):
    """`--dtype`: "auto" becomes "bfloat16" where `fast_bfloat16()`, else
    "float32"; other values are kept."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if fast_bfloat16() else "float32"


def describe():
    """One line naming the CPU, its flags, cores and accelerators."""
    flags = ", ".join(f"{name} {'yes' if has else 'no'}"
                      for name, has in cpu_flags().items())
    kinds = sorted(accelerators())
    return (f"{cpu_model()}, {os.cpu_count()} cores ({flags}); accelerators: "
            f"{', '.join(kinds) if kinds else 'none'}")


def seconds_in_turns(runs, repeats, warmup=1):
    """Times several callables in turns, so load from elsewhere on a shared
    machine falls on all of them alike.

    Args:
        runs: a dict name -> callable (taking no argument).
        repeats: timed calls of each.
        warmup: untimed calls of each first (the first compiles).

    Returns:
        A dict name -> the seconds of each of its timed calls.
    """
    for _ in range(warmup):
        for run in runs.values():
            run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def median_seconds_in_turns(runs, repeats, warmup=1):
    """`seconds_in_turns`, each callable's median."""
    return {name: statistics.median(values) for name, values
            in seconds_in_turns(runs, repeats, warmup).items()}
