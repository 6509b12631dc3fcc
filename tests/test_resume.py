"""Which quickstart stages a rerun skips (`albert_apps.quickstart.resume`)."""

import dataclasses
import os

from albert_apps.quickstart import downstream
from albert_apps.quickstart import resume
from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages
from data_prep import pipeline


def _touch(path, mtime, text="x"):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.utime(path, (mtime, mtime))


def _task_files(name):
    return downstream.TaskFiles(
        name=name, train=400, dev=1000, documents=90, wanted=[400, 1000],
        short=None, task_dir="/data/task/" + name)


def _corpus(data_dir, tasks=("section", "sentence_order")):
    corpus = stage_results.Corpus(
        documents=10, sentences=30, characters=900, train_documents=9,
        eval_documents=1, downstream_documents=5,
        settings=stages.corpus_settings(None, 1000), source="built-in",
        train_file=os.path.join(data_dir, "train.txt"),
        eval_file=os.path.join(data_dir, "eval.txt"),
        downstream_file=os.path.join(data_dir, "downstream.txt"),
        downstream_every=None, tasks=[_task_files(name) for name in tasks])
    stages.write_json(os.path.join(data_dir, stages.CORPUS_JSON), corpus)
    return corpus


def _vocabulary(data_dir, corpus, requested_size=300):
    return stage_results.Vocabulary(
        requested_size=requested_size, pieces=280,
        model_file=os.path.join(data_dir, "spm.model"),
        vocab_file=os.path.join(data_dir, "spm.vocab"),
        corpus=corpus.settings)


def test_corpus_and_vocabulary_are_reused_only_with_their_settings(tmp_path):
    data_dir = str(tmp_path)
    assert resume.current_corpus(data_dir, None, 1000) is None
    corpus = _corpus(data_dir)
    assert resume.current_corpus(data_dir, None, 1000) == corpus
    assert resume.current_corpus(data_dir, None, 2000) is None
    assert resume.current_corpus(data_dir, str(tmp_path / "mine.txt"),
                                 1000) is None

    info = _vocabulary(data_dir, corpus)
    stages.write_json(os.path.join(data_dir, stages.VOCAB_JSON), info)
    assert resume.current_vocabulary(corpus, data_dir, 300) == info
    assert resume.current_vocabulary(corpus, data_dir, 280) is None
    other = dataclasses.replace(
        corpus, settings=stages.corpus_settings(None, 2000))
    assert resume.current_vocabulary(other, data_dir, 300) is None


def test_a_stage_file_of_another_version_redoes_its_stage(tmp_path):
    """A stage file with the same settings but other fields (an earlier or
    later version of the job wrote it) is neither a crash nor trusted."""
    data_dir = str(tmp_path)
    corpus = _corpus(data_dir)
    path = os.path.join(data_dir, stages.CORPUS_JSON)
    value = stages.read_json(path)
    stages.write_json(path, dict(value, added_later=1))
    assert resume.current_corpus(data_dir, None, 1000) is None
    value.pop("characters")
    stages.write_json(path, value)
    assert resume.current_corpus(data_dir, None, 1000) is None
    # The nested task files too.
    value = stage_results.to_json(corpus)
    value["tasks"][0].pop("wanted")
    stages.write_json(path, value)
    assert resume.current_corpus(data_dir, None, 1000) is None


def test_stage_files_keep_their_format(tmp_path):
    """A stage's JSON file holds its result's fields, nested results as
    objects, and not what only the report shows (`reused`)."""
    data_dir = str(tmp_path)
    corpus = _corpus(data_dir)
    written = stages.read_json(os.path.join(data_dir, stages.CORPUS_JSON))
    assert written["tasks"][1] == {
        "name": "sentence_order", "train": 400, "dev": 1000,
        "documents": 90, "wanted": [400, 1000], "short": None,
        "task_dir": "/data/task/sentence_order"}
    assert stage_results.Corpus.from_json(written) == corpus
    exported = stage_results.ExportedModels(
        checkpoint_step=20, paths={"serving": "/export/albert/1"},
        version=1, export_dir="/export", reused=True)
    stages.write_json(os.path.join(data_dir, stages.EXPORT_JSON), exported)
    assert stages.read_json(os.path.join(data_dir, stages.EXPORT_JSON)) == {
        "checkpoint_step": 20, "paths": {"serving": "/export/albert/1"},
        "version": 1, "export_dir": "/export"}
    assert exported.to_json()["reused"] is True


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
                      stage_results.Baseline(
                          masked_lm_accuracy=0.05, token_id=5, piece="a",
                          masked_tokens=70, records_mtime=float(mtime)))


