"""benchmarks.finetune_parity: its pieces, and a short run against PyTorch."""

import json
import math
import os

import numpy as np
import pytest

from benchmarks.finetune_parity import ParityOptions
from benchmarks.finetune_parity import format_tables
from benchmarks.finetune_parity import main
from benchmarks.finetune_parity import run
from benchmarks.finetune_parity.outcome import fingerprint
from benchmarks.finetune_parity.outcome import outcome_pair
from benchmarks.finetune_parity.outcome import outcome_row
from benchmarks.finetune_parity.outcome import outcome_rows
from benchmarks.finetune_parity.reference import DECAY_EXCLUSIONS
from benchmarks.finetune_parity.reference import OfficialAdamW
from benchmarks.finetune_parity.reference import decays
from benchmarks.finetune_parity.reference import official_learning_rate
from benchmarks.finetune_parity.stats import _t_quantile
from benchmarks.finetune_parity.stats import cosine
from benchmarks.finetune_parity.stats import relative_difference
from benchmarks.finetune_parity.stats import verdict
from benchmarks.finetune_parity.stats import welch_interval
from benchmarks.finetune_parity.tasks import MAIN_JOB_CHECKPOINT
from benchmarks.finetune_parity.tasks import MAIN_JOB_SPM
from benchmarks.finetune_parity.tasks import model_dir_of
from benchmarks.finetune_parity.tasks import write_classification_task
from benchmarks.finetune_parity.tasks import write_squad_files


def _torch_or_skip():
    """PyTorch and transformers, or a skip; in CI they must be there."""
    if os.environ.get("CI"):
        import torch  # noqa: F401
        import transformers  # noqa: F401
        return
    pytest.importorskip("torch", reason="PyTorch is not installed "
                        "(pip install -r requirements-peers.txt)")
    pytest.importorskip("transformers", reason="transformers is not "
                        "installed (pip install -r requirements-peers.txt)")


def test_welch_interval_and_verdicts():
    # t(0.975, df=8) = 2.306; equal variances and sizes: df = 2n - 2.
    assert _t_quantile(8) == pytest.approx(2.306, abs=1e-3)
    assert _t_quantile(4) == pytest.approx(2.776, abs=1e-3)
    a, b = [80.0, 81.0, 82.0, 83.0, 84.0], [79.0, 80.0, 81.0, 82.0, 83.0]
    diff, low, high = welch_interval(a, b)
    half = 2.306 * math.sqrt(2 * 2.5 / 5)
    assert diff == pytest.approx(1.0)
    assert (low, high) == pytest.approx((1.0 - half, 1.0 + half), abs=1e-3)
    assert verdict(-0.4, 0.6) == "same within noise"
    assert verdict(-1.5, 0.6) == "can't tell"
    assert verdict(0.2, 3.0) == "differs"
    assert verdict(-3.0, -0.2) == "differs"
    # Identical results: a zero-width interval.
    assert welch_interval([50, 50], [50, 50]) == (0.0, 0.0, 0.0)


def test_cosine_and_relative_difference():
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine([0, 0], [0, 0]) == 1.0
    np.testing.assert_allclose(relative_difference([1.0, 0.0, 2.0],
                                                   [1.1, 0.0, 2.0]),
                               [0.1 / 1.1, 0.0, 0.0])


def test_learning_rate_is_the_official_schedule():
    from albert_tf.training.schedule import WarmupPolynomialDecay

    schedule = WarmupPolynomialDecay(1e-3, num_train_steps=50,
                                     num_warmup_steps=5)
    for step in (0, 1, 4, 5, 6, 30, 49, 50, 60):
        assert official_learning_rate(step, 1e-3, 50, 5) == (
            pytest.approx(float(schedule(step)), rel=1e-6))


