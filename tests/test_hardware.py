"""What the machine can do: CPU flags, and `--dtype=auto` from them."""

import os

import pytest

from albert_tf.training import hardware


def _flags(**present):
    names = ("AVX2", "AVX-512", "AVX512_BF16", "AMX")
    return lambda: {name: present.get(name.replace("-", "_"), False)
                    for name in names}


@pytest.mark.parametrize("present, expected", [
    ({"AVX2": True}, "float32"),
    ({"AVX2": True, "AVX_512": True}, "float32"),
    ({"AVX2": True, "AVX_512": True, "AVX512_BF16": True}, "bfloat16"),
    ({"AMX": True}, "bfloat16")])
def test_dtype_auto_picks_bfloat16_only_with_bfloat16_matmuls(
        monkeypatch, present, expected):
    monkeypatch.setattr(hardware, "cpu_flags", _flags(**present))
    assert hardware.resolve_dtype("auto") == expected
    assert hardware.resolve_dtype("float32") == "float32"
    assert hardware.resolve_dtype("bfloat16") == "bfloat16"


def test_describe_names_the_cpu_flags_and_cores():
    line = hardware.describe()
    for name in ("AVX-512", "AVX512_BF16", "AMX", f"{os.cpu_count()} cores",
                 "accelerators: none"):
        assert name in line
    assert set(hardware.cpu_flags()) == {"AVX2", "AVX-512", "AVX512_BF16", "AMX"}


def test_callables_are_timed_in_turns_after_a_warm_up():
    calls = []
    runs = {name: (lambda name=name: calls.append(name)) for name in "ab"}
    medians = hardware.median_seconds_in_turns(runs, repeats=3, warmup=1)
    # One untimed round, then the timed rounds alternate a, b, a, b, ...
    assert calls == ["a", "b"] * 4
    assert set(medians) == {"a", "b"}
    assert all(0 <= seconds < 1 for seconds in medians.values())


def test_each_timed_call_is_kept_and_the_median_is_of_them(monkeypatch):
    clock = iter(range(100))
    monkeypatch.setattr(hardware.time, "perf_counter", lambda: next(clock))
    runs = {"a": lambda: None, "b": lambda: None}
    # Each timed call reads the clock twice: every call takes 1 "second".
    times = hardware.seconds_in_turns(runs, repeats=3, warmup=2)
    assert times == {"a": [1, 1, 1], "b": [1, 1, 1]}
    assert hardware.median_seconds_in_turns(runs, repeats=2) == {"a": 1,
                                                                 "b": 1}
