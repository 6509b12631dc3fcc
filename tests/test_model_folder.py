"""From training to serving without guessing: a pretraining run's `best/`
and its folder are complete model folders (config, checkpoint, the records'
vocabulary), taken with no other flag by `load_pretrained`, conversion and
the fine-tuning programs, and exported with the files inside them."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests import speed_plugin
from tests import tasks_testdata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 32


def _config(path, vocab_size):
    from albert_tf import AlbertConfig

    config = AlbertConfig.from_preset("tiny", vocab_size=vocab_size,
                                      num_hidden_layers=1,
                                      max_position_embeddings=SEQ)
    config.to_json_file(path)
    return path


@pytest.fixture(scope="module")
def pretraining_run(tmp_path_factory, corpus_files, spm_model_path):
    """A 2-step run of `python -m albert_tf.run_pretraining` (a fresh
    process, as the README runs it) on records `create_pretraining_data`
    built from the corpus with `spm_model_path`; no --spm_model_file."""
    from data_prep import pipeline
    from data_prep.instances import InstanceOptions

    root = tmp_path_factory.mktemp("model_folder")
    records = str(root / "data" / "train.tfrecord")
    pipeline.create_pretraining_data(
        corpus_files, records, spm_model_path,
        options=InstanceOptions(max_seq_length=SEQ,
                                max_predictions_per_seq=5),
        dupe_factor=2)
    config = _config(str(root / "albert_config.json"), 512)
    run = str(root / "run")
    done = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_pretraining",
         f"--input_file={records}*", f"--output_dir={run}",
         f"--albert_config_file={config}", "--train_batch_size=8",
         f"--max_seq_length={SEQ}", "--max_predictions_per_seq=5",
         "--num_train_steps=2", "--num_warmup_steps=1",
         "--save_checkpoints_steps=2", "--do_eval", "--eval_batch_size=8",
         "--max_eval_steps=2", "--learning_rate=1e-3"],
        cwd=REPO, env=speed_plugin.user_environment(), capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return run, done.stderr


@pytest.mark.slow
def test_best_and_the_run_folder_hold_the_records_vocabulary(
        pretraining_run, spm_model_path):
    run, log = pretraining_run
    with open(spm_model_path, "rb") as f:
        vocabulary = f.read()
    for folder in (run, os.path.join(run, "best")):
        with open(os.path.join(folder, "spm.model"), "rb") as f:
            assert f.read() == vocabulary, folder
        assert os.path.exists(os.path.join(folder, "albert_config.json"))
    assert "stats.train.tfrecord.json" in log and "complete model" in log
    # Its evaluation is judged against its baselines, in the log.
    assert "against baselines: masked_lm_accuracy" in log
    # The run record fingerprints the vocabulary: a resumed run on another
    # one under the same name is refused.
    with open(os.path.join(run, "albert_run.json")) as f:
        assert "--spm_model_file (content)" in json.load(f)["settings"]


@pytest.mark.slow
def test_the_loaders_and_conversion_take_it_with_no_other_flag(
        pretraining_run, tmp_path):
    from albert_tf.convert import pretrained

    run, _ = pretraining_run
    best = os.path.join(run, "best")
    assert pretrained.spm_model_path(best) == os.path.join(best, "spm.model")
    assert pretrained.spm_model_path(run) == os.path.join(run, "spm.model")
    model = pretrained.load_pretrained(best)
    assert model.config.max_position_embeddings == SEQ
    report = pretrained.convert_checkpoint(best, str(tmp_path / "hf"),
                                           target="huggingface")
    assert report is not None
    assert os.path.exists(tmp_path / "hf" / "tokenizer.json")
    assert os.path.exists(tmp_path / "hf" / "spiece.model")


@pytest.mark.slow
def test_finetuning_and_export_take_it(pretraining_run, tmp_path):
    from albert_tf.tasks import finetune_jobs
    from albert_tf.tasks.options import ClassifierOptions
    from export import pretrained_export

    run, _ = pretraining_run
    best = os.path.join(run, "best")
    data_dir = tasks_testdata.write_glue(str(tmp_path / "glue"))["mrpc"]
    _, report = finetune_jobs.run_classifier(ClassifierOptions(
        task_name="MRPC", data_dir=data_dir, init_checkpoint=best,
        output_dir=str(tmp_path / "mrpc"), do_train=True, do_eval=True,
        max_seq_length=SEQ, train_batch_size=2, eval_batch_size=2,
        train_step=1, warmup_step=0, learning_rate=1e-4))
    assert report["train"]["step"] == 1
    assert "majority_accuracy" in report["best"]
    paths = pretrained_export.export_from_checkpoint(
        best, os.path.join(best, "albert_config.json"),
        os.path.join(best, "spm.model"), str(tmp_path / "serving"),
        max_seq_length=SEQ)
    assert os.path.isdir(paths["serving"])
    assert np.isfinite(report["best"]["accuracy"])
