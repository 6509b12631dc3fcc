"""The one Trainer: replicas add up to one device for every job, a diverging
run stops without saving, resumed runs check their configuration, and
evaluation-only runs find their checkpoints."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import baselines
from albert_tf.training import pretraining
from albert_tf.training.errors import TrainingDivergedError
from tests import fixtures_pretraining

REPO = fixtures_pretraining.REPO

# Every job, trained 2 steps under one device and under 2 mirrored replicas
# (2 logical CPUs) from the same weights on the same global batches; prints
# the largest difference between the two runs' `ckpt-2` (model weights and
# optimizer slots) per job.
_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import numpy as np
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.tasks import finetuning_jobs
    from albert_tf.tasks.options import ClassifierOptions, RaceOptions
    from albert_tf.tasks.options import SquadOptions
    from albert_tf.training import model_dir as model_dir_lib
    from albert_tf.training import pretraining
    from tests import fixtures_pretraining, tasks_testdata

    root = sys.argv[1]
    config = AlbertConfig.from_preset(
        "tiny", vocab_size=600, num_hidden_layers=2, max_position_embeddings=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model_dir = os.path.join(root, "model")
    model_dir_lib.save_model_dir(AlbertPretrainer(config), model_dir,
                                 tasks_testdata.spm_model_path())
    glue = tasks_testdata.write_glue(os.path.join(root, "glue"))
    squad1, _ = tasks_testdata.write_squad(os.path.join(root, "v1.json"))
    squad2, _ = tasks_testdata.write_squad(os.path.join(root, "v2.json"), True)
    race = tasks_testdata.write_race(os.path.join(root, "RACE"))
    records = fixtures_pretraining.write_records(os.path.join(root, "r.tfrecord"), 16)
    common = dict(init_checkpoint=model_dir, do_train=True, train_batch_size=2,
                  train_step=2, warmup_step=1, learning_rate=1e-2,
                  save_checkpoints_steps=2, dropout=0.0)
    squad = dict(max_seq_length=48, doc_stride=16, max_query_length=12)
    jobs = {
        "mrpc": lambda out, s: finetuning_jobs.run_classifier(ClassifierOptions(
            task_name="mrpc", data_dir=glue["mrpc"], output_dir=out,
            max_seq_length=24, **common), s),
        "sts-b": lambda out, s: finetuning_jobs.run_classifier(ClassifierOptions(
            task_name="sts-b", data_dir=glue["sts-b"], output_dir=out,
            max_seq_length=24, **common), s),
        "squad_v1.1": lambda out, s: finetuning_jobs.run_squad(SquadOptions(
            train_file=squad1, output_dir=out, **squad, **common), s),
        "squad_v2.0": lambda out, s: finetuning_jobs.run_squad(SquadOptions(
            train_file=squad2, version_2_with_negative=True, output_dir=out,
            **squad, **common), s),
        "race": lambda out, s: finetuning_jobs.run_race(RaceOptions(
            data_dir=race, output_dir=out, max_seq_length=40,
            max_qa_length=16, **common), s),
        "pretraining": lambda out, s: pretraining.run_pretraining(
            fixtures_pretraining.options(records, out, train_batch_size=8,
                                         num_train_steps=2), s),
    }
    strategies = {"one": tf.distribute.OneDeviceStrategy("/cpu:0"),
                  "mirrored": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])}
    report = {}
    for job, run in jobs.items():
        tensors = {}
        for name, strategy in strategies.items():
            out = os.path.join(root, job, name)
            run(out, strategy)
            reader = tf.train.load_checkpoint(os.path.join(out, "ckpt-2"))
            tensors[name] = {k: reader.get_tensor(k)
                             for k in reader.get_variable_to_shape_map()
                             if reader.get_variable_to_dtype_map()[k].is_floating}
        one, mirrored = tensors["one"], tensors["mirrored"]
        slots = [k for k in one if k.startswith("optimizer/")]
        report[job] = {
            "same_keys": sorted(one) == sorted(mirrored),
            "num_slots": len(slots),
            "max_diff": max(float(np.max(np.abs(one[k] - mirrored[k])))
                            for k in one),
            "max_slot": max(float(np.max(np.abs(one[k]))) for k in slots),
            # Summed twice over 2 replicas, moments would be 2x (m), 4x (v).
            "slot_ratio": sum(float(np.sum(np.abs(mirrored[k]))) for k in slots)
                          / sum(float(np.sum(np.abs(one[k]))) for k in slots),
        }
    print(json.dumps(report))
""")


