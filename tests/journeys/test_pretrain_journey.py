"""Journey 1: text -> vocabulary -> records -> pretraining -> export -> serving.

The documented commands in order (read from the README and `docs/`, made
tiny), each a `python -m ...` subprocess in one project folder:
`data_prep.build_vocab`, `data_prep.create_pretraining_data` (two shards,
and again on Beam's DirectRunner), `albert_tf.run_pretraining` on the
documented glob with `--do_eval`, the same command again with more steps (a
resume), the README's TPUStrategy command on the CPU, `export.export_saved_model`
of the best checkpoint, and the exported model queried from a fresh Python
process as the serving guide does; then the serving guide's export of a
model directory, checked with `--tf_serving_version`, and
`export.serving_compat` on the result.
"""

import glob
import json
import math
import os
import shutil

import numpy as np
import pytest

from tests.journeys import common
from tests.journeys import documented

pytestmark = pytest.mark.slow

EXPORT_DIR = "serving"
# The export's default --max_seq_length (the README's command leaves it).
SERVING_LENGTH = 128
RESUMED_STEPS = 30
PRETRAIN_METRICS = ("masked_lm_accuracy", "masked_lm_loss",
                    "sentence_order_accuracy", "sentence_order_loss")
# The released layout of the special pieces (README, "Vocabulary").
SPECIAL_PIECES = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
USER_SYMBOLS = ["(", ")", '"', "-", ".", "–", "£", "€"]


def _count_records(path):
    """Records in a TFRecord file, read by its framing (length, CRC, data,
    CRC), so that a short or padded file is caught."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return count
            assert len(header) == 12, path
            length = int.from_bytes(header[:8], "little")
            body = f.read(length + 4)
            assert len(body) == length + 4, path
            count += 1


def test_data_prep_writes_the_vocabulary_shards_and_statistics():
    data = common.prepared_data()
    root = data.root
    pieces = [line.split("\t")[0] for line in
              (root / "vocab/30k-clean.vocab").read_text(
                  encoding="utf-8").splitlines()]
    assert (root / common.SPM_MODEL).exists()
    assert len(pieces) == common.VOCAB_SIZE
    assert pieces[:5] == SPECIAL_PIECES
    assert set(USER_SYMBOLS) <= set(pieces)

    shards = ["train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002"]
    assert sorted(os.listdir(root / "data")) == sorted(
        shards + ["stats.train.tfrecord.json"])
    # A glob over the records matches the shards, not the statistics
    # (docs/pretraining_data.md).
    assert sorted(glob.glob(str(root / "data/train.tfrecord*"))) == [
        str(root / "data" / name) for name in shards]
    stats = json.loads((root / "data/stats.train.tfrecord.json").read_text())
    counts = [_count_records(root / "data" / name) for name in shards]
    assert min(counts) > 0
    assert stats["instances"] == sum(counts)
    assert sum(stats["sop_label_counts"].values()) == stats["instances"]
    assert 0.1 < stats["masked_fraction"] < 0.2


def test_beam_direct_runner_writes_the_local_runs_bytes():
    """docs/beam.md's DirectRunner command (2 worker processes), given the
    local run's input, sizes and shards, writes the same shards."""
    root = common.prepared_data().root
    flags = {k: v for k, v in common.RECORD_FLAGS.items()
             if k != "num_workers"}
    common.run(documented.command(
        "--runner=DirectRunner",
        set=dict(flags, input_file="corpus/*.txt.gz",
                 output_file="beam/train.tfrecord")), root)
    for name in ("train.tfrecord-00000-of-00002",
                 "train.tfrecord-00001-of-00002"):
        assert (root / "beam" / name).read_bytes() == (
            root / "data" / name).read_bytes(), name
    beam_stats = json.loads((root / "beam/stats.train.tfrecord.json").read_text())
    stats = json.loads((root / "data/stats.train.tfrecord.json").read_text())
    assert beam_stats["instances"] == stats["instances"]


