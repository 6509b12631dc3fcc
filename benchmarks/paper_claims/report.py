"""`paper_claims.md` and `paper_claims.svg` from the studies' results.

`write_report(result, report_dir)` writes both: the verdicts first (one line
per claim, with the numbers each was computed from), then the setup, then
each study's table and claims with its wall time. The chart has one panel
per study (drawn by `tools.plot`).
"""

import os
import statistics

from benchmarks.paper_claims import studies
from benchmarks.paper_claims import verdicts
from tools import plot

# Largest logit difference of equal weights that float32 rounding explains.
SAME_FUNCTION_TOLERANCE = 1e-4
MARKDOWN = "paper_claims.md"
# An SVG: text, so a report kept in the repository holds no binary file.
CHART = "paper_claims.svg"
STUDY_TITLES = {
    "factorization": "1. Factorized embedding (paper Table 3)",
    "sharing": "2. Cross-layer sharing (paper Table 4)",
    "sop_nsp": "3. SOP vs NSP (paper Table 5)",
    "parity": "4. Learning parity with keras-hub",
}
MODEL_NAMES = {"albert_tf": "this project (`AlbertPretrainer`)",
               "keras_hub": "keras-hub (`AlbertBackbone` + `AlbertMaskedLM` "
                            "head + dense SOP head)"}


def _pct(value):
    return "%.2f%%" % (100.0 * value)


def _count(value):
    return f"{value:,}"


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _seconds(row):
    return "%.0f%s" % (row["seconds"], " (earlier run)" if row["reused"]
                       else "")


def _claims(claims):
    return "\n".join("- **%s** — %s. Paper: %s. Measured: %s." % (
        c["verdict"], c["claim"], c["paper"], c["reason"]) for c in claims)


def _study_header(result, key):
    study = result["studies"][key]
    return "## %s\n\nWall time %.0f s (load average %s at its start, %s at " \
           "its end; a run shared with an earlier study is timed there).\n" % (
               STUDY_TITLES[key], study["seconds"], study["load"][0],
               study["load"][1])


def _setup(result):
    data, config, recipe = result["data"], result["config"], result["recipe"]
    corpus = data["corpus"]
    spread = result["seed_spread"]
    seeds = result["plan"]["seeds"]
    if spread["masked_lm_accuracy"] is None:
        noise = ("One seed: no seed-to-seed spread, so no difference between "
                 "two models can be judged (every such verdict is \"can't "
                 "tell\").")
    else:
        noise = (
            "Seed-to-seed spread of the base model (all-shared, E=%d, SOP; "
            "%d seeds; sample standard deviation): MLM accuracy %.2f pt, SOP "
            "accuracy %.2f pt, MLM loss %.4f. Two single runs differ by "
            "√2 of that from seeds alone, so a difference between two models "
            "counts when it exceeds %.0f·√2·s = %.2f pt of MLM accuracy." % (
                config["embedding_size"], seeds,
                100 * spread["masked_lm_accuracy"],
                100 * spread["sentence_order_accuracy"],
                spread["masked_lm_loss"], verdicts.Z,
                100 * verdicts.pair_threshold(spread["masked_lm_accuracy"])))
    return "\n".join([
        "## Setup", "",
        "- Corpus: %s (%s documents, %s characters), split by documents: "
        "%s training and %s held-out documents." % (
            data["source"], _count(corpus["documents"]),
            _count(corpus["characters"]),
            _count(corpus["train_documents"]),
            _count(corpus["eval_documents"])),
        "- Vocabulary: %d SentencePiece pieces. Records: T=%d, up to %d masked "
        "tokens; %s SOP and %s NSP training pairs; held-out documents masked "
        "%d times: %s SOP and %s NSP pairs. Always predicting the most "
        "frequent masked token (`%s`) scores %s held-out MLM accuracy." % (
            data["vocabulary"]["pieces"], data["max_seq_length"],
            data["max_predictions_per_seq"],
            _count(data["sop"]["train_instances"]),
            _count(data["nsp"]["train_instances"]), data["eval_dupes"],
            _count(data["sop"]["eval_instances"]),
            _count(data["nsp"]["eval_instances"]),
            data["baseline"]["piece"],
            _pct(data["baseline"]["masked_lm_accuracy"])),
        "- Base model (the quickstart's): V=%d, E=%d, H=%d, %d layers, %d "
        "heads, FFN %d, %d positions, no dropout; studies vary E and the "
        "sharing only." % (
            config["vocab_size"], config["embedding_size"],
            config["hidden_size"], config["num_hidden_layers"],
            config["num_attention_heads"], config["intermediate_size"],
            config["max_position_embeddings"]),
        "- Every run: %d steps of batch %d, %s (the official one) with peak "
        "learning rate %g, linear warmup over the first 5%% of the steps "
        "then linear decay to 0, gradients clipped to norm 1, float32, %s; "
        "seed 0 unless said. Metrics are those of the last checkpoint on "
        "held-out documents (no checkpoint selection)." % (
            recipe["num_train_steps"], recipe["train_batch_size"],
            recipe["optimizer"].upper(), recipe["learning_rate"],
            "XLA" if recipe["jit_compile"] else "no XLA"),
        "- " + noise,
        "- Chance on a 2-way task is the accuracy of always answering the "
        "more frequent label: %s on the held-out SOP pairs, %s on the NSP "
        "pairs (NSP records take segment B from another document for every "
        "one-sentence chunk too, as the official script does). An accuracy "
        "counts as above (or at) chance when it is outside (or inside) "
        "chance ± %.0f binomial standard deviations of the held-out set." % (
            _pct(data["sop"]["eval_chance"]), _pct(data["nsp"]["eval_chance"]),
            verdicts.Z),
    ]) + "\n"


