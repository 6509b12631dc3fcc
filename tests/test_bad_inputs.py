"""Bad input through the programs, as a user types them: one table.

Each case runs one command line (`python -m ...`) on one bad input and
checks that the program ends with exit status 1 and one line naming the
problem (`PROGRAM: error: ...` last on stderr, no traceback), and that the
files it must not touch are byte for byte as they were.

The cases of the TensorFlow-free data programs run in the default set; those
of the training programs (a TensorFlow start-up each, some a pretraining run
first) are `slow`.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
from typing import Callable
from typing import Tuple

import pytest

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from albert_tf.training import model_dir
from tests import fixtures_pretraining
from tests import tasks_testdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, P = fixtures_pretraining.L, fixtures_pretraining.P


def _python(*args, cwd):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _digest(path):
    """Hashes of every file under `path` (or of the file)."""
    if os.path.isfile(path):
        return {path: hashlib.sha256(open(path, "rb").read()).hexdigest()}
    return {os.path.join(d, f): hashlib.sha256(
        open(os.path.join(d, f), "rb").read()).hexdigest()
        for d, _, files in os.walk(path) for f in files}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A workspace: corpus, vocabulary, records and task folders; the healthy
    pretraining run and the fine-tuning model directory are made by the first
    case that needs them (`_healthy_run`, `_model_dir`)."""
    root = str(tmp_path_factory.mktemp("bad"))
    w = {"root": root, "spm": tasks_testdata.spm_model_path()}
    w["corpus"] = os.path.join(root, "corpus.txt")
    with open(w["corpus"], "w") as f:
        f.write("The cat sat on the mat.\nIt was warm.\n\nA dog ran.\nFast.\n")
    w["records"] = fixtures_pretraining.write_records(
        os.path.join(root, "train.tfrecord"), 40)
    w["small"] = fixtures_pretraining.write_records(
        os.path.join(root, "eval.tfrecord"), 4)
    config = dict(fixtures_pretraining.TINY, vocab_size=1000)
    w["config"] = os.path.join(root, "albert_config.json")
    AlbertConfig.from_dict(config).to_json_file(w["config"])
    w["glue"] = tasks_testdata.write_glue(os.path.join(root, "glue"))
    os.remove(os.path.join(w["glue"]["mrpc"], "test.tsv"))
    return w


def _healthy_run(w):
    """The output folder of a healthy 4-step pretraining run (made once)."""
    run = os.path.join(w["root"], "run")
    if not os.path.exists(os.path.join(run, "ckpt-4.index")):
        done = _python(*_pretrain(w, run), cwd=w["root"])
        assert done.returncode == 0, done.stderr[-2000:]
    return run


def _model_dir(w):
    """A fine-tuning model directory (a tiny random pretrainer, made once)."""
    model = os.path.join(w["root"], "model")
    if not os.path.exists(model):
        model_dir.save_model_dir(AlbertPretrainer(AlbertConfig.from_preset(
            "tiny", vocab_size=600, num_hidden_layers=2,
            max_position_embeddings=64)), model, w["spm"])
    return model


def _pretrain(w, out, *extra, input_file=None, config=None):
    return ["albert_tf.run_pretraining",
            f"--input_file={input_file or w['records']}",
            f"--output_dir={out}", f"--albert_config_file={config or w['config']}",
            "--train_batch_size=8", "--eval_batch_size=8",
            f"--max_seq_length={L}", f"--max_predictions_per_seq={P}",
            "--num_train_steps=4", "--num_warmup_steps=1",
            "--learning_rate=1e-2", "--save_checkpoints_steps=2",
            "--iterations_per_loop=2", "--keep_checkpoint_max=2", *extra]