def test_pretraining_evaluates_every_checkpoint_and_keeps_the_best():
    first = common.pretraining_run()
    # Nothing the glob matched was skipped: the statistics file is not in it.
    assert "not TFRecords" not in first.done.log
    assert "stats.json" not in first.done.log
    out = first.output_dir
    steps = list(range(common.SAVE_STEPS, common.FIRST_STEPS + 1,
                       common.SAVE_STEPS))
    blocks, _ = common.check_run_dir(
        out, steps, PRETRAIN_METRICS, "masked_lm_accuracy",
        ["albert_config.json"])
    for block in blocks:
        assert 0 <= block["masked_lm_accuracy"] <= 1
        assert math.isfinite(block["masked_lm_loss"])
    config = json.loads((out / "albert_config.json").read_text())
    assert config["vocab_size"] == common.VOCAB_SIZE
    assert config["hidden_size"] == 32  # the tiny preset
    for step in steps:
        assert (out / f"ckpt-{step}.index").exists()


@pytest.fixture(scope="module")
def resumed():
    """The same command with more steps: continues the first run."""
    first = common.pretraining_run()
    done = common.run(common.pretraining_command(RESUMED_STEPS), first.root)
    return first, done


def test_rerun_with_more_steps_resumes_and_evaluates_the_new_checkpoints(
        resumed):
    first, done = resumed
    last = common.FIRST_STEPS
    assert f"Resumed from {common.PRETRAIN_DIR}/ckpt-{last} at step {last}" \
        in done.log
    # Only the new steps ran.
    loop = common.LOOP_STEPS
    assert f"step {last + loop}/{RESUMED_STEPS}" in done.log
    assert f"step {loop}/{RESUMED_STEPS}" not in done.log
    steps = list(range(common.SAVE_STEPS, RESUMED_STEPS + 1,
                       common.SAVE_STEPS))
    common.check_run_dir(
        first.output_dir, steps, PRETRAIN_METRICS, "masked_lm_accuracy",
        ["albert_config.json"])
    # The first run's results stay as they were (nothing re-evaluated).
    assert (first.output_dir / "eval_results.txt").read_text().startswith(
        first.eval_results)


def test_the_tpu_command_runs_on_a_cpu_without_its_tpu():
    """The README's TPUStrategy command, with `--tpu` left out (one CPU
    device), local records and tiny sizes; its other flags as written."""
    root = common.pretraining_run().root
    output_dir = "runs/tpu_command"
    common.run(documented.command(
        "python -m albert_tf.run_pretraining --tpu=local", drop=("tpu",),
        set=dict(common.TINY_PRETRAINING, input_file="data/train.tfrecord-*",
                 output_dir=output_dir, num_train_steps=2,
                 num_warmup_steps=1, iterations_per_loop=1,
                 save_checkpoints_steps=2, max_eval_steps=1)), root)
    common.check_run_dir(root / output_dir, [2], PRETRAIN_METRICS,
                         "masked_lm_accuracy", ["albert_config.json"])


@pytest.fixture(scope="module")
def exported(resumed):
    """The documented export of the run's best checkpoint (`$PWD/serving`)."""
    first, _ = resumed
    export_dir = first.root / EXPORT_DIR
    done = common.run(documented.command(
        "--checkpoint=runs/tiny/best", env={"PWD": first.root}), first.root)
    return first.root, export_dir, done


def test_export_writes_the_tf_serving_layout(exported):
    _, export_dir, done = exported
    for name in ("albert", "albert_encoder", "albert_preprocessor"):
        assert sorted(os.listdir(export_dir / name)) == ["1"], name
        assert (export_dir / name / "1" / "saved_model.pb").exists(), name
        assert f"{export_dir / name / '1'}" in done.stdout
    assert (export_dir / "albert_encoder/1/encoder.keras").exists()
    assert not [n for n in os.listdir(export_dir) if n.startswith(".")]