def _factorization(result):
    study = result["studies"]["factorization"]
    rows = [(studies.SHARING_NAMES[r["share"]], r["embedding_size"],
             _count(r["parameters"]), _pct(r["masked_lm_accuracy"]),
             _pct(r["sentence_order_accuracy"]),
             "%.3f" % r["masked_lm_loss"], _seconds(r))
            for r in study["rows"]]
    return "\n".join([
        _study_header(result, "factorization"),
        _table(("sharing", "E", "encoder parameters", "MLM accuracy",
                "SOP accuracy", "MLM loss", "train s"), rows), "",
        _claims(study["claims"])]) + "\n"


def _sharing(result):
    study = result["studies"]["sharing"]
    rows = [(studies.SHARING_NAMES[r["share"]], _count(r["parameters"]),
             _pct(r["masked_lm_accuracy"]), _pct(r["sentence_order_accuracy"]),
             "%.3f" % r["masked_lm_loss"], _seconds(r))
            for r in study["rows"]]
    return "\n".join([
        _study_header(result, "sharing"),
        "All at E=%d.\n" % study["embedding_size"],
        _table(("sharing", "encoder parameters", "MLM accuracy",
                "SOP accuracy", "MLM loss", "train s"), rows), "",
        _claims(study["claims"])]) + "\n"


def _mean_spread(values):
    text = _pct(statistics.fmean(values))
    if len(values) > 1:
        text += " ± %.2f" % (100 * statistics.stdev(values))
    return text


def _sop_nsp(result):
    study = result["studies"]["sop_nsp"]
    rows = []
    for r in study["rows"]:
        if r["pretrained_on"] is None:
            rows.append(("none (random initialization)", "", "", "",
                         _mean_spread(r["downstream"]), "",
                         "%.0f" % r["finetune_seconds"]))
            continue
        rows.append((r["pretrained_on"].upper(), _pct(r["masked_lm_accuracy"]),
                     _pct(r["accuracy"]["nsp"]), _pct(r["accuracy"]["sop"]),
                     _mean_spread(r["downstream"]), _seconds(r),
                     "%.0f" % r["finetune_seconds"]))
    examples = study["downstream_examples"]
    return "\n".join([
        _study_header(result, "sop_nsp"),
        "The all-shared base model (E=%d) pretrained on each task; its "
        "2-way head scored on both tasks' held-out pairs (%s NSP, %s SOP "
        "scored). NSP pairs take segment B from another document half of "
        "the time and for every one-sentence chunk; SOP pairs swap two "
        "consecutive segments half of the time. Downstream: the "
        "quickstart's task (`albert_apps.quickstart.downstream`: are two "
        "halves of a document never pretrained on in order or swapped; %s "
        "training and %s dev pairs), fine-tuned for %d steps from each "
        "model's encoder and from a random initialization, %d seed(s) each; "
        "dev accuracy as mean ± standard deviation over seeds. The paper's "
        "downstream tasks (SQuAD, MNLI, SST-2, RACE) are not sentence-order "
        "tasks; this one is, so it favors SOP pretraining by construction "
        "and is weaker evidence for the paper's claim than its average."
        "\n" % (study["embedding_size"], _count(study["examples"]["nsp"]),
                _count(study["examples"]["sop"]), _count(examples["train"]),
                _count(examples["dev"]), study["finetune_steps"],
                len(study["rows"][0]["downstream"])),
        _table(("pretrained on", "MLM accuracy", "NSP accuracy",
                "SOP accuracy", "downstream dev accuracy", "train s",
                "fine-tune s"), rows), "",
        _claims(study["claims"])]) + "\n"


