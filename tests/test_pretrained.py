import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.convert import pretrained
from albert_tf.convert import weight_set
from albert_tf.convert.pretrained import convert_checkpoint
from albert_tf.convert.pretrained import detect_format
from albert_tf.convert.pretrained import load_pretrained
from albert_tf.convert.pretrained import spm_model_path
from albert_tf.training import model_dir


@pytest.fixture
def saved(tmp_path, random_pretrainer, albert_spm_model):
    """A model of this project saved as a model directory, and the model."""
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    directory = str(tmp_path / "ours")
    model_dir.save_model_dir(model, directory, spm_model_file=albert_spm_model)
    return directory, model


def test_detects_every_format_and_loads_it(tmp_path, saved, assert_same_model):
    ours, model = saved
    assert detect_format(ours) == "albert_tf"
    assert_same_model(model, load_pretrained(ours))
    official = str(tmp_path / "official")
    convert_checkpoint(ours, official, target="tf1")
    assert detect_format(official) == "tf1"
    assert detect_format(os.path.join(official, "model.ckpt-best")) == "tf1"
    # Any source to any target, here official TF1 -> Hugging Face directly.
    hf = str(tmp_path / "hf")
    convert_checkpoint(official, hf, target="huggingface")
    assert detect_format(hf) == "huggingface"
    assert_same_model(model, load_pretrained(hf))
    for directory, name in ((ours, "spm.model"), (official, "30k-clean.model"),
                            (hf, "spiece.model")):
        assert spm_model_path(directory) == os.path.join(directory, name)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No supported model format"):
        detect_format(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError):
        load_pretrained(str(tmp_path / "nowhere"))


def test_output_directory_is_replaced_only_when_asked(tmp_path, saved):
    ours, _ = saved
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty.*--overwrite"):
        convert_checkpoint(ours, str(out), target="huggingface")
    # --overwrite replaces only an earlier conversion, never the user's files.
    with pytest.raises(ValueError, match="keep.txt"):
        convert_checkpoint(ours, str(out), target="huggingface", overwrite=True)
    assert os.listdir(out) == ["keep.txt"]
    (out / "keep.txt").unlink()
    convert_checkpoint(ours, str(out), target="huggingface")
    convert_checkpoint(ours, str(out), target="tf1", overwrite=True)
    assert "model.safetensors" not in os.listdir(out)
    assert "albert_config.json" in os.listdir(out)
    assert sorted(os.listdir(tmp_path)) == ["ours", "out"]


def test_failures_leave_nothing_behind(tmp_path, saved, monkeypatch):
    ours, _ = saved
    from albert_tf.convert import safetensors_io

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors_io, "save_file", fail)
    with pytest.raises(OSError, match="disk full"):
        convert_checkpoint(ours, str(tmp_path / "out"), target="huggingface")
    assert sorted(os.listdir(tmp_path)) == ["ours"]


def test_sharing_ablations_copy_within_this_project_only(
        tmp_path, random_pretrainer, assert_same_model, albert_spm_model):
    model = random_pretrainer(share="attention")
    ours = str(tmp_path / "ours")
    model_dir.save_model_dir(model, ours)
    convert_checkpoint(ours, str(tmp_path / "copy"))
    assert_same_model(model, load_pretrained(str(tmp_path / "copy")))
    with pytest.raises(ValueError, match="share='attention'"):
        convert_checkpoint(ours, str(tmp_path / "hf"), target="huggingface",
                           spm_model_file=albert_spm_model)
    assert not os.path.exists(tmp_path / "hf")


def test_huggingface_target_without_a_vocabulary_is_refused_first(
        tmp_path, random_pretrainer):
    """No tokenizer files would be written: refused before any work."""
    ours = str(tmp_path / "ours")
    model_dir.save_model_dir(random_pretrainer(), ours)
    with pytest.raises(ValueError, match="no SentencePiece model comes with "
                       "--input: pass --spm_model_file") as error:
        convert_checkpoint(ours, str(tmp_path / "hf"), target="huggingface")
    assert "\n" not in str(error.value)
    assert os.listdir(tmp_path) == ["ours"]
    with pytest.raises(FileNotFoundError, match="--spm_model_file=nowhere"):
        convert_checkpoint(ours, str(tmp_path / "hf"), target="huggingface",
                           spm_model_file="nowhere")
    assert os.listdir(tmp_path) == ["ours"]