def _write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def _truncated_records(w):
    path = os.path.join(w["root"], "cut", "train.tfrecord")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = open(w["records"], "rb").read()
    return _write(path, data[:len(data) * 2 // 3])


def _other_config(w, **change):
    """A config file like the run's with `change` (written as JSON, so an
    impossible value reaches the program)."""
    path = os.path.join(w["root"], "other_%s.json" % "_".join(change))
    with open(w["config"]) as f:
        values = json.load(f)
    values.update(change)
    _write(path, json.dumps(values))
    return path


@dataclasses.dataclass
class Case:
    name: str
    # ws -> (command arguments, files that must stay as they are)
    setup: Callable[[dict], Tuple[list, list]]
    message: str  # regex the last stderr line must match
    # False for the TensorFlow-free data programs (the default set).
    slow: bool = True


CASES = [
    Case("binary corpus", lambda w: ([
        "data_prep.create_pretraining_data",
        "--input_file="
        f"{_write(os.path.join(w['root'], 'bin.txt'), bytes(range(256)) * 40)}",
        f"--output_file={w['root']}/out/bin.tfrecord",
        f"--spm_model_file={w['spm']}"], []),
        r"create_pretraining_data: error: .*(not text|binary|no input|No input)",
        slow=False),
    Case("output is the input", lambda w: ([
        "data_prep.create_pretraining_data", f"--input_file={w['corpus']}",
        f"--output_file={w['corpus']}", f"--spm_model_file={w['spm']}"],
        [w["corpus"]]), r"create_pretraining_data: error: .*also an input",
        slow=False),
    Case("empty corpus", lambda w: ([
        "data_prep.build_vocab",
        f"--input_file={_write(os.path.join(w['root'], 'empty.txt'), '')}",
        f"--model_prefix={w['root']}/empty_vocab", "--vocab_size=100"], []),
        r"build_vocab: error: ", slow=False),
    Case("config with impossible values", lambda w: (_pretrain(
        w, f"{w['root']}/c1",
        config=_other_config(w, num_attention_heads=7)), [_healthy_run(w)]),
        r"run_pretraining: error: .*(hidden_size|num_attention_heads)"),
    Case("truncated Hugging Face config.json", lambda w: ([
        "albert_tf.convert_checkpoint", "--source=huggingface",
        f"--input={_hf_truncated(w)}", f"--output_dir={w['root']}/hf_out"],
        []), r"convert_checkpoint: error: .*config\.json"),
    Case("truncated records", lambda w: (_pretrain(
        w, f"{w['root']}/c2", "--num_train_steps=40",
        input_file=_truncated_records(w)), []),
        r"run_pretraining: error: Training stopped after step \d+ on bad "
        r"input: .*train\.tfrecord: no readable record at byte \d+ of \d+ "
        r".*skip_corrupt_records"),
    Case("records of other flags", lambda w: (_pretrain(
        w, f"{w['root']}/c3", f"--max_predictions_per_seq={P * 2}"), []),
        r"run_pretraining: error: records in .*train\.tfrecord have "
        rf"max_predictions_per_seq={P}, flags say {P * 2}"),
    Case("records of another vocabulary", lambda w: (_pretrain(
        w, f"{w['root']}/c4", config=_other_config(w, vocab_size=100)), []),
        r"run_pretraining: error: records in .* hold token id \d+ .* "
        r"vocab_size is 100"),
    Case("sequence longer than the position table", lambda w: (_pretrain(
        w, f"{w['root']}/c5", config=_other_config(
            w, max_position_embeddings=16)), []),
         r"run_pretraining: error: --max_seq_length=32 is longer than the "
         r"model's max_position_embeddings=16"),
    Case("init_checkpoint of another config", lambda w: (_pretrain(
        w, f"{w['root']}/c6", f"--init_checkpoint={_healthy_run(w)}/ckpt-4",
        config=_other_config(w, embedding_size=32)), [_healthy_run(w)]),
        r"run_pretraining: error: --init_checkpoint=.*ckpt-4: The checkpoint "
        r".*ckpt-4 does not fit the config: variable .* likely config field: "
        r"embedding_size"),
    Case("resume into a run of another config", lambda w: (_pretrain(
        w, _healthy_run(w), "--num_train_steps=6",
        config=_other_config(w, num_hidden_layers=6)), [_healthy_run(w)]),
        r"run_pretraining: error: .*albert_config\.json belongs to the "
        r"checkpoints .*num_hidden_layers: 2 saved, 6 now"),
    Case("eval batch larger than the eval set", lambda w: (_pretrain(
        w, f"{w['root']}/c7", "--do_eval", f"--eval_input_file={w['small']}"),
        []), r"run_pretraining: error: .*fewer than one batch of "
        r"eval_batch_size=8"),
    Case("diverging resumed run", lambda w: (_pretrain(
        w, _copy(_healthy_run(w), f"{w['root']}/c8"), "--num_train_steps=40",
        "--learning_rate=1e6"), [f"{w['root']}/c8"]),
        r"run_pretraining: error: Training diverged at step \d+: .*ckpt-4, "
        r"is kept"),
    Case("predict without test.tsv", lambda w: ([
        "albert_apps.run_classifier", "--task_name=MRPC",
        f"--data_dir={w['glue']['mrpc']}", f"--init_checkpoint={_model_dir(w)}",
        f"--output_dir={w['root']}/mrpc", "--do_train", "--do_predict",
        "--max_seq_length=24", "--train_batch_size=2", "--train_step=2"],
        []), r"run_classifier: error: --data_dir=.*MRPC has no test\.tsv"),
]


def _hf_truncated(w):
    folder = os.path.join(w["root"], "hf")
    os.makedirs(folder, exist_ok=True)
    _write(os.path.join(folder, "config.json"),
           '{"model_type": "albert", "vocab_size": 30000, "hidden_')
    _write(os.path.join(folder, "model.safetensors"), b"\0" * 16)
    return folder


def _copy(source, target):
    if not os.path.exists(target):
        shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.name, marks=pytest.mark.slow if c.slow else ())
    for c in CASES])
def test_bad_input_is_one_line_and_touches_nothing(ws, case):
    args, protected = case.setup(ws)
    before = {}
    for path in protected:
        before.update(_digest(path))
    done = _python(*args, cwd=ws["root"])
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert __import__("re").match(case.message, last), last
    after = {}
    for path in protected:
        after.update(_digest(path))
    # Every file that was there is as it was (new log files may appear).
    assert {path: after.get(path) for path in before} == before


@pytest.mark.slow
def test_predict_without_test_file_fails_before_training(ws):
    """No checkpoint is written: the test file is looked for first."""
    assert not os.path.exists(os.path.join(ws["root"], "mrpc", "checkpoint"))


@pytest.mark.slow
def test_a_glob_over_the_stats_file_skips_it_and_trains(ws):
    """`train.tfrecord*` also matches a sidecar: skipped by name, not read."""
    folder = os.path.join(ws["root"], "glob")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(ws["records"], os.path.join(folder, "train.tfrecord"))
    _write(os.path.join(folder, "train.tfrecord.stats.json"),
           json.dumps({"instances": 40}))
    done = _python(*_pretrain(ws, os.path.join(ws["root"], "g"),
                              input_file=os.path.join(folder, "train.tfrecord*")),
                   cwd=ws["root"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train.tfrecord.stats.json" in done.stderr  # named as skipped


@pytest.mark.slow
def test_skip_corrupt_records_trains_past_a_truncated_file(ws):
    done = _python(*_pretrain(ws, os.path.join(ws["root"], "skip"),
                              "--skip_corrupt_records", "--num_train_steps=12",
                              input_file=_truncated_records(ws)), cwd=ws["root"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skip_corrupt_records" in done.stderr and "skipped the rest" in done.stderr