def _same_function(matched):
    """What the same-weights check shows, from its numbers."""
    if max(matched.values()) <= SAME_FUNCTION_TOLERANCE:
        return ("So the two models compute the same function up to that "
                "epsilon (within %g), and a difference in how they learn "
                "comes from the initial draw (each library draws its own) "
                "and float rounding." % SAME_FUNCTION_TOLERANCE)
    return ("That is more than float rounding (%g): the two models compute "
            "different functions even with equal weights and epsilons." %
            SAME_FUNCTION_TOLERANCE)


def _parity(result):
    study = result["studies"]["parity"]
    runs = study["runs"]
    rows = []
    for ours, theirs in zip(runs["albert_tf"], runs["keras_hub"]):
        rows.append((ours["seed"], "%.4f" % ours["masked_lm_loss"],
                     "%.4f" % theirs["masked_lm_loss"],
                     _pct(ours["masked_lm_accuracy"]),
                     _pct(theirs["masked_lm_accuracy"]),
                     _pct(ours["sentence_order_accuracy"]),
                     _pct(theirs["sentence_order_accuracy"]),
                     "%s / %s" % (_seconds(ours), _seconds(theirs))))
    params = study["parameters"]
    same = study["same_weights"]
    matched = study["same_weights_epsilon_matched"]
    return "\n".join([
        _study_header(result, "parity"),
        "The all-shared base model (E=%d) built twice: %s and %s. Both are "
        "trained by the same `Trainer` (one loop: the same batches in the "
        "same order, the same masked positions, optimizer, schedule, loss "
        "and evaluation); only the model differs. Parameters: %s and %s "
        "(encoder %s and %s).\n" % (
            study["embedding_size"], MODEL_NAMES["albert_tf"],
            MODEL_NAMES["keras_hub"], _count(params["albert_tf"]["total"]),
            _count(params["keras_hub"]["total"]),
            _count(params["albert_tf"]["encoder"]),
            _count(params["keras_hub"]["encoder"])),
        _table(("seed", "MLM loss (ours)", "MLM loss (keras-hub)",
                "MLM acc. (ours)", "MLM acc. (keras-hub)", "SOP acc. (ours)",
                "SOP acc. (keras-hub)", "train s (ours / keras-hub)"), rows),
        "",
        _claims(study["claims"]), "",
        "Same weights: with this project's initial weights "
        "copied into keras-hub's model (through the keras-hub converter's "
        "tensor rules), the largest difference of the logits on a held-out "
        "batch is %.2g (MLM) and %.2g (SOP); with keras-hub's masked-LM "
        "head computing with this project's LayerNorm epsilon (1e-12 "
        "instead of its 1e-5) it is %.2g (MLM). %s" % (
            same["mlm_logits"], same["sop_logits"], matched["mlm_logits"],
            _same_function(matched)), "",
        "Differences by design: keras-hub's masked-LM head LayerNorm "
        "epsilon is 1e-5 (ours and the official 1e-12); padded keys are "
        "masked through Keras' masked softmax (official: -10000 added to "
        "the scores); the SOP head is a `Dense(2)` (`[H, 2]` kernel; "
        "official `[2, H]` weights, the same function); each library draws "
        "its own initial weights from the same truncated normal "
        "(stddev 0.02)."]) + "\n"


def _summary(result):
    rows = []
    for key in STUDY_TITLES:
        for claim in result["studies"][key]["claims"]:
            rows.append((STUDY_TITLES[key].split(" (")[0], claim["claim"],
                         claim["verdict"]))
    return "## Verdicts\n\n" + _table(("study", "claim", "verdict"), rows) + \
        "\n\nEach verdict's numbers and rule are under its study below.\n"


def _shared_note(result):
    """Says so when other jobs shared the machine (load above its cores)."""
    if max(float(load) for load in result["load"]) <= result["cores"]:
        return ""
    return (" (above its %d cores: other jobs shared it, so every wall time "
            "here is longer than on an idle machine)" % result["cores"])