def test_records_are_reused_when_newer_than_their_inputs(tmp_path):
    data_dir = str(tmp_path)
    corpus = _corpus(data_dir)
    vocabulary = _vocabulary(data_dir, corpus)
    for path in (corpus.train_file, corpus.eval_file,
                 vocabulary.model_file):
        _touch(path, 100)
    settings = dict(max_seq_length=32, max_predictions_per_seq=5,
                    dupe_factor=2)
    assert resume.current_records(corpus, vocabulary, data_dir,
                                  **settings) is None
    _records(data_dir, corpus, vocabulary)
    records = resume.current_records(corpus, vocabulary, data_dir, **settings)
    assert records.train.instances == 7
    assert records.eval.path == os.path.join(data_dir, "eval.tfrecord")
    assert records.baseline.piece == "a"

    # Other settings, a newer vocabulary, or eval records newer than their
    # baseline: rebuild.
    for changed in (dict(dupe_factor=3), dict(max_seq_length=64),
                    dict(max_predictions_per_seq=6)):
        assert resume.current_records(corpus, vocabulary, data_dir,
                                      **dict(settings, **changed)) is None
    os.utime(vocabulary.model_file, (300, 300))
    assert resume.current_records(corpus, vocabulary, data_dir,
                                  **settings) is None
    _records(data_dir, corpus, vocabulary, mtime=400)
    os.utime(stages.record_path(data_dir, "eval"), (500, 500))
    assert resume.current_records(corpus, vocabulary, data_dir,
                                  **settings) is None


def test_export_is_reused_while_it_holds_the_best_checkpoint(tmp_path):
    out = str(tmp_path)
    trained = _trained(20)
    assert resume.current_export(trained, out) is None
    serving = tmp_path / "export" / "albert" / "1"
    serving.mkdir(parents=True)
    paths = {"serving": str(serving),
             "keras": str(tmp_path / "export" / "albert_encoder" / "1" /
                          "encoder.keras")}
    stages.write_json(os.path.join(out, stages.EXPORT_JSON),
                      {"checkpoint_step": 20, "paths": paths, "version": 1,
                       "export_dir": str(tmp_path / "export")})
    exported = resume.current_export(trained, out)
    assert exported.reused and exported.version == 1
    assert exported.paths == paths
    assert resume.current_export(_trained(30), out) is None
    serving.rmdir()
    assert resume.current_export(trained, out) is None


def _trained(best_step):
    row = {"checkpoint": "ckpt-%d" % best_step, "global_step": best_step}
    return stage_results.PretrainingRun(
        output_dir="/pretrain", preset="tiny", parameters=1, steps=30,
        resumed_from_step=0, dtype="float32", num_train_steps=30,
        stopped_by_time_budget=False, seconds_this_run=1.0,
        train_batch_size=8, checkpoints=[row["checkpoint"]], last_eval=row,
        eval_curve=[row], best_eval=row, best_dir="/pretrain/best",
        eval_results="/pretrain/eval_results.txt")


def _exported(version):
    return stage_results.ExportedModels(
        checkpoint_step=20, paths={}, version=version, export_dir="/export")


def _task_result(name, classifier):
    """A `TaskResult` as `finetune.json` holds it (the fields resume reads
    are the name and the classifier)."""
    return stage_results.TaskResult(
        name=name, measures="", labels=["a", "b"], train_examples=4,
        dev_examples=4, short=None, runs={}, pretrained=0.5,
        pretrained_ci95=[0.0, 1.0], pretrained_seed_range=[0.5, 0.5],
        random_init=0.5, random_init_ci95=[0.0, 1.0],
        random_init_seed_range=[0.5, 0.5], margin=0.0,
        margin_ci95=[-1.0, 1.0], verdict="can't tell (within noise)",
        max_seq_length=32, classifier=classifier)


def test_finetuning_is_reused_for_its_export_and_settings(tmp_path):
    from albert_apps.quickstart import stages_downstream

    out = str(tmp_path)
    exported = _exported(2)
    corpus = _corpus(str(tmp_path))
    assert resume.current_finetune(exported, corpus, out) is None
    classifiers = [tmp_path / "export" / ("albert_" + t.name) / "1"
                   for t in corpus.tasks]
    for folder in classifiers:
        folder.mkdir(parents=True)
    (tmp_path / "finetune").mkdir()
    recorded = stage_results.DownstreamResults(
        encoder_version=2, method=stages_downstream.PROBE_METHOD,
        tasks=[_task_result(t.name, str(folder))
               for t, folder in zip(corpus.tasks, classifiers)],
        encoders={}, skipped={},
        settings={"seeds": [0, 1], "num_train_steps": 50,
                  "tasks": ["section", "sentence_order"]})
    stages.write_json(
        os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON),
        recorded)
    again = resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                    num_train_steps=50)
    assert again.reused
    assert again == dataclasses.replace(recorded, reused=True)
    assert again.tasks[1].classifier == str(classifiers[1])
    # Another encoder export, other seeds, steps or tasks: fine-tune again.
    recorded = stages.read_json(
        os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON))
    stages.write_json(os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON),
                      dict(recorded, method="fine-tuning runs"))
    assert resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                   num_train_steps=50) is None
    stages.write_json(os.path.join(out, "finetune", stages_downstream.FINETUNE_JSON),
                      recorded)
    assert resume.current_finetune(_exported(3), corpus, out, seeds=(0, 1),
                                   num_train_steps=50) is None
    assert resume.current_finetune(exported, corpus, out, seeds=(0,),
                                   num_train_steps=50) is None
    assert resume.current_finetune(exported, corpus, out, seeds=(0, 1),
                                   num_train_steps=60) is None
    assert resume.current_finetune(
        exported, dataclasses.replace(corpus, tasks=corpus.tasks[1:]), out,
        seeds=(0, 1), num_train_steps=50) is None
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
