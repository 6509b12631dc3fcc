"""The paper-claims study: its verdict rules, its keras-hub peer, and
`--quick` end to end (structure only: parameter counts, every cell filled,
the NSP/SOP cross-evaluation)."""

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf import AlbertPretrainer
from benchmarks.paper_claims import job
from benchmarks.paper_claims import keras_hub_parity
from benchmarks.paper_claims import runs
from benchmarks.paper_claims import verdicts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(**overrides):
    values = dict(vocab_size=300, embedding_size=16, hidden_size=32,
                  num_hidden_layers=3, num_attention_heads=2,
                  intermediate_size=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0,
                  max_position_embeddings=24)
    values.update(overrides)
    return AlbertConfig.from_preset("tiny", **values)


def _encoder_parameters(config):
    """The encoder count by the paper's formula, not by building a model."""
    V, E, H = config.vocab_size, config.embedding_size, config.hidden_size
    F, L = config.intermediate_size, config.num_hidden_layers
    embeddings = (V + config.max_position_embeddings
                  + config.type_vocab_size) * E + 2 * E
    projection = E * H + H if E != H else 0
    attention = 4 * (H * H + H) + 2 * H
    ffn = H * F + F + F * H + H + 2 * H
    copies = {"all": (1, 1), "attention": (1, L), "ffn": (L, 1),
              "none": (L, L)}[config.share]
    return (embeddings + projection + copies[0] * attention
            + copies[1] * ffn + H * H + H)


# === Verdict rules ===

def test_pair_differences_are_judged_against_seed_noise():
    # Threshold 2 * sqrt(2) * 0.01 = 2.83 pt.
    assert verdicts.better(0.03, 0.01, "d")[0] == verdicts.AGREES
    assert verdicts.better(0.02, 0.01, "d")[0] == verdicts.CANT_TELL
    assert verdicts.better(-0.03, 0.01, "d")[0] == verdicts.DISAGREES
    assert verdicts.not_worse(-0.02, 0.01, "d")[0] == verdicts.AGREES
    assert verdicts.not_worse(-0.03, 0.01, "d")[0] == verdicts.DISAGREES
    verdict, reason = verdicts.better(0.5, None, "MLM accuracy")
    assert verdict == verdicts.CANT_TELL and "one seed" in reason
    assert "+3.00 pt" in verdicts.better(0.03, 0.01, "d")[1]


def test_chance_verdicts_need_the_control_to_be_learned():
    # 400 pairs at chance 0.5: band 2 * sqrt(0.25 / 400) = 5 pt.
    assert verdicts.chance_band(400) == pytest.approx(0.05)
    assert verdicts.near_chance(0.52, 400, 0.8, "x")[0] == verdicts.AGREES
    assert verdicts.near_chance(0.60, 400, 0.8, "x")[0] == verdicts.DISAGREES
    assert verdicts.near_chance(0.52, 400, 0.54, "x")[0] == verdicts.CANT_TELL
    learned = (0.8, 400, 0.5)
    # Chance 0.6 (an unbalanced task): 0.63 is inside 0.6 ± 4.9 pt.
    assert verdicts.above_chance(0.63, 400, learned, "x", 0.6)[0] == \
        verdicts.DISAGREES
    assert verdicts.above_chance(0.70, 400, learned, "x", 0.6)[0] == \
        verdicts.AGREES
    assert verdicts.above_chance(0.70, 400, (0.52, 400, 0.5), "x", 0.6)[0] \
        == verdicts.CANT_TELL
    # A model trained on the task itself is at chance: nothing to judge.
    verdict, reason = verdicts.above_chance(0.55, 400, learned, "x", 0.6,
                                            reference=0.61)
    assert verdict == verdicts.CANT_TELL and "not learned at this scale" in \
        reason
    assert verdicts.above_chance(0.70, 400, learned, "x", 0.6,
                                 reference=0.8)[0] == verdicts.AGREES


def test_parity_tolerance_is_the_t_test_bound():
    ours, theirs = [5.0, 5.1, 5.2], [5.05, 5.15, 5.25]
    test = verdicts.parity(ours, theirs)
    # Pooled sd 0.1; t(0.975, 4) = 2.776; sqrt(2/3).
    assert test["pooled_spread"] == pytest.approx(0.1)
    assert test["tolerance"] == pytest.approx(2.776 * 0.1 * math.sqrt(2 / 3))
    assert test["difference"] == pytest.approx(0.05)
    assert test["verdict"] == verdicts.AGREES
    assert verdicts.parity(ours, [6.0, 6.1, 6.2])["verdict"] == \
        verdicts.DISAGREES
    assert verdicts.parity([5.0], [5.1])["verdict"] == verdicts.CANT_TELL