@pytest.mark.slow
def test_two_mirrored_replicas_equal_one_device_for_every_job(tmp_path):
    """Weights and optimizer slots after 2 steps, per job: the gradients are
    reduced across replicas exactly once (summing twice doubles Adam's first
    moments)."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)], cwd=REPO,
        capture_output=True, text=True, timeout=900,
        env=dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="",
                 TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(report) == ["mrpc", "pretraining", "race", "squad_v1.1",
                              "squad_v2.0", "sts-b"]
    for job, result in report.items():
        assert result["same_keys"], job
        assert result["num_slots"] > 0 and result["max_slot"] > 0, job
        # Float tolerance: the replica sums add in another order.
        assert result["max_diff"] < 1e-4, (job, result)
        assert abs(result["slot_ratio"] - 1.0) < 1e-3, (job, result)


@pytest.fixture
def healthy_run(short_pretraining_run):
    """Records and a finished 4-step run (`ckpt-2`, `ckpt-4`; not to write
    to), made once per session."""
    assert tf.train.latest_checkpoint(short_pretraining_run.out).endswith(
        "ckpt-4")
    return short_pretraining_run.data, short_pretraining_run.out


@pytest.fixture
def healthy_copy(healthy_run, tmp_path):
    """`healthy_run`'s records and a copy of its output folder to run on."""
    data, out = healthy_run
    copy = str(tmp_path / "out")
    shutil.copytree(out, copy)
    return data, copy


def _all_finite(path):
    reader = tf.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    return all(np.all(np.isfinite(reader.get_tensor(k)))
               for k in dtypes if dtypes[k].is_floating)


def test_diverging_resumed_run_stops_and_keeps_the_good_checkpoints(
        healthy_copy):
    data, out = healthy_copy
    before = sorted(os.listdir(out))
    with pytest.raises(TrainingDivergedError,
                       match=r"Training diverged at step \d+: .*ckpt-4, is kept"):
        pretraining.run_pretraining(fixtures_pretraining.options(
            data, out, num_train_steps=40, learning_rate=1e6,
            keep_checkpoint_max=2))
    assert sorted(os.listdir(out)) == before
    assert tf.train.latest_checkpoint(out).endswith("ckpt-4")
    for name in ("ckpt-2", "ckpt-4"):
        assert _all_finite(os.path.join(out, name)), name


@pytest.mark.slow
def test_diverging_cli_run_says_one_line_and_exits_nonzero(healthy_copy):
    data, out = healthy_copy
    config = os.path.join(out, "albert_config.json")
    done = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_pretraining",
         f"--input_file={data}", f"--output_dir={out}",
         f"--albert_config_file={config}", "--train_batch_size=8",
         f"--max_seq_length={fixtures_pretraining.L}",
         f"--max_predictions_per_seq={fixtures_pretraining.P}",
         "--num_train_steps=40", "--num_warmup_steps=1",
         "--learning_rate=1e6", "--save_checkpoints_steps=2",
         "--iterations_per_loop=2", "--keep_checkpoint_max=2"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining: error: Training diverged at step")
    assert "Traceback" not in done.stderr
    assert tf.train.latest_checkpoint(out).endswith("ckpt-4")


def test_resuming_with_another_config_is_refused_with_the_difference(
        healthy_copy):
    data, out = healthy_copy
    saved = open(os.path.join(out, "albert_config.json")).read()
    other = dict(fixtures_pretraining.TINY, num_hidden_layers=6)
    from albert_tf import AlbertConfig

    with pytest.raises(ValueError, match=r"num_hidden_layers: 2 saved, 6 now"):
        pretraining.run_pretraining(fixtures_pretraining.options(
            data, out, num_train_steps=6, config=AlbertConfig.from_dict(other)))
    assert open(os.path.join(out, "albert_config.json")).read() == saved


