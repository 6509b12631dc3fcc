"""The main job in one command, on a tiny budget (about a minute of work)."""

import ast
import dataclasses
import inspect
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_apps import quickstart
from albert_apps.quickstart import data
from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages
from albert_apps.quickstart.__main__ import QuickstartOptions
from data_prep import pipeline
from foundation import safe_io


def test_split_corpus_holds_out_whole_documents(tmp_path):
    docs = [["Doc %d sentence one." % i, "Doc %d sentence two." % i]
            for i in range(45)]
    files = [str(tmp_path / name) for name in ("t.txt", "e.txt", "d.txt")]
    counts = data.split_corpus(iter(docs), *files, eval_every=10,
                               downstream_every=5)
    assert counts["downstream_documents"] == 9
    assert counts["documents"] == 36 and counts["sentences"] == 72
    assert counts["eval_documents"] == 3 and counts["train_documents"] == 33
    held = (tmp_path / "e.txt").read_text().strip().split("\n\n")
    # Documents 4, 9, ... go downstream; the 10th of the others is held out.
    assert held[0].splitlines() == docs[11]
    downstream = (tmp_path / "d.txt").read_text().strip().split("\n\n")
    assert downstream[1].splitlines() == docs[9]

    # A cap on the pretraining text, and downstream documents from
    # elsewhere (the built-in corpus's held-out packages).
    counts = data.split_corpus(
        iter(docs), *files, max_chars=100, downstream_documents=docs[:2])
    assert counts["documents"] == 3 and counts["characters"] >= 100
    assert counts["downstream_documents"] == 2
    assert not any(name.endswith(".tmp") or safe_io.is_temporary(name)
                   for name in os.listdir(tmp_path))


@pytest.mark.slow
def test_builtin_corpus_keeps_the_downstream_packages_out(tmp_path):
    files = [str(tmp_path / name) for name in ("t.txt", "e.txt", "d.txt")]
    held_out = data.builtin_downstream_documents()
    counts = data.split_corpus(
        data.builtin_documents(exclude=held_out), *files,
        max_chars=2_000_000, downstream_documents=held_out)
    assert counts["characters"] >= 2_000_000
    assert counts["downstream_documents"] >= 1300
    pretraining = set(open(files[0]).read().split("\n\n")) | set(
        open(files[1]).read().split("\n\n"))
    held_out = set(open(files[2]).read().split("\n\n"))
    assert not (pretraining & held_out) - {""}


BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def quickstart_uses(source):
    """What a module's source takes of `albert_apps.quickstart`: the
    submodules it imports, and the names it takes from the package (in a
    `from` import, or as an attribute of the imported package)."""
    submodules, names, aliases = set(), set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("albert_apps.quickstart."):
                    submodules.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("albert_apps.quickstart."):
                submodules.add(node.module)
            elif node.module == "albert_apps.quickstart":
                names.update(alias.name for alias in node.names)
            elif node.module == "albert_apps":
                aliases.update(alias.asname or alias.name
                               for alias in node.names
                               if alias.name == "quickstart")
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and
                isinstance(node.value, ast.Name) and node.value.id in aliases):
            names.add(node.attr)
    return submodules, names


def test_uses_of_the_quickstart_are_found():
    source = """
from albert_apps import quickstart
from albert_apps.quickstart import pretrain, stages
import albert_apps.quickstart.data
from albert_apps.quickstart.downstream import load_task
quickstart.run("out")
"""
    submodules, names = quickstart_uses(source)
    assert submodules == {"albert_apps.quickstart.data",
                          "albert_apps.quickstart.downstream"}
    assert names == {"pretrain", "stages", "run"}