def _measured(accuracy, loss=5.0, parameters=1000):
    return {"masked_lm_accuracy": accuracy, "sentence_order_accuracy": 0.7,
            "masked_lm_loss": loss, "parameters": parameters}


def test_claims_follow_from_the_numbers():
    # Seed spread of MLM accuracy 0.2 pt: pair threshold 0.57 pt.
    parity_runs = {
        "albert_tf": [dict(_measured(a, losses), seed=i) for i, (a, losses) in
                      enumerate([(0.150, 5.00), (0.152, 5.02), (0.148, 4.98)])],
        "keras_hub": [dict(_measured(a, losses), seed=i) for i, (a, losses) in
                      enumerate([(0.149, 5.01), (0.151, 5.03), (0.147, 4.99)])]}
    factorization = [
        dict(_measured(a, parameters=p), share=share, embedding_size=e)
        for share, e, a, p in [("all", 16, 0.140, 100), ("all", 64, 0.150, 200),
                               ("all", 128, 0.149, 300),
                               ("none", 16, 0.150, 400),
                               ("none", 64, 0.155, 500),
                               ("none", 128, 0.160, 600)]]
    sharing = [dict(_measured(a, parameters=p), share=share)
               for share, a, p in [("all", 0.150, 200), ("attention", 0.158, 350),
                                   ("ffn", 0.151, 300), ("none", 0.160, 500)]]
    sop_nsp = {
        "rows": [
            {"pretrained_on": "nsp", "accuracy": {"nsp": 0.80, "sop": 0.51},
             "downstream": [0.60, 0.61, 0.62]},
            {"pretrained_on": "sop", "accuracy": {"nsp": 0.70, "sop": 0.75},
             "downstream": [0.66, 0.67, 0.68]},
            {"pretrained_on": None, "downstream": [0.55, 0.56, 0.57]}],
        "examples": {"sop": 2000, "nsp": 3000},
        "chance": {"sop": 0.5, "nsp": 0.64}}
    result = {"config": {"embedding_size": 64, "hidden_size": 128},
              "studies": {"factorization": {"rows": factorization},
                          "sharing": {"rows": sharing, "embedding_size": 64},
                          "sop_nsp": sop_nsp,
                          "parity": {"runs": parity_runs,
                                     "test": verdicts.parity(
                                         [5.00, 5.02, 4.98],
                                         [5.01, 5.03, 4.99])}}}
    job.judge(result)
    assert result["seed_spread"]["masked_lm_accuracy"] == pytest.approx(0.002)
    found = {key: [c["verdict"] for c in study["claims"]]
             for key, study in result["studies"].items()}
    agrees = verdicts.AGREES
    assert found["factorization"] == [agrees] * 4
    assert found["sharing"] == [agrees] * 3
    assert found["sop_nsp"] == [agrees] * 3
    # NSP not learned even by the NSP-pretrained model: transfer to NSP
    # cannot be judged.
    sop_nsp["rows"][0]["accuracy"]["nsp"] = 0.645
    job.judge(result)
    assert [c["verdict"] for c in result["studies"]["sop_nsp"]["claims"]] == [
        agrees, verdicts.CANT_TELL, agrees]
    sop_nsp["rows"][0]["accuracy"]["nsp"] = 0.80
    assert found["parity"] == [agrees]
    # Counts out of order; accuracy within noise, then reversed.
    sharing[2]["parameters"] = 400
    sharing[1]["masked_lm_accuracy"] = 0.155
    sharing[3]["masked_lm_accuracy"] = 0.140
    job.judge(result)
    assert [c["verdict"] for c in result["studies"]["sharing"]["claims"]] == [
        verdicts.DISAGREES, verdicts.DISAGREES, verdicts.CANT_TELL]


# === The keras-hub peer ===

def test_peer_has_our_parameter_counts():
    for share in ("all", "none", "ffn"):
        config = _config(share=share)
        assert runs.parameter_counts(config)["encoder"] == \
            _encoder_parameters(config)
    config = _config()
    assert runs.parameter_counts(config, "keras_hub") == \
        runs.parameter_counts(config)