def test_evaluation_only_run_with_a_relative_output_dir(tmp_path, monkeypatch):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 40)
    monkeypatch.chdir(tmp_path)
    pretraining.run_pretraining(fixtures_pretraining.options(data, "pt/evalrel"))
    report = pretraining.run_pretraining(fixtures_pretraining.options(
        data, "pt/evalrel", do_train=False, do_eval=True))
    assert [r["checkpoint"] for r in report["eval_results"]] == [
        "ckpt-2", "ckpt-4"]
    assert os.path.exists("pt/evalrel/best/model.ckpt.index")


def test_eval_batch_larger_than_the_eval_set_is_refused(tmp_path):
    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 40)
    small = fixtures_pretraining.write_records(str(tmp_path / "eval.tfrecord"), 5)
    with pytest.raises(ValueError, match="fewer than one batch of "
                       "eval_batch_size=8"):
        pretraining.run_pretraining(fixtures_pretraining.options(
            data, str(tmp_path / "out"), eval_input_file=small, do_eval=True))
    # Refused before training: no checkpoint was written.
    assert not os.path.exists(str(tmp_path / "out" / "checkpoint"))
    assert not os.path.exists(str(tmp_path / "out" / "best"))


def test_a_full_disk_while_saving_is_one_line_and_keeps_the_checkpoints(
        healthy_run, tmp_path):
    """A real full file system (a small tmpfs): the first checkpoint fits,
    the next does not."""
    data, probe = healthy_run
    size = sum(os.path.getsize(os.path.join(probe, f))
               for f in os.listdir(probe) if f.startswith("ckpt-2"))
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o",
                           f"size={int(size * 1.6) + 64 * 1024}", "tmpfs",
                           str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip("cannot mount a small file system here")
    try:
        out = str(mount / "run")
        with pytest.raises(OSError, match=r"Could not write the checkpoint of "
                           r"step \d+ in .*ckpt-2, is kept"):
            pretraining.run_pretraining(fixtures_pretraining.options(
                data, out, num_train_steps=8, keep_checkpoint_max=5))
        assert tf.train.latest_checkpoint(out).endswith("ckpt-2")
        assert _all_finite(os.path.join(out, "ckpt-2"))
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def _verdict(chance, start, history):
    """`baselines.chance_verdict` of a task whose chance loss is `chance`."""
    return baselines.chance_verdict(history, start, chance, "--warmup_step")


def test_a_final_loss_at_chance_is_a_warning_in_the_summary(caplog):
    verdict = _verdict(0.6931, 0, [(100, 0.7012), (200, 0.6925)])
    assert verdict["at_chance"] is True and verdict["chance_loss"] == 0.6931
    assert verdict["warning"] == (
        "The training loss ended at 0.6925 (step 200), not 2% below chance "
        "(0.6931, the loss of a model that ignores its input): the model has "
        "not learned. Try a lower --learning_rate, a longer warm-up "
        "(--warmup_step) or another --seed.")
    assert verdict["warning"] in caplog.text
    # Below chance by more than the tolerance: it learned.
    assert _verdict(0.6931, 0, [(100, 0.69), (200, 0.60)]) == {
        "at_chance": False}


def test_without_a_chance_loss_the_first_loss_of_a_fresh_run_is_the_reference():
    stuck = _verdict(None, 0, [(10, 10.31), (20, 10.30), (30, 10.29)])
    assert stuck["at_chance"] is True
    assert "not 2% below the first logged loss (10.31 at step 10)" in (
        stuck["warning"])
    assert _verdict(None, 0, [(10, 10.31), (20, 7.2)]) == {"at_chance": False}
    # A resumed run, one loop, or no loop at all: nothing to compare.
    assert _verdict(None, 10, [(20, 10.3), (30, 10.3)]) == {}
    assert _verdict(None, 0, [(10, 10.3)]) == {}
    assert _verdict(0.6931, 0, []) == {}
    # Training labels all alike: nothing to learn, no verdict.
    assert _verdict(0.0, 0, [(10, 0.01), (20, 0.0)]) == {}