def test_decay_exclusions_match_the_optimizer():
    from albert_tf.training import lamb

    assert lamb.DEFAULT_EXCLUSIONS == DECAY_EXCLUSIONS
    assert not decays("albert.embeddings.LayerNorm.weight")
    assert not decays(
        "albert.encoder.albert_layer_groups.0.albert_layers.0."
        "full_layer_layer_norm.weight")
    assert not decays("classifier.bias")
    assert decays("albert.embeddings.word_embeddings.weight")
    assert decays("qa_outputs.weight")


def test_made_tasks_read_as_glue_and_squad(tmp_path):
    from albert_tf.tasks import glue_reader
    from albert_tf.tasks import squad_reader

    data_dir = write_classification_task(str(tmp_path / "sst"),
                                         max_train=50, max_dev=20)
    train, _ = glue_reader.read_examples("sst-2", data_dir, "train")
    dev, _ = glue_reader.read_examples("sst-2", data_dir, "dev")
    assert len(train) == 50 and len(dev) == 20
    assert {e.label for e in train} == {"0", "1"}
    for version_2 in (False, True):
        train_file, dev_file = write_squad_files(
            str(tmp_path / f"squad{int(version_2)}"), version_2)
        examples, skipped = squad_reader.read_examples(train_file, True, version_2)
        assert not skipped and len(examples) > 100
        for e in examples:
            if not e.is_impossible:
                assert e.context_text[e.start_char:].startswith(e.answer_text)
                assert "what" in e.question_text.split()
        assert any(e.is_impossible for e in examples) == version_2
        dev, _ = squad_reader.read_examples(dev_file, False, version_2)
        by_context = {}
        for e in dev:
            by_context.setdefault(e.context_text, []).append(e.question_text)
        # Each dev question asked once; more of them a document than train.
        assert all(len(set(q)) == len(q) for q in by_context.values())
        assert len(dev) / len(by_context) > len(examples) / len(
            {e.context_text for e in examples})


def test_tasks_of_another_domain(tmp_path):
    from albert_tf.tasks import glue_reader
    from benchmarks import other_domains
    from benchmarks.finetune_parity import ParityOptions
    from benchmarks.finetune_parity.tasks import corpus_documents

    with pytest.raises(ValueError, match="Received: --corpus=wiki"):
        ParityOptions(str(tmp_path), corpus="wiki").validate()
    if not any(other_domains.rust_book_documents(books=("nomicon",))):
        pytest.skip("no Rust books on this machine")
    documents = corpus_documents("rust_book", ("nomicon",))["nomicon"]
    assert len(documents) > 50 and all(isinstance(s, str)
                                       for s in documents[0])
    data_dir = write_classification_task(str(tmp_path / "rust"), "rust_book",
                                         max_train=40, max_dev=20)
    train, _ = glue_reader.read_examples("sst-2", data_dir, "train")
    assert len(train) == 40 and {e.label for e in train} == {"0", "1"}