def test_peer_computes_our_function_up_to_its_head_epsilon():
    config = _config()
    ours, theirs = AlbertPretrainer(config), keras_hub_parity.peer_pretrainer(config)
    rng = np.random.default_rng(0)
    mask = np.ones((3, 24), "int32")
    mask[:, 18:] = 0
    features = {
        "input_word_ids": rng.integers(5, 300, (3, 24)).astype("int32"),
        "input_mask": mask,
        "input_type_ids": (np.arange(24) >= 10).astype("int32")[None].repeat(
            3, 0),
        "masked_lm_positions": rng.integers(1, 18, (3, 4)).astype("int32"),
    }
    apart = keras_hub_parity.output_difference(ours, theirs, features)
    assert apart["mlm_logits"] > 1e-2  # Each draws its own weights.
    keras_hub_parity.copy_weights(ours, theirs)
    shipped = keras_hub_parity.output_difference(ours, theirs, features)
    matched = keras_hub_parity.output_difference(ours, theirs, features,
                                                 head_epsilon=config.layer_norm_epsilon)
    assert shipped["sop_logits"] < 1e-5
    assert matched["mlm_logits"] < 1e-5 < shipped["mlm_logits"] < 1e-2
    # The comparison leaves keras-hub's own epsilon in place.
    assert keras_hub_parity.output_difference(ours, theirs, features) == shipped


def test_peer_refuses_what_keras_hub_cannot_build():
    with pytest.raises(ValueError, match=r"share='ffn' \(keras-hub: 'all'\)"):
        keras_hub_parity.peer_pretrainer(_config(share="ffn"))
    with pytest.raises(ValueError, match="layer_norm_epsilon=0.001"):
        keras_hub_parity.check_comparable(_config(layer_norm_epsilon=1e-3))


# === The study, --quick ===

@pytest.mark.slow
def test_quick_study_fills_every_cell(tmp_path):
    output_dir = str(tmp_path / "claims")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.paper_claims", "--quick",
         "--output_dir=" + output_dir, "--num_train_steps=12"],
        capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(output_dir, "results.json")) as f:
        result = json.load(f)
    config = AlbertConfig.from_dict(result["config"])
    studies = result["studies"]

    factor = studies["factorization"]["rows"]
    assert {(r["share"], r["embedding_size"]) for r in factor} == {
        (share, size) for share in ("all", "none")
        for size in (config.embedding_size, config.hidden_size)}
    for row in factor + studies["sharing"]["rows"]:
        expected = _encoder_parameters(AlbertConfig.from_dict(dict(
            result["config"], embedding_size=row.get(
                "embedding_size", config.embedding_size),
            share=row["share"])))
        assert row["parameters"] == expected, row
        for metric in ("masked_lm_accuracy", "sentence_order_accuracy"):
            assert 0.0 <= row[metric] <= 1.0
        assert row["masked_lm_loss"] > 0 and row["seconds"] > 0
        assert [p["step"] for p in row["curve"]] == [6, 12]

    cross = {r["pretrained_on"]: r for r in studies["sop_nsp"]["rows"]}
    # SOP and NSP pretraining, and the random-initialization control of the
    # fine-tuning.
    assert set(cross) == {"sop", "nsp", None}
    for row in cross.values():
        assert len(row["downstream"]) == 1
        assert all(0.0 <= accuracy <= 1.0 for accuracy in row["downstream"])
    for row in (cross["sop"], cross["nsp"]):
        assert set(row["accuracy"]) == {"sop", "nsp"}
        for curve in row["curves"].values():
            assert [p["step"] for p in curve] == [6, 12]
            assert all(0.0 <= p["sentence_order_accuracy"] <= 1.0
                       for p in curve)
    assert 0.5 < studies["sop_nsp"]["chance"]["nsp"] < 0.8

    parity = studies["parity"]
    assert parity["parameters"]["albert_tf"] == parity["parameters"]["keras_hub"]
    assert [len(parity["runs"][m]) for m in runs.MODELS] == [1, 1]
    assert parity["same_weights_epsilon_matched"]["mlm_logits"] < 1e-5
    for key in studies:
        assert studies[key]["claims"] and studies[key]["seconds"] >= 0
        for claim in studies[key]["claims"]:
            assert claim["verdict"] in (verdicts.AGREES, verdicts.DISAGREES,
                                        verdicts.CANT_TELL)
    # One seed: no spread, so no difference between models is judged.
    assert studies["parity"]["claims"][0]["verdict"] == verdicts.CANT_TELL

    text = open(os.path.join(output_dir, "paper_claims.md")).read()
    for title in ("1. Factorized embedding", "2. Cross-layer sharing",
                  "3. SOP vs NSP", "4. Learning parity"):
        assert "## " + title in text
    assert not re.search(r"\b(None|nan)\b", text)
    assert "![" in text and "(paper_claims.svg)" in text
    chart = open(os.path.join(output_dir, "paper_claims.svg"),
                 encoding="utf-8").read()
    assert "<svg" in chart
    for title in ("1. Factorized embedding", "2. Cross-layer sharing",
                  "3. SOP vs NSP", "4. Parity with keras-hub"):
        assert title in chart, title