def markdown(result):
    """The text of `paper_claims.md`."""
    sizes = [row["parameters"] for key in ("factorization", "sharing")
             for row in result["studies"][key]["rows"]]
    header = "\n".join([
        "# The ALBERT paper's claims, reproduced in miniature", "",
        "Generated by `%s` in %.0f s (%.1f min; %.0f s of CPU time, user + "
        "system) on %s. The machine's load average was %s at the start and "
        "%s at the end%s. Data preparation took %.0f s." % (
            result["command"], result["seconds"], result["seconds"] / 60.0,
            result["cpu_seconds"], result["hardware"], result["load"][0],
            result["load"][1], _shared_note(result), result["data_seconds"]),
        "",
        "Models of %s to %s encoder parameters, trained for %s steps of "
        "batch %d on %s characters of text, are far below the paper's scale "
        "(12M to 235M parameters, 125,000 steps of batch 4096, 16 GB of "
        "text, judged by downstream averages). The miniature tests the "
        "paper's claims on what it can measure, held-out masked-LM and "
        "sentence-pair accuracy and one small downstream task, and says "
        "\"can't tell at this scale\" where the differences are within seed "
        "noise." % (
            _count(min(sizes)), _count(max(sizes)),
            _count(result["recipe"]["num_train_steps"]),
            result["recipe"]["train_batch_size"],
            _count(result["data"]["corpus"]["characters"])), "",
        "![held-out metrics of the four studies](%s)" % CHART, ""])
    return "\n".join([header, _summary(result), _setup(result),
                      _factorization(result), _sharing(result),
                      _sop_nsp(result), _parity(result)])


def _panels(result):
    factor = result["studies"]["factorization"]["rows"]
    colors = {"all": plot.BLUE, "attention": plot.GREEN, "ffn": plot.RED,
              "none": plot.ORANGE}
    panels = [{
        "title": "1. Factorized embedding", "xlabel": "embedding size E",
        "ylabel": "held-out MLM accuracy", "xlog": True,
        "series": [{"label": studies.SHARING_NAMES[share],
                    "x": [r["embedding_size"] for r in factor
                          if r["share"] == share],
                    "y": [r["masked_lm_accuracy"] for r in factor
                          if r["share"] == share],
                    "color": colors[share], "markers": True}
                   for share in dict.fromkeys(r["share"] for r in factor)]}]
    sharing = result["studies"]["sharing"]["rows"]
    panels.append({
        "title": "2. Cross-layer sharing (E=%d)" % result["studies"][
            "sharing"]["embedding_size"],
        "xlabel": "encoder parameters", "ylabel": "held-out MLM accuracy",
        "series": [{"label": studies.SHARING_NAMES[r["share"]],
                    "x": [r["parameters"]], "y": [r["masked_lm_accuracy"]],
                    "color": colors[r["share"]], "markers": True}
                   for r in sharing]})
    series = []
    styles = {"sop": plot.BLUE, "nsp": plot.ORANGE}
    steps = []
    for row in result["studies"]["sop_nsp"]["rows"]:
        for task, curve in sorted(row.get("curves", {}).items()):
            steps = [p["step"] for p in curve]
            series.append({
                "label": "%s-pretrained on %s" % (row["pretrained_on"].upper(),
                                                  task.upper()),
                "x": steps, "y": [p["sentence_order_accuracy"] for p in curve],
                "color": styles[row["pretrained_on"]], "markers": True,
                "dash": task != row["pretrained_on"]})
    chance = result["studies"]["sop_nsp"]["chance"]
    for task in ("sop", "nsp"):
        series.append({"label": "chance on %s" % task.upper(), "x": steps,
                       "y": [chance[task]] * len(steps),
                       "color": plot.GRAY if task == "sop" else plot.GREEN,
                       "dash": True})
    panels.append({"title": "3. SOP vs NSP", "ylabel": "held-out pair accuracy",
                   "series": series})
    parity = result["studies"]["parity"]["runs"]
    panels.append({
        "title": "4. Parity with keras-hub", "ylabel": "held-out MLM loss",
        "series": [{"label": "%s seed %d" % (
                        "ours" if model == "albert_tf" else "keras-hub",
                        row["seed"]),
                    "x": [p["step"] for p in row["curve"]],
                    "y": [p["masked_lm_loss"] for p in row["curve"]],
                    "color": plot.BLUE if model == "albert_tf" else plot.ORANGE,
                    "dash": model != "albert_tf"}
                   for model, rows in parity.items() for row in rows]})
    return panels


def write_report(result, report_dir):
    """Writes `paper_claims.md` and `paper_claims.svg` into `report_dir`.

    Returns:
        `{"markdown": path, "chart": path}`.
    """
    os.makedirs(report_dir, exist_ok=True)
    chart = os.path.join(report_dir, CHART)
    plot.save_chart(_panels(result), chart, columns=2)
    path = os.path.join(report_dir, MARKDOWN)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(markdown(result))
    os.replace(path + ".tmp", path)
    return {"markdown": path, "chart": chart}