def test_release_tokenizer_matches_this_projects_preprocessing(
        tmp_path, saved, albert_spm_model):
    import sentencepiece as spm

    from data_prep import text as text_lib

    ours, _ = saved
    official = str(tmp_path / "official")
    convert_checkpoint(ours, official, target="tf1")
    back = str(tmp_path / "back")
    convert_checkpoint(official, back)
    # The release's tokenizer travels unchanged.
    with open(albert_spm_model, "rb") as f:
        release_bytes = f.read()
    with open(spm_model_path(back), "rb") as f:
        assert f.read() == release_bytes

    sp = spm.SentencePieceProcessor(model_file=spm_model_path(back))
    texts = ["Héllo  WORLD, the Café is NAÏVE", "Résumé\tof the   Model"]
    # What the release was trained on: lowercase, accents dropped.
    expected = sp.encode(["hello world, the cafe is naive", "resume of the model"])
    assert sp.encode(texts) != expected  # Preprocessing matters here.
    assert text_lib.tokenize_to_ids(sp, texts) == expected
    graph = text_lib.tokenize_to_ids_graph(
        text_lib.make_graph_tokenizer(release_bytes), tf.constant(texts))
    assert graph.to_list() == expected
    keras_hub = pytest.importorskip("keras_hub")
    tokenizer = keras_hub.models.AlbertTokenizer(proto=spm_model_path(back))
    hub_ids = tokenizer([text_lib.preprocess_text(t) for t in texts])
    assert [np.asarray(ids).tolist() for ids in hub_ids] == expected


def test_report_lists_every_tensor(tmp_path, saved):
    ours, model = saved
    report = convert_checkpoint(ours, str(tmp_path / "hf"), target="huggingface")
    text = (tmp_path / "hf" / weight_set.REPORT_NAME).read_text()
    assert f"Mapped tensors: {len(model.weights)}" in text
    assert "bert/encoder/transformer/group_1/inner_group_1/LayerNorm_1/gamma" in text
    assert len(report.mapped) == len(model.weights)


def _records(folder, do_lower_case, vocabulary=None):
    """Records as the data builders leave them: shards, their statistics
    file (`do_lower_case` in its settings) and, as the main job writes
    it, `vocab.json` naming their vocabulary."""
    import json

    os.makedirs(folder)
    shards = [os.path.join(folder, f"train.tfrecord-0000{i}-of-00002")
              for i in range(2)]
    for shard in shards:
        with open(shard, "wb") as f:
            f.write(b"records")
    with open(os.path.join(folder, "stats.train.tfrecord.json"), "w") as f:
        json.dump({"output_files": shards,
                   "settings": {"do_lower_case": do_lower_case}}, f)
    if vocabulary:
        with open(os.path.join(folder, "vocab.json"), "w") as f:
            json.dump({"model_file": vocabulary}, f)
    return os.path.join(folder, "train.tfrecord-*")


def _run_record(run, settings):
    import json

    os.makedirs(os.path.join(run, "best"))
    with open(os.path.join(run, "albert_run.json"), "w") as f:
        json.dump({"program": "run_pretraining", "settings": settings}, f)


def test_a_runs_records_say_its_vocabulary_and_casing(tmp_path,
                                                      albert_spm_model):
    run = str(tmp_path / "run")
    records = _records(str(tmp_path / "data"), False, albert_spm_model)
    _run_record(run, {"--input_file": records})
    for path in (run, os.path.join(run, "best")):
        found, where = pretrained.run_vocabulary(path)
        assert found == albert_spm_model
        assert "vocab.json" in where and "albert_run.json" in where
        assert pretrained.run_casing(path) == (
            False, "the records' statistics "
            + str(tmp_path / "data" / "stats.train.tfrecord.json"))
    # Statistics of other records, in the same folder, are not read.
    _records(str(tmp_path / "other"), True)
    (tmp_path / "other" / "elsewhere-00000").write_bytes(b"records")
    _run_record(str(tmp_path / "run2"), {
        "--input_file": str(tmp_path / "other" / "elsewhere-*")})
    assert pretrained.run_casing(str(tmp_path / "run2")) == (None, None)
    assert pretrained.run_vocabulary(str(tmp_path / "run2"))[0] is None
    # A folder that is no training run's.
    assert pretrained.run_vocabulary(str(tmp_path / "data")) == (None, None)
