"""Which quickstart stages a rerun skips (`albert_apps.quickstart.resume`)."""

import os

from albert_apps.quickstart import resume
from albert_apps.quickstart import stages
from data_prep import pipeline


def _touch(path, mtime, text="x"):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.utime(path, (mtime, mtime))


def _corpus(data_dir):
    corpus = {"settings": stages.corpus_settings(None, 1000),
              "train_file": os.path.join(data_dir, "train.txt"),
              "eval_file": os.path.join(data_dir, "eval.txt")}
    stages.write_json(os.path.join(data_dir, stages.CORPUS_JSON), corpus)
    return corpus


def test_corpus_and_vocabulary_are_reused_only_with_their_settings(tmp_path):
    data_dir = str(tmp_path)
    assert resume.current_corpus(data_dir, None, 1000) is None
    corpus = _corpus(data_dir)
    assert resume.current_corpus(data_dir, None, 1000) == corpus
    assert resume.current_corpus(data_dir, None, 2000) is None
    assert resume.current_corpus(data_dir, str(tmp_path / "mine.txt"),
                                 1000) is None

    info = {"requested_size": 300, "corpus": corpus["settings"]}
    stages.write_json(os.path.join(data_dir, stages.VOCAB_JSON), info)
    assert resume.current_vocabulary(corpus, data_dir, 300) == info
    assert resume.current_vocabulary(corpus, data_dir, 280) is None
    other = dict(corpus, settings=stages.corpus_settings(None, 2000))
    assert resume.current_vocabulary(other, data_dir, 300) is None


def _records(data_dir, corpus, vocabulary, mtime=200):
    for split, dupes in (("train", 2), ("eval", stages.EVAL_DUPE_FACTOR)):
        path = stages.record_path(data_dir, split)
        _touch(path, mtime)
        stats = {"instances": 7, "settings": {
            "max_seq_length": 32, "max_predictions_per_seq": 5,
            "dupe_factor": dupes}}
        stages.write_json(pipeline.stats_path(path), stats)
        os.utime(pipeline.stats_path(path), (mtime, mtime))
    stages.write_json(os.path.join(data_dir, stages.BASELINE_JSON),
                      {"records_mtime": float(mtime), "piece": "a"})


def test_records_are_reused_when_newer_than_their_inputs(tmp_path):
    data_dir = str(tmp_path)
    corpus = _corpus(data_dir)
    vocabulary = {"model_file": os.path.join(data_dir, "spm.model")}
    for path in (corpus["train_file"], corpus["eval_file"],
                 vocabulary["model_file"]):
        _touch(path, 100)
    settings = dict(max_seq_length=32, max_predictions_per_seq=5,
                    dupe_factor=2)
    assert resume.current_records(corpus, vocabulary, data_dir,
                                  **settings) is None
    _records(data_dir, corpus, vocabulary)
    records = resume.current_records(corpus, vocabulary, data_dir, **settings)
    assert records["train"]["instances"] == 7
    assert records["eval"]["path"] == os.path.join(data_dir, "eval.tfrecord")
    assert records["baseline"]["piece"] == "a"

    # Other settings, a newer vocabulary, or eval records newer than their
    # baseline: rebuild.
    for changed in (dict(dupe_factor=3), dict(max_seq_length=64),
                    dict(max_predictions_per_seq=6)):
        assert resume.current_records(corpus, vocabulary, data_dir,
                                      **dict(settings, **changed)) is None
    os.utime(vocabulary["model_file"], (300, 300))
    assert resume.current_records(corpus, vocabulary, data_dir,
                                  **settings) is None
    _records(data_dir, corpus, vocabulary, mtime=400)
    os.utime(stages.record_path(data_dir, "eval"), (500, 500))
    assert resume.current_records(corpus, vocabulary, data_dir,
                                  **settings) is None


def test_export_is_reused_while_it_holds_the_best_checkpoint(tmp_path):
    out = str(tmp_path)
    trained = {"best_eval": {"global_step": 20}}
    assert resume.current_export(trained, out) is None
    serving = tmp_path / "export" / "albert" / "1"
    serving.mkdir(parents=True)
    paths = {"serving": str(serving),
             "keras": str(tmp_path / "export" / "albert_encoder" / "1" /
                          "encoder.keras")}
    stages.write_json(os.path.join(out, stages.EXPORT_JSON),
                      {"checkpoint_step": 20, "paths": paths, "version": 1})
    exported = resume.current_export(trained, out)
    assert exported["reused"] and exported["version"] == 1
    newer = {"best_eval": {"global_step": 30}}
    assert resume.current_export(newer, out) is None
    serving.rmdir()
    assert resume.current_export(trained, out) is None


def test_finetuning_is_reused_for_its_export_and_settings(tmp_path):
    from albert_apps.quickstart import stages_downstream

    out = str(tmp_path)
    exported = {"version": 2}
    corpus = {"tasks": [{"name": "section"}, {"name": "sentence_order"}]}
    assert resume.current_finetune(exported, corpus, out) is None
    classifiers = [tmp_path / "export" / ("albert_" + t["name"]) / "1"
                   for t in corpus["tasks"]]
    for folder in classifiers:
        folder.mkdir(parents=True)
    (tmp_path / "finetune").mkdir()
    stages.write_json(
        os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON),
        {"encoder_version": 2, "method": stages_downstream.PROBE_METHOD,
         "tasks": [{"name": t["name"], "classifier": str(folder)}
                   for t, folder in zip(corpus["tasks"], classifiers)],
         "settings": {"seeds": [0, 1], "num_train_steps": 50,
                      "tasks": ["section", "sentence_order"]}})
    again = resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                    num_train_steps=50)
    assert again["reused"]
    assert again["tasks"][1]["classifier"] == str(classifiers[1])
    # Another encoder export, other seeds, steps or tasks: fine-tune again.
    recorded = stages.read_json(
        os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON))
    stages.write_json(os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON),
                      dict(recorded, method="fine-tuning runs"))
    assert resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                   num_train_steps=50) is None
    stages.write_json(os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON),
                      recorded)
    assert resume.current_finetune({"version": 3}, corpus, out, seeds=(0, 1),
                                   num_train_steps=50) is None
    assert resume.current_finetune(exported, corpus, out, seeds=(0,),
                                   num_train_steps=50) is None
    assert resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                   num_train_steps=60) is None
    assert resume.current_finetune(
        exported, {"tasks": corpus["tasks"][1:]}, out, seeds=(0, 1),
        num_train_steps=50) is None
    # Sentence order left out now (SOP at chance): the recorded runs had it.
    assert resume.current_finetune(
        exported, corpus, out, seeds=(0, 1), num_train_steps=50,
        skipped={"sentence_order": "at chance"}) is None
    classifiers[0].rmdir()
    assert resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                   num_train_steps=50) is None


def test_sentence_order_is_fine_tuned_only_where_sop_was_learned():
    from albert_apps.quickstart import stages_downstream

    assert stages_downstream.tasks_to_skip("above chance") == {}
    skipped = stages_downstream.tasks_to_skip("at chance")
    assert list(skipped) == ["sentence_order"]
    assert "held-out SOP is at chance" in skipped["sentence_order"]