# What a user's script does with the export (the guide's "From Python"),
# plus the three signatures as TF Serving calls them; prints one JSON line.
_SERVE = common.WEIGHT_DIFFERENCE + r'''
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops; needed to load

export_dir, best, seq_length = sys.argv[1], sys.argv[2], int(sys.argv[3])
strings = lambda values: tf.constant(values, tf.string)
decode = np.vectorize(lambda b: b.decode(), otypes=[object])

def plain(outputs):
    return {k: (decode(v.numpy()) if v.dtype == tf.string
                else v.numpy()).tolist() for k, v in outputs.items()}

report = {}
model = tf.saved_model.load(export_dir + "/albert/1")
report["signatures"] = sorted(model.signatures)
report["weights"] = weight_difference(model, best)
serve = model.signatures["serving_default"]
report["serving_default"] = plain(serve(
    text=strings(["The cat sat on the mat.", "A single sentence."]),
    text_b=strings(["Is the cat on the mat?", ""])))
# `text_b` left out (the guide's `model.serve(...)`): a single segment.
alone = model.serve(strings(["A single sentence."]))["pooled_output"].numpy()
report["text_only_shape"] = list(alone.shape)
report["text_only_vs_empty_text_b"] = float(np.abs(
    alone[0] - report["serving_default"]["pooled_output"][1]).max())
report["fill_mask"] = plain(model.signatures["fill_mask"](text=strings(
    ["Return the [MASK] of the list.", "[MASK] is the capital of [MASK]."])))
report["sop"] = plain(model.signatures["sop"](
    text=strings(["It rained all day."]),
    text_b=strings(["So the match was cancelled."])))
report["empty"] = {k: list(v.shape) for k, v in serve(
    text=strings([]), text_b=strings([])).items()}
try:
    serve(text=strings(["a", "b"]), text_b=strings(["c"]))
    report["mismatch"] = "answered"
except tf.errors.InvalidArgumentError:
    report["mismatch"] = "INVALID_ARGUMENT"

# TF-Hub-style pair, then the encoder as a Keras layer, on one pair.
preprocessor = tf.saved_model.load(export_dir + "/albert_preprocessor/1")
encoder = tf.saved_model.load(export_dir + "/albert_encoder/1")
tokens = preprocessor.tokenize(strings(["first"]))
inputs = preprocessor.bert_pack_inputs([tokens, tokens],
                                       seq_length=tf.constant(seq_length))
pooled = encoder(inputs)["pooled_output"].numpy()
served = serve(text=strings(["first"]), text_b=strings(["first"]))
report["hub_vs_serving"] = float(np.abs(
    pooled - served["pooled_output"].numpy()).max())
from export import keras_layer
for name, path in (("layer", "/albert_encoder/1"),
                   ("keras", "/albert_encoder/1/encoder.keras")):
    outputs = keras_layer.load_exported_encoder(export_dir + path)(
        {k: np.asarray(v) for k, v in inputs.items()})
    report[name + "_vs_serving"] = float(np.abs(
        np.asarray(outputs["pooled_output"]) - pooled).max())
print(json.dumps(report))
'''


def _finite(values):
    return bool(np.all(np.isfinite(np.asarray(values, np.float64))))