def test_benchmarks_use_only_the_public_surface():
    """The benchmarks import `albert_apps.quickstart`'s public names
    (`__all__`), never its submodules: the stages' internals can change."""
    used = {}
    for path in sorted(BENCHMARKS.rglob("*.py")):
        submodules, names = quickstart_uses(path.read_text(encoding="utf-8"))
        outside = submodules | (names - set(quickstart.__all__))
        if outside:
            used[str(path.relative_to(BENCHMARKS))] = sorted(outside)
    assert used == {}
    for name in quickstart.__all__:
        assert getattr(quickstart, name) is not None, name


def test_masked_token_baseline_counts_weighted_ids(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for ids, weights in (([7, 7, 9], [1, 1, 0]), ([9, 7, 0], [1, 1, 0])):
            example = tf.train.Example(features=tf.train.Features(feature={
                "masked_lm_ids": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=ids)),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=weights)),
            }))
            writer.write(example.SerializeToString())
    accuracy, token, total = data.masked_token_baseline(path, 3)
    assert (token, total) == (7, 4) and accuracy == pytest.approx(0.75)


def test_command_line_flags():
    done = subprocess.run(
        [sys.executable, "-m", "albert_apps.quickstart", "--helpfull"],
        capture_output=True, text=True, timeout=300)
    for name in ("output_dir", "input_file", "train_seconds", "vocab_size"):
        assert "--%s:" % name in done.stdout, name
    done = subprocess.run(
        [sys.executable, "-m", "albert_apps.quickstart", "extra"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Unexpected arguments" in done.stderr


def test_program_options_are_the_defaults_of_run():
    """The flags keep the library's defaults (and every flag is an argument
    of `run`)."""
    defaults = {name: p.default for name, p in
                inspect.signature(quickstart.run).parameters.items()}
    for name, value in dataclasses.asdict(QuickstartOptions()).items():
        if name != "output_dir":
            assert defaults[name] == value, name
    assert QuickstartOptions().output_dir == "runs/quickstart"


SMALL = dict(max_corpus_chars=60_000, vocab_size=300, max_seq_length=32,
             num_train_steps=20, train_batch_size=16, dupe_factor=1,
             max_eval_steps=2, finetune_seeds=(0,), finetune_steps=4)


def _mtimes(folder, skip=()):
    return {name: os.path.getmtime(os.path.join(folder, name))
            for name in os.listdir(folder) if name not in skip}


def _check_artifacts_and_report(out, report):
    """Every artifact exists, and the report's numbers."""
    data_dir = os.path.join(out, "data")
    pretrain = os.path.join(out, "pretrain")
    for path in ("corpus.json", "train.txt", "eval.txt", "downstream.txt",
                 "task/section/train.tsv", "task/section/dev.tsv",
                 "task/sentence_order/train.tsv", "task/sentence_order/dev.tsv",
                 "spm.model", "spm.vocab",
                 "train.tfrecord", "eval.tfrecord", "baseline.json",
                 os.path.basename(pipeline.stats_path("train.tfrecord")),
                 os.path.basename(pipeline.stats_path("eval.tfrecord"))):
        assert os.path.getsize(os.path.join(data_dir, path)) > 0, path
    assert tf.train.latest_checkpoint(pretrain).endswith("ckpt-20")
    assert os.path.exists(os.path.join(pretrain, "eval_results.txt"))
    assert os.path.exists(os.path.join(pretrain, "best", "albert_config.json"))
    assert os.listdir(os.path.join(pretrain, "train"))
    paths = report.export.paths
    for key in ("serving", "encoder", "preprocessor"):
        assert os.path.exists(os.path.join(paths[key], "saved_model.pb"))
    assert paths["serving"] == os.path.join(out, "export", "albert", "1")
    for name in ("report.txt", "report.json", "training_curves.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0
    png = tf.io.decode_png(open(os.path.join(out, "training_curves.png"),
                                "rb").read(), channels=3).numpy()
    assert png.shape[0] > 100 and (png < 255).any()
    assert report.plot_points["train_points"] > 0
    assert report.plot_points["eval_points"] > 0

    # Pretraining: every checkpoint (NUM_CHECKPOINTS over the run) evaluated
    # on the held-out records.
    assert stages.NUM_CHECKPOINTS == 5
    assert report.pretrain.steps == 20
    assert report.vocab.pieces <= 300
    assert report.records.train.instances > 0
    results = report.results
    assert [c.step for c in results.curve] == [4, 8, 12, 16, 20]
    assert results.last_checkpoint == "ckpt-20"
    assert set(results.peaks) == {"masked_lm_accuracy",
                                  "sentence_order_accuracy"}
    assert 0 < results.masked_lm_baseline < 1
    assert results.sentence_order_baseline == 0.5
    low, high = results.sentence_order_ci95
    assert low <= results.last_sentence_order_accuracy <= high
    assert results.sentence_order_verdict in (
        "above chance", "at chance", "below chance")

    # Probes of both initializations (every seed of random init), and the
    # exported encoder fine-tuned once.
    finetuned = report.finetune
    assert finetuned.encoders["pretrained"] == paths["encoder"]
    # Sentence order is fine-tuned only where held-out SOP learned it.
    learned = results.sentence_order_verdict == "above chance"
    assert [t.name for t in finetuned.tasks] == (
        ["section", "sentence_order"] if learned else ["section"])
    assert list(finetuned.skipped) == ([] if learned else
                                       ["sentence_order"])
    for task in finetuned.tasks:
        assert [r["seed"] for r in task.runs["pretrained"]] == [None]
        assert [r["seed"] for r in task.runs["random_init"]] == [0]
        assert all(0 <= r["dev_accuracy"] <= 1 and 0 <= r["train_accuracy"] <= 1
                   for runs in task.runs.values() for r in runs)
        # The built-in downstream packages give the full task.
        assert task.dev_examples >= 1000 and task.train_examples == 400
        low, high = task.margin_ci95
        assert low <= task.margin <= high
        assert task.verdict in ("pretraining helped",
                                "can't tell (within noise)",
                                "pretraining hurt")
    # The first task's classifier is fine-tuned, exported and served.
    assert finetuned.tasks[0].classifier == os.path.join(
        out, "export", "albert_section", "1")
    tuned = finetuned.tasks[0].finetuned
    assert tuned["steps"] == 4 and 0 <= tuned["dev_accuracy"] <= 1
    assert all(t.classifier is None for t in finetuned.tasks[1:])

    text = open(os.path.join(out, "report.txt")).read()
    for needle in ("masked-LM accuracy", "SOP accuracy", "tensorboard --logdir",
                   "fill_mask", "random init", "served section",
                   "machine:", paths["serving"],
                   finetuned.tasks[0].classifier, "95% interval"):
        assert needle in text, needle
    saved = json.load(open(os.path.join(out, "report.json")))
    assert saved == stage_results.to_json(report)
    assert saved["finetune"]["tasks"][0]["margin_ci95"] == \
        finetuned.tasks[0].margin_ci95
    # The stage files read back into what the stages returned.
    corpus = stages.read_json(os.path.join(data_dir, stages.CORPUS_JSON))
    assert stage_results.Corpus.from_json(corpus) == report.corpus


_SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text
pairs = json.loads(sys.argv[2])
model = tf.saved_model.load(sys.argv[1])
out = model.signatures["serving_default"](
    text=tf.constant([a for a, _ in pairs]),
    text_b=tf.constant([b for _, b in pairs]))
print(json.dumps({"label": [x.decode() for x in out["label"].numpy()],
                  "probabilities": out["probabilities"].numpy().tolist()}))
"""


def _check_answers_come_from_the_saved_models(report):
    import tensorflow_text  # noqa: F401

    from albert_apps.quickstart import queries

    paths = report.export.paths
    model = tf.saved_model.load(paths["serving"])
    fill = report.queries.fill_mask
    if fill.queries:
        served = model.signatures["fill_mask"](
            text=tf.constant([q["query"] for q in fill.queries]))
        for i, q in enumerate(fill.queries):
            assert q["query"].count("[MASK]") == 1
            top = [p.decode() for p in served["top_k_pieces"].numpy()[i, 0]]
            assert [p for p, _ in q["predictions"]] == top[:5]
            assert [p for p, _ in q["content_predictions"]] == [
                p for p in top if p[1:] and queries.is_content_word(p[1:])
                and p.startswith("\u2581")][:5]
    assert report.queries.model == paths["serving"]

    # The classifier serves raw text in a fresh process, with the answers
    # of the report.
    classifier = report.queries.classifiers[0]
    examples = classifier.examples
    pairs = [[e["first"], e["second"]] for e in examples]
    done = subprocess.run(
        [sys.executable, "-c", _SERVE, report.finetune.tasks[0].classifier,
         json.dumps(pairs)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    served = json.loads(done.stdout.strip().splitlines()[-1])
    assert served["label"] == [e["label"] for e in examples]
    np.testing.assert_allclose(served["probabilities"],
                               [e["probabilities"] for e in examples],
                               atol=1e-4)
    assert 0 <= classifier.accuracy <= 1


@pytest.mark.slow
def test_quickstart_end_to_end_and_resume(tmp_path):
    out = str(tmp_path / "qs")
    report = quickstart.run(out, **SMALL)
    _check_artifacts_and_report(out, report)
    _check_answers_come_from_the_saved_models(report)

    # A second run resumes: nothing is redone, the exports are reused.
    data_dir = os.path.join(out, "data")
    pretrain = os.path.join(out, "pretrain")
    # (Training rewrites its albert_config.json on every start.)
    skip = ("albert_config.json",)
    data_before = _mtimes(data_dir)
    pretrain_before = _mtimes(pretrain, skip)
    best_before = _mtimes(os.path.join(pretrain, "best"))
    again = quickstart.run(out, **SMALL)
    for stage in ("corpus", "vocab", "records", "pretrain", "export",
                  "finetune"):
        assert again.stages[stage].skipped, stage
    assert _mtimes(data_dir) == data_before
    assert _mtimes(pretrain, skip) == pretrain_before
    assert _mtimes(os.path.join(pretrain, "best")) == best_before
    assert again.export.reused and again.export.version == 1
    assert again.finetune.reused
    assert again.pretrain.resumed_from_step == 20
    # The stages read back from their files are what they returned.
    assert again.corpus == report.corpus and again.vocab == report.vocab
    assert again.records == report.records
    assert dataclasses.replace(again.finetune, reused=False) == (
        report.finetune)
    assert sorted(os.listdir(os.path.join(out, "export", "albert"))) == ["1"]

    # More steps continue training from the newest checkpoint and export
    # the next version.
    more = quickstart.run(out, **dict(SMALL, num_train_steps=30))
    assert more.stages["corpus"].skipped
    assert not more.stages["pretrain"].skipped
    assert more.pretrain.resumed_from_step == 20
    assert more.pretrain.steps == 30
    # The export follows the best checkpoint: a new best means version 2,
    # and fine-tuning starts again from it.
    best_step = int(more.pretrain.best_eval["global_step"])
    assert more.export.checkpoint_step == best_step
    if best_step != report.export.checkpoint_step:
        assert more.export.version == 2 and not more.export.reused
        assert not more.finetune.reused
    else:
        assert more.export.version == 1 and more.export.reused

    # Other settings in the same folder: refused before anything changes
    # (the folder's run record names what differs), not rebuilt or resumed.
    data_before = _mtimes(data_dir)
    with pytest.raises(ValueError, match="--vocab_size=300 there, 280 now"):
        quickstart.run(out, **dict(SMALL, vocab_size=280, num_train_steps=30))
    assert _mtimes(data_dir) == data_before
    assert tf.train.latest_checkpoint(pretrain).endswith("ckpt-30")
