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
    from albert_tf.tasks import finetuning_jobs
    from albert_tf.tasks.options import ClassifierOptions
    from export import export_saved_model
    from export.options import ExportOptions

    run, _ = pretraining_run
    best = os.path.join(run, "best")
    data_dir = tasks_testdata.write_glue(str(tmp_path / "glue"))["mrpc"]
    _, report = finetuning_jobs.run_classifier(ClassifierOptions(
        task_name="MRPC", data_dir=data_dir, init_checkpoint=best,
        output_dir=str(tmp_path / "mrpc"), do_train=True, do_eval=True,
        max_seq_length=SEQ, train_batch_size=2, eval_batch_size=2,
        train_step=1, warmup_step=0, learning_rate=1e-4))
    assert report["train"]["step"] == 1
    assert "majority_accuracy" in report["best"]
    # The export program's options with the folder alone: its config and
    # vocabulary are found there.
    paths = export_saved_model.export(ExportOptions(
        checkpoint=best, export_dir=str(tmp_path / "serving"),
        max_seq_length=SEQ))
    assert os.path.isdir(paths["serving"])
    assert np.isfinite(report["best"]["accuracy"])


def _stats(folder, outputs, vocabulary=None, digest=None):
    """A statistics file as `create_pretraining_data` leaves it."""
    import hashlib

    record = None
    if vocabulary:
        with open(vocabulary, "rb") as f:
            record = {"spm_model_file": vocabulary,
                      "sha256": digest or hashlib.sha256(f.read()).hexdigest()}
    with open(os.path.join(folder, "stats.train.tfrecord.json"), "w") as f:
        json.dump({"output_files": outputs, "vocabulary": record}, f)


def test_the_records_vocabulary_is_taken_by_its_recorded_content(
        tmp_path, spm_model_path):
    from albert_tf.training import model_files

    data = tmp_path / "data"
    data.mkdir()
    shard = str(data / "train.tfrecord")
    open(shard, "wb").close()
    _stats(str(data), [shard], spm_model_path)
    assert model_files.records_vocabulary([shard]) == (
        spm_model_path, str(data / "stats.train.tfrecord.json"))
    # The file at the recorded path changed since the records were built:
    # not theirs.
    _stats(str(data), [shard], spm_model_path, digest="0" * 64)
    assert model_files.records_vocabulary([shard]) == (None, None)
    # Statistics of other records in the same folder are not read.
    _stats(str(data), [str(data / "other.tfrecord")], spm_model_path)
    assert model_files.records_vocabulary([shard]) == (None, None)
    # The main job's vocab.json beside its records.
    with open(data / "vocab.json", "w") as f:
        json.dump({"model_file": spm_model_path}, f)
    assert model_files.records_vocabulary([shard])[0] == spm_model_path


def test_a_spm_model_file_that_is_not_this_models_vocabulary_is_refused(
        tmp_path, spm_model_path):
    from albert_tf.training import pretraining
    from tests import fixtures_pretraining

    data = fixtures_pretraining.write_records(str(tmp_path / "data.tfrecord"), 8)
    out = str(tmp_path / "out")
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("not a vocabulary\n")
    for path, message in ((str(not_a_model), "is not a SentencePiece model"),
                          (str(tmp_path), "names no file")):
        task = pretraining.PretrainingTask(fixtures_pretraining.options(
            data, out, spm_model_file=path))
        with pytest.raises(ValueError, match=message):
            task.vocabulary()
    # More pieces than the model's embeddings: another model's vocabulary.
    from albert_tf import AlbertConfig

    small = AlbertConfig.from_dict(dict(fixtures_pretraining.TINY, vocab_size=50))
    task = pretraining.PretrainingTask(fixtures_pretraining.options(
        data, out, config=small, spm_model_file=spm_model_path))
    with pytest.raises(ValueError, match="not this model's vocabulary"):
        task.vocabulary()
    assert not os.path.exists(out)