def test_export_of_the_best_checkpoint_serves_raw_text_in_a_fresh_process(
        exported):
    root, export_dir, _ = exported
    best = root / common.PRETRAIN_DIR / "best" / "model.ckpt"
    r = common.fresh_python(_SERVE, export_dir, best, SERVING_LENGTH)
    t, h, k = SERVING_LENGTH, 32, 5
    assert r["signatures"] == ["fill_mask", "serving_default",
                               "serving_single", "sop"]
    # The export holds the best checkpoint's weights, not fresh ones.
    assert r["weights"]["matched"] >= 8
    assert r["weights"]["max_difference"] == 0.0

    out = r["serving_default"]
    # Padded to the longest pair, rounded up to 8 (not to max_seq_length).
    longest = int(np.array(out["input_mask"]).sum(1).max())
    padded = -(-longest // 8) * 8
    assert padded < t
    assert np.shape(out["pooled_output"]) == (2, h)
    assert np.shape(out["sequence_output"]) == (2, padded, h)
    assert np.shape(out["input_mask"]) == (2, padded)
    assert _finite(out["pooled_output"]) and _finite(out["sequence_output"])
    mask = np.array(out["input_mask"])
    assert set(np.unique(mask)) == {0, 1}
    assert mask[0].sum() > mask[1].sum()  # the pair packs both segments
    assert r["text_only_shape"] == [1, h]
    assert r["text_only_vs_empty_text_b"] < 1e-5
    assert r["empty"] == {"pooled_output": [0, h], "sequence_output": [0, 8, h],
                          "input_mask": [0, 8]}
    assert r["mismatch"] == "INVALID_ARGUMENT"

    fill = r["fill_mask"]
    vocab = [line.split("\t")[0] for line in
             (root / "vocab/30k-clean.vocab").read_text(
                 encoding="utf-8").splitlines()]
    assert np.shape(fill["mask_positions"]) == (2, 2)
    assert fill["dropped_masks"] == [0, 0]
    positions = np.array(fill["mask_positions"])
    assert positions[0, 1] == -1 and (positions[1] > 0).all()
    assert positions[0, 0] > 0
    ids = np.array(fill["top_k_ids"])
    probabilities = np.array(fill["top_k_probabilities"])
    assert ids.shape == probabilities.shape == (2, 2, k)
    assert _finite(probabilities)
    for row, slot in ((0, 0), (1, 0), (1, 1)):
        assert (0 <= ids[row, slot]).all() and (
            ids[row, slot] < common.VOCAB_SIZE).all()
        assert fill["top_k_pieces"][row][slot] == [vocab[i] for i in
                                                   ids[row, slot]]
        p = probabilities[row, slot]
        assert (p > 0).all() and p.sum() <= 1 + 1e-6
        assert (np.diff(p) <= 0).all()  # best first
    # The first text has one mask: its second slot is padding.
    assert ids[0, 1].tolist() == [-1] * k
    assert fill["top_k_pieces"][0][1] == [""] * k
    assert probabilities[0, 1].tolist() == [0.0] * k

    sop = r["sop"]
    logits = np.array(sop["sop_logits"])
    assert logits.shape == (1, 2) and _finite(logits)
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(sop["sop_probabilities"], softmax, atol=1e-6)

    # The TF-Hub-style pair and the Keras loaders compute what serving does.
    assert r["hub_vs_serving"] < 1e-5
    assert r["layer_vs_serving"] < 1e-5
    assert r["keras_vs_serving"] < 1e-5


@pytest.fixture(scope="module")
def model_dir_exports(resumed):
    """The serving guide's commands on a model directory (the best
    checkpoint with its config and vocabulary): the export, with the
    guide's `--tf_serving_version=2.19` check added, and the table of the
    releases that serve it."""
    first, _ = resumed
    root = first.root
    model_dir = root / "models/tiny"
    shutil.copytree(root / common.PRETRAIN_DIR / "best", model_dir)
    shutil.copy(root / common.SPM_MODEL, model_dir / "spm.model")
    env = {"MODEL_DIR": "models/tiny", "EXPORT_DIR": root / "exports"}
    runs = [documented.command(
                "--export_dir=$EXPORT_DIR --model_name=albert "
                "--max_seq_length=128", env=env,
                set={"tf_serving_version": "2.19"}),
            documented.command("python -m export.serving_compat $EXPORT_DIR",
                               env=env)]
    # An export takes minutes on a busy 2-core machine.
    return root / "exports", [common.run(run, root, timeout=900)
                              for run in runs]


def test_a_model_directory_exports_and_its_serving_releases_are_listed(
        model_dir_exports):
    export_dir, (exported, table) = model_dir_exports
    for name in ("albert", "albert_encoder", "albert_preprocessor"):
        assert sorted(os.listdir(export_dir / name)) == ["1"], name
        assert (export_dir / name / "1/assets.extra/ops.json").exists(), name
    assert f"{export_dir / 'albert' / '1'}" in exported.stdout
    for name in ("albert", "albert_encoder", "albert_preprocessor"):
        assert f"`{name}`" in table.stdout, name
    assert "| 2.19.1 |" in table.stdout
