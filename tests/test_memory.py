"""The memory estimate printed at the start of training."""

import pytest

from albert_tf import AlbertConfig
from albert_tf.training import memory


def _estimate(preset="albert_base_v2", **kwargs):
    config = AlbertConfig.from_preset(preset, **kwargs.pop("config", {}))
    args = dict(num_params=11_683_584, seq_length=512, micro_batch=1)
    args.update(kwargs)
    return memory.estimate(config, **args)


def test_parts_add_up_and_scale_as_they_should():
    base = _estimate()
    assert base["total"] == (base["parameters"] + base["optimizer"]
                             + base["shared_gradients"] + base["activations"])
    assert base["parameters"] == 4 * 11_683_584
    # Two LAMB slots and the gradients, all float32.
    assert base["optimizer"] == 3 * base["parameters"]
    assert _estimate(micro_batch=4)["activations"] == 4 * base["activations"]
    assert _estimate(gradient_accumulation_steps=2)["optimizer"] == (
        4 * base["parameters"])
    assert _estimate(dtype="bfloat16")["activations"] < base["activations"]
    assert _estimate(seq_length=128)["activations"] < base["activations"] / 4


def test_shared_gradients_follow_the_sharing_mode():
    # ALBERT-base's block: 7.1M parameters, used by 12 layers.
    assert _estimate()["shared_gradients"] == 4 * 12 * 7_087_872
    assert _estimate(config={"share": "none"})["shared_gradients"] == 0
    attention = _estimate(config={"share": "attention"})["shared_gradients"]
    ffn = _estimate(config={"share": "ffn"})["shared_gradients"]
    assert attention + ffn == _estimate()["shared_gradients"]


def test_xxlarge_at_seq_512_is_estimated_near_the_measured_peak():
    # benchmarks/memory.py measured 18.8 GiB above the runtime for this step
    # (float32, micro-batch 1 of 2).
    numbers = _estimate("albert_xxlarge_v2", num_params=222_595_584,
                        gradient_accumulation_steps=2, predictions=20)
    assert 14 < numbers["total"] / memory.GIB < 24


def test_training_logs_the_estimate(short_pretraining_run):
    lines = short_pretraining_run.lines
    line = next(line for line in lines if line.startswith("Memory estimate"))
    for part in ("parameters", "optimizer", "shared kernels", "activations",
                 "per example x 8"):
        assert part in line


class _Logged(Exception):
    """Ends a run right after its memory line (no step is compiled)."""


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_trainer_estimates_for_the_runs_dtype(tmp_path, monkeypatch, dtype):
    """The line follows --dtype: the model's own policy does not carry it
    (its layers do), so the Trainer passes the resolved flag."""
    from tests import fixtures_pretraining

    data = fixtures_pretraining.write_records(str(tmp_path / "d.tfrecord"), 8)
    trainer = fixtures_pretraining.trainer(fixtures_pretraining.options(
        data, str(tmp_path / "out"), dtype=dtype))
    seen = []

    def log_estimate(config, model, options, num_replicas, dtype):
        seen.append(dtype)
        raise _Logged

    monkeypatch.setattr(memory, "log_estimate", log_estimate)
    with pytest.raises(_Logged):
        trainer.train()
    assert seen == [dtype]