def test_options_are_checked(tmp_path, capsys):
    with pytest.raises(ValueError, match="--task_name and --data_dir"):
        ParityOptions(str(tmp_path), task_name="rte").validate()
    with pytest.raises(ValueError, match="--train_file and --predict_file"):
        ParityOptions(str(tmp_path), train_file="x.json").validate()
    with pytest.raises(ValueError, match="Received: --steps=0"):
        ParityOptions(str(tmp_path), steps=0).validate()
    with pytest.raises(ValueError, match="--parts"):
        ParityOptions(str(tmp_path), parts=("speed",)).validate()
    with pytest.raises(ValueError, match="Received: \\['ner'\\]"):
        ParityOptions(str(tmp_path), outcome_tasks=("ner",)).validate()
    with pytest.raises(ValueError, match="--outcome_tasks"):
        ParityOptions(str(tmp_path), outcome_tasks=()).validate()
    with pytest.raises(ValueError, match="Received: --reference_recipe=tf"):
        ParityOptions(str(tmp_path), reference_recipe="tf").validate()
    with pytest.raises(ValueError, match="Received: --first_seed=-1"):
        ParityOptions(str(tmp_path), first_seed=-1).validate()
    with pytest.raises(ValueError, match="Received: --outcome_dropout=1.0"):
        ParityOptions(str(tmp_path), outcome_dropout=1.0).validate()
    # A bad flag: one line, no traceback, nothing written.
    out = str(tmp_path / "out")
    code = main([f"--output_dir={out}", "--train_file=missing.json",
                 "--predict_file=missing.json"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No SQuAD file at missing.json" in err
    assert not os.path.exists(out)


def test_seeds_measured_before_are_read_back(tmp_path):
    """A rerun (or another process's seeds, `--first_seed`) reads back a
    seed measured on the same input bytes with the same settings, and runs
    it again when either changed."""
    data = tmp_path / "train.json"
    data.write_text("one")
    calls = []

    def ours(seed, work):
        calls.append(("ours", seed))
        assert os.path.isdir(work)
        return {"exact": 10.0 + seed, "f1": 20.0 + len(calls)}

    def reference(seed):
        calls.append(("reference", seed))
        return {"exact": 11.0, "f1": 21.0}

    out, settings = str(tmp_path / "out"), {"steps": 5, "learning_rate": 5e-4}
    inputs = fingerprint([str(data)])
    first = outcome_pair(out, "squad_v1.1", 3, inputs, settings, ours,
                         reference)
    assert not first["read_back"] and len(calls) == 2
    again = outcome_pair(out, "squad_v1.1", 3, inputs, dict(settings),
                         ours, reference)
    assert again == dict(first, read_back=True) and len(calls) == 2
    outcome_pair(out, "squad_v1.1", 3, inputs, dict(settings, steps=6),
                 ours, reference)
    assert len(calls) == 4
    kept = [n for n in os.listdir(os.path.join(out, "outcome_runs"))
            if n.endswith(".json")]
    assert len(kept) == 2  # the first settings' result is not replaced
    assert outcome_pair(out, "squad_v1.1", 3, inputs, settings, ours,
                        reference)["read_back"]
    broken = os.path.join(out, "outcome_runs", sorted(kept)[0])
    with open(broken, "w") as f:
        f.write('{"key": ')  # damaged by hand: named, never read as a result
    with pytest.raises(ValueError, match="is no result of this benchmark"):
        for steps in (5, 6):
            outcome_pair(out, "squad_v1.1", 3, inputs,
                         dict(settings, steps=steps), ours, reference)
    data.write_text("two")
    inputs = fingerprint([str(data)])
    changed = outcome_pair(out, "squad_v1.1", 3, inputs,
                           dict(settings, steps=6), ours, reference)
    assert not changed["read_back"] and len(calls) == 6
    rows = outcome_rows("squad_v1.1", [first["ours"], changed["ours"]],
                        [first["reference"], changed["reference"]])
    assert sorted(rows) == ["squad_v1.1 exact", "squad_v1.1 f1"]
    assert rows["squad_v1.1 exact"]["metric"] == "EM"
    assert set(outcome_rows("sst-2", [80.0, 81.0], [80.0, 80.5])) == {"sst-2"}


def test_main_jobs_folder_is_a_starting_point(tmp_path):
    """`--init_checkpoint=runs/quickstart`: the main job's best checkpoint
    and vocabulary become one model directory; other paths stay as given."""
    from albert_tf.training import model_dir
    from benchmarks.finetune_parity.tasks import _spm_file
    from benchmarks.finetune_parity.tasks import build_tiny_checkpoint

    model = build_tiny_checkpoint(str(tmp_path / "model"))
    main_job = tmp_path / "quickstart"
    best = main_job / MAIN_JOB_CHECKPOINT
    best.mkdir(parents=True)
    (main_job / MAIN_JOB_SPM).parent.mkdir()
    os.rename(os.path.join(model, model_dir.SPM_NAME), main_job / MAIN_JOB_SPM)
    with pytest.raises(ValueError, match="has no checkpoint"):
        model_dir_of(str(main_job), str(tmp_path / "work"))
    for name in os.listdir(model):  # saved as the trainer names them
        os.rename(os.path.join(model, name), best / name.replace(
            model_dir.CHECKPOINT_NAME, "ckpt-7"))
    with open(best / "checkpoint", "w") as f:
        f.write('model_checkpoint_path: "ckpt-7"\n')
    assert model_dir_of(str(best), str(tmp_path)) == str(best)
    made = model_dir_of(str(main_job), str(tmp_path / "work"))
    assert made == str(tmp_path / "work" / "main_job_model")
    assert _spm_file(made) == os.path.join(made, model_dir.SPM_NAME)
    assert model_dir.resolve_checkpoint(made) == os.path.join(
        made, model_dir.CHECKPOINT_NAME)
    assert model_dir.find_in_model_dir(made, [model_dir.CONFIG_NAME])
    assert not os.path.exists(made + ".partial")
    # Windows longer than the checkpoint's positions (the main job's model
    # has 64) are refused before any conversion or training.
    with pytest.raises(ValueError, match="--squad_max_seq_length=512 is "
                       "longer than the checkpoint's max_position_embeddings"):
        run(ParityOptions(str(tmp_path / "parity"), init_checkpoint=str(
            main_job), parts=("features",), squad_max_seq_length=512))
    assert not os.path.exists(tmp_path / "parity" / "huggingface")


def test_tables_name_the_cpu():
    result = {
        "cpu": "AMD EPYC (AVX2, 2 cores)",
        "step_parity": {"classification": {
            "steps": 200, "max_rel_loss_diff": 2e-7,
            "min_weight_cosine": 0.99999999, "min_update_cosine": 0.9999}},
        "features": {"squad_v1.1": {
            "examples": 10, "ours": 12, "reference": 12, "differences": {},
            "differing_examples_by_cause": {}}},
        "outcome": {"classification": outcome_row(
            "accuracy", [80.0, 81.0, 82.0], [80.5, 81.0, 81.5])},
    }
    text = format_tables(result)
    assert text.startswith("CPU: AMD EPYC (AVX2, 2 cores)")
    assert "| classification | 200 | 2.00e-07 |" in text
    assert "| squad_v1.1 | 10 | 12 | 12 | none | none |" in text
    assert "| classification | accuracy | 81.0 ± 1.0 | 81.0 ± 0.5 | 3 |" in text
    outcome_only = format_tables({"cpu": "x", "outcome": result["outcome"]})
    assert "max rel. loss diff" not in outcome_only  # no empty step table
    assert "| classification | accuracy |" in outcome_only


def _datasets_layout(path, squad_file):
    """A SQuAD file rewritten as Hugging Face `datasets` JSON Lines."""
    with open(squad_file) as f:
        data = json.load(f)["data"]
    with open(path, "w") as f:
        for article in data:
            for p in article["paragraphs"]:
                for qa in p["qas"]:
                    f.write(json.dumps({
                        "id": qa["id"], "title": "t", "context": p["context"],
                        "question": qa["question"], "answers": {
                            "text": [a["text"] for a in qa["answers"]],
                            "answer_start": [a["answer_start"]
                                             for a in qa["answers"]]}}) + "\n")
    return path


@pytest.mark.slow
def test_short_run_matches_the_reference(tmp_path):
    """Step parity of all three tasks, features and a two-seed outcome on
    files given by flags (an RTE folder, SQuAD in the `datasets` layout)."""
    _torch_or_skip()
    rte = tmp_path / "rte"
    rte.mkdir()
    sst = write_classification_task(str(tmp_path / "sst"),
                                    max_train=200, max_dev=100)
    for split in ("train", "dev"):
        with open(os.path.join(sst, f"{split}.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        with open(rte / f"{split}.tsv", "w") as f:
            f.write("index\tsentence1\tsentence2\tlabel\n")
            for i, (sentence, label) in enumerate(rows):
                half = len(sentence) // 2
                f.write(f"{i}\t{sentence[:half]}\t{sentence[half:]}\t"
                        f"{('entailment', 'not_entailment')[int(label)]}\n")
    train_file, dev_file = write_squad_files(str(tmp_path / "squad"))
    train_file = _datasets_layout(str(tmp_path / "train.jsonl"), train_file)
    dev_file = _datasets_layout(str(tmp_path / "dev.jsonl"), dev_file)
    out = str(tmp_path / "out")
    code = main([
        f"--output_dir={out}", "--task_name=rte", f"--data_dir={rte}",
        f"--train_file={train_file}", f"--predict_file={dev_file}",
        "--steps=12", "--seeds=2", "--outcome_steps=20"])
    assert code == 0
    with open(os.path.join(out, "parity.json")) as f:
        result = json.load(f)
    assert "AVX" in result["cpu"] or "cores" in result["cpu"]
    assert set(result["step_parity"]) == {"classification", "squad_v1.1"}
    for row in result["step_parity"].values():
        assert row["steps"] == 12
        assert row["max_rel_loss_diff"] < 1e-4
        assert row["min_weight_cosine"] >= 0.9999
        assert row["decay_disagreements"] == []
    features = result["features"]["squad_v1.1"]
    assert features["ours"] > 0 and features["reference"] > 0
    assert "unexplained" not in features["differing_examples_by_cause"]
    for row in result["outcome"].values():
        assert row["seeds"] == 2
        assert row["verdict"] in ("same within noise", "can't tell", "differs")
    # The reference given the official rule: this side's seeds are measured
    # again (same inputs, same numbers), the reference's with OfficialAdamW.
    code = main([
        f"--output_dir={out}", "--task_name=rte", f"--data_dir={rte}",
        f"--train_file={train_file}", f"--predict_file={dev_file}",
        "--parts=outcome", "--outcome_tasks=classification", "--seeds=2",
        "--outcome_steps=20", "--reference_recipe=official"])
    assert code == 0
    with open(os.path.join(out, "parity.json")) as f:
        official = json.load(f)
    assert official["reference_recipe"] == "official"
    assert set(official["outcome"]) == {"classification"}
    assert (official["outcome"]["classification"]["ours"]
            == result["outcome"]["classification"]["ours"])
    kept = [name for name in os.listdir(os.path.join(out, "outcome_runs"))
            if name.startswith("classification_1_") and name.endswith(".json")]
    recipes = []
    for name in kept:  # the first run's seed is kept beside the new one
        with open(os.path.join(out, "outcome_runs", name)) as f:
            recipes.append(json.load(f)["key"]["settings"].get("recipe"))
    assert sorted(recipes, key=str) == [None, "official"]


@pytest.mark.slow
def test_official_adamw_in_torch_matches_the_optimizer_here():
    """The PyTorch side's optimizer against `albert_tf`'s AdamW: warmup,
    decay, clipping and the decay exclusions, ten steps on one layer."""
    _torch_or_skip()
    import keras
    import tensorflow as tf
    import torch

    from albert_tf.training import lamb

    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(4, 3)).astype(np.float32)
    bias = rng.normal(size=(3,)).astype(np.float32)
    x = rng.normal(size=(8, 4)).astype(np.float32) * 3
    layer = keras.layers.Dense(3, name="dense")
    layer.build((None, 4))
    layer.set_weights([kernel, bias])
    optimizer = lamb.create_optimizer("adamw", 1e-2, num_train_steps=10,
                                      num_warmup_steps=2)
    theirs = torch.nn.Linear(4, 3)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(kernel.T))
        theirs.bias.copy_(torch.tensor(bias))
    reference = OfficialAdamW(theirs.named_parameters(), 1e-2, 10, 2)
    for _ in range(10):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(x)))  # large: clipped
        optimizer.apply(tape.gradient(loss, layer.trainable_variables),
                        layer.trainable_variables)
        theirs(torch.tensor(x)).square().sum().backward()
        reference.step()
    np.testing.assert_allclose(layer.kernel.numpy(),
                               theirs.weight.detach().numpy().T, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(layer.bias.numpy(), theirs.bias.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
