"""The four studies: which runs each needs, its table, and its claims.

Each `study_*` function pretrains (through a `Runner`, which runs each
`RunSpec` once however many studies use it) and returns its numbers; each
`claims_*` function turns them into verdicts on the paper's claims with the
rules of `verdicts`, given the seed-to-seed spread (`seed_spread`) that the
parity study's repeated runs of the base model measure.

1. Factorized embedding (paper Table 3): E swept at fixed H, all-shared and
   not-shared.
2. Cross-layer sharing (Table 4): the four schemes at the base E.
3. SOP vs NSP (Table 5): the all-shared base model pretrained on each task,
   scored on both tasks' held-out pairs and fine-tuned on the quickstart's
   downstream task.
4. Parity: this project's `AlbertPretrainer` and keras-hub's ALBERT, same
   everything, several seeds; held-out MLM loss compared with a t-test
   tolerance.
"""

import dataclasses
import time

from albert_apps.quickstart import FINETUNE_STEPS
from benchmarks.paper_claims import keras_hub_parity
from benchmarks.paper_claims import runs
from benchmarks.paper_claims import verdicts

METRICS = ("masked_lm_accuracy", "sentence_order_accuracy", "masked_lm_loss")
QUICK_FINETUNE_STEPS = 10
SHARING_NAMES = {"all": "all-shared", "attention": "shared-attention",
                 "ffn": "shared-FFN", "none": "not-shared"}


@dataclasses.dataclass(frozen=True)
class Plan:
    """How much of each study to run.

    Attributes:
        embedding_sizes: E of study 1 (the base E and H among them).
        factor_shares: sharing schemes of study 1.
        sharing_modes: schemes of study 2.
        seeds: seeds of each model in study 4 (the spread of the base model)
            and of each fine-tuning in study 3.
        finetune_steps: steps of each fine-tuning on the downstream task.
    """

    embedding_sizes: tuple
    factor_shares: tuple = ("all", "none")
    sharing_modes: tuple = ("all", "attention", "ffn", "none")
    seeds: int = 3
    finetune_steps: int = FINETUNE_STEPS


def make_plan(base_config, quick=False, seeds=0):
    """The default plan (E from H/8 to H, the quickstart's fine-tuning), or
    `--quick`'s (E = base and H, all-shared and not-shared, one seed, a few
    fine-tuning steps).

    Args:
        base_config: the base `AlbertConfig` (its E and H).
        quick: the reduced plan.
        seeds: seeds of studies 3 and 4 (0: 3, or 1 with `quick`).
    """
    hidden, base = base_config.hidden_size, base_config.embedding_size
    if quick:
        return Plan(embedding_sizes=tuple(sorted({base, hidden})),
                    sharing_modes=("all", "none"), seeds=seeds or 1,
                    finetune_steps=QUICK_FINETUNE_STEPS)
    sizes = sorted({hidden // 8, hidden // 4, hidden // 2, base, hidden})
    return Plan(embedding_sizes=tuple(s for s in sizes if s > 0),
                seeds=seeds or 3)


class Runner:
    """Runs each `RunSpec` once for all the studies that need it.

    Args:
        base_config, recipe, data, runs_dir: as `runs.run` takes them.
    """

    def __init__(self, base_config, recipe, data, runs_dir):
        self.base_config, self.recipe = base_config, recipe
        self.data, self.runs_dir = data, runs_dir
        self._done = {}

    def get(self, spec):
        """The run's summary (trained now, or earlier in this study)."""
        if spec not in self._done:
            self._done[spec] = runs.run(self.base_config, self.recipe,
                                        self.data, spec, self.runs_dir)
        return self._done[spec]

    def evaluate(self, summary, eval_task, checkpoint=None):
        """See `runs.evaluate`."""
        return runs.evaluate(self.base_config, self.recipe, self.data,
                             summary, eval_task, checkpoint)


def _row(summary, **extra):
    final = summary["final"]
    return dict(extra, parameters=summary["parameters"]["encoder"],
                seconds=summary["seconds"], reused=summary["reused"],
                curve=summary["curve"],
                **{metric: final[metric] for metric in METRICS})


def timed(study):
    """Runs `study()` and adds its wall time (`seconds`)."""
    start = time.time()
    result = study()
    result["seconds"] = round(time.time() - start, 1)
    return result


def study_factorization(runner, plan):
    """Study 1: every E of the plan, for each of `plan.factor_shares`."""
    rows = [_row(runner.get(runs.RunSpec(size, share)), share=share,
                 embedding_size=size)
            for share in plan.factor_shares for size in plan.embedding_sizes]
    return {"rows": rows}


def study_sharing(runner, plan):
    """Study 2: each sharing scheme at the base E."""
    size = runner.base_config.embedding_size
    return {"embedding_size": size, "rows": [
        _row(runner.get(runs.RunSpec(size, share)), share=share)
        for share in plan.sharing_modes]}


def study_sop_nsp(runner, plan):
    """Study 3: the base model pretrained with SOP and with NSP pairs, each
    scored on both tasks' held-out pairs at every checkpoint and fine-tuned
    on the quickstart's downstream task (`plan.seeds` seeds), next to the
    same model fine-tuned from random initialization."""
    size = runner.base_config.embedding_size
    rows = []
    for task in ("nsp", "sop"):
        summary = runner.get(runs.RunSpec(size, "all", task=task))
        curves = {task: summary["curve"]}
        other = "sop" if task == "nsp" else "nsp"
        curves[other] = [
            dict(runner.evaluate(summary, other, path), step=point["step"])
            for point, path in zip(summary["curve"], summary["checkpoints"])]
        rows.append({
            "pretrained_on": task, "seconds": summary["seconds"],
            "reused": summary["reused"],
            "masked_lm_accuracy": summary["final"]["masked_lm_accuracy"],
            "accuracy": {t: curves[t][-1]["sentence_order_accuracy"]
                         for t in curves},
            "curves": curves, "summary": summary})
    rows.append({"pretrained_on": None, "summary": None})
    for row in rows:
        summary = row.pop("summary")
        start = time.time()
        row["downstream"] = [
            runs.finetune(runner.base_config, runner.data, summary, seed,
                          plan.finetune_steps)["dev_accuracy"]
            for seed in range(plan.seeds)]
        row["finetune_seconds"] = round(time.time() - start, 1)
    examples = {task: min(runner.data[task]["eval_instances"],
                          runner.recipe.eval_batch_size
                          * rows[0]["curves"][task][-1]["eval_batches"])
                for task in ("sop", "nsp")}
    chance = {task: runner.data[task]["eval_chance"] for task in ("sop", "nsp")}
    return {"embedding_size": size, "rows": rows, "examples": examples,
            "chance": chance, "finetune_steps": plan.finetune_steps,
            "downstream_examples": runner.data["task_examples"]}


def study_parity(runner, plan, batch):
    """Study 4: both implementations, `plan.seeds` seeds each.

    Args:
        runner: the `Runner`.
        plan: the `Plan`.
        batch: one held-out batch (features of the input pipeline) for the
            same-weights check.
    """
    from albert_tf.models.pretrainer import AlbertPretrainer

    size = runner.base_config.embedding_size
    table = {model: [runner.get(runs.RunSpec(size, "all", model=model,
                                             seed=seed))
                     for seed in range(plan.seeds)]
             for model in runs.MODELS}
    losses = {model: [s["final"]["masked_lm_loss"] for s in summaries]
              for model, summaries in table.items()}
    config = runs.model_config(runner.base_config, runs.RunSpec(size))
    ours, theirs = AlbertPretrainer(config), keras_hub_parity.peer_pretrainer(config)
    keras_hub_parity.copy_weights(ours, theirs)
    return {
        "embedding_size": size,
        "parameters": {m: table[m][0]["parameters"] for m in table},
        "runs": {m: [_row(s, seed=seed) for seed, s in enumerate(table[m])]
                 for m in table},
        "test": verdicts.parity(losses["albert_tf"], losses["keras_hub"]),
        "same_weights": keras_hub_parity.output_difference(ours, theirs, batch),
        "same_weights_epsilon_matched": keras_hub_parity.output_difference(
            ours, theirs, batch, head_epsilon=config.layer_norm_epsilon),
    }


def seed_spread(parity):
    """Seed-to-seed standard deviation of each metric of the base model
    (this project's runs of study 4); None for one seed."""
    rows = parity["runs"]["albert_tf"]
    return {metric: verdicts.spread(r[metric] for r in rows)
            for metric in METRICS}


def _claim(claim, paper, verdict_reason):
    verdict, reason = verdict_reason
    return {"claim": claim, "paper": paper, "verdict": verdict,
            "reason": reason}


def _counts_claim(claim, paper, ordered, what):
    """A parameter-count claim: `ordered` (label, count) should increase."""
    counts = [count for _, count in ordered]
    listing = ", ".join("%s %s" % (label, f"{count:,}")
                        for label, count in ordered)
    if len(counts) < 2:
        return _claim(claim, paper, (verdicts.CANT_TELL,
                                     "%s: only %s run" % (what, listing)))
    increasing = all(a < b for a, b in zip(counts, counts[1:]))
    return _claim(claim, paper, (
        verdicts.AGREES if increasing else verdicts.DISAGREES,
        "%s (exact encoder counts): %s" % (what, listing)))


def _accuracy(rows, **match):
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row["masked_lm_accuracy"]
    return None


def _compare(claim, paper, first, second, spread, what, missing,
             rule=verdicts.better):
    """`rule` applied to `first - second` (MLM accuracies; None: not run)."""
    if first is None or second is None:
        return _claim(claim, paper, (verdicts.CANT_TELL,
                                     "%s not run in this plan" % missing))
    return _claim(claim, paper, rule(first - second, spread, what))


def claims_factorization(result, spread, base_size, hidden):
    """Study 1's claims (Table 3)."""
    rows = result["rows"]
    s = spread["masked_lm_accuracy"]
    out = []
    for share in sorted({r["share"] for r in rows}, key=list(
            SHARING_NAMES).index):
        ordered = [("E=%d" % r["embedding_size"], r["parameters"])
                   for r in rows if r["share"] == share]
        out.append(_counts_claim(
            "Factorizing the embedding (E < H) cuts parameters "
            "(%s)" % SHARING_NAMES[share],
            "V×E + E×H instead of V×H: all-shared 31M at E=768, 12M at E=128",
            ordered, SHARING_NAMES[share]))
    low, high = min(r["embedding_size"] for r in rows), max(
        r["embedding_size"] for r in rows)
    out.append(_compare(
        "Not-shared: a larger E is better (but not by much)",
        "not-shared, avg. 81.3 at E=64 up to 82.3 at E=768",
        _accuracy(rows, share="none", embedding_size=high),
        _accuracy(rows, share="none", embedding_size=low) if low < high
        else None, s, "MLM accuracy, E=%d minus E=%d" % (high, low),
        "not-shared at two E"))
    out.append(_compare(
        "All-shared: a factorized E (the base E=%d) does as well as E=H=%d"
        % (base_size, hidden),
        "all-shared, avg. 80.1 at E=128 vs 79.8 at E=768 (E=128 best)",
        _accuracy(rows, share="all", embedding_size=base_size)
        if base_size < hidden else None,
        _accuracy(rows, share="all", embedding_size=hidden), s,
        "MLM accuracy, E=%d minus E=%d" % (base_size, hidden),
        "all-shared at the base E and at H", rule=verdicts.not_worse))
    return out


def claims_sharing(result, spread):
    """Study 2's claims (Table 4)."""
    rows = result["rows"]
    s = spread["masked_lm_accuracy"]
    present = {r["share"] for r in rows}
    order = [share for share in ("all", "ffn", "attention", "none")
             if share in present]
    return [
        _counts_claim(
            "Sharing cuts parameters: all-shared < shared-FFN < "
            "shared-attention < not-shared",
            "12M < 38M < 64M < 89M (ALBERT-base, E=128)",
            [(SHARING_NAMES[share], next(r["parameters"] for r in rows
                                         if r["share"] == share))
             for share in order], "E=%d" % result["embedding_size"]),
        _compare(
            "Sharing all parameters costs accuracy (not-shared is better)",
            "avg. 82.3 not-shared vs 80.1 all-shared (E=128)",
            _accuracy(rows, share="none"), _accuracy(rows, share="all"), s,
            "MLM accuracy, not-shared minus all-shared",
            "all-shared and not-shared"),
        _compare(
            "Most of the cost comes from sharing the FFN, not the attention "
            "(shared-attention is better than shared-FFN)",
            "avg. 81.7 shared-attention vs 80.2 shared-FFN (E=128)",
            _accuracy(rows, share="attention"), _accuracy(rows, share="ffn"),
            s, "MLM accuracy, shared-attention minus shared-FFN",
            "shared-attention and shared-FFN"),
    ]


def claims_sop_nsp(result):
    """Study 3's claims (Table 5)."""
    by_task = {r["pretrained_on"]: r["accuracy"] for r in result["rows"]
               if r["pretrained_on"]}
    downstream = {r["pretrained_on"]: r["downstream"] for r in result["rows"]}
    examples, chance = result["examples"], result["chance"]
    return [
        _claim("A model pretrained with NSP is near chance on SOP",
               "NSP-pretrained: 52.0% on SOP (90.5% on NSP)",
               verdicts.near_chance(
                   by_task["nsp"]["sop"], examples["sop"],
                   by_task["sop"]["sop"], "NSP-pretrained on SOP pairs",
                   chance["sop"])),
        _claim("A model pretrained with SOP does NSP reasonably",
               "SOP-pretrained: 78.9% on NSP (86.5% on SOP)",
               verdicts.above_chance(
                   by_task["sop"]["nsp"], examples["nsp"],
                   (by_task["sop"]["sop"], examples["sop"], chance["sop"]),
                   "SOP-pretrained on NSP pairs", chance["nsp"],
                   reference=by_task["nsp"]["nsp"])),
        _claim("SOP pretraining gives the better downstream model",
               "downstream average 80.1 after SOP vs 79.2 after NSP",
               verdicts.better_mean(
                   downstream["sop"], downstream["nsp"],
                   "dev accuracy, SOP-pretrained minus NSP-pretrained "
                   "(means over seeds)")),
    ]


def claims_parity(result):
    """Study 4's claim: we learn as well as keras-hub."""
    test = result["test"]
    if test["tolerance"] is None:
        reason = ("held-out MLM loss, keras-hub minus ours: %+.4f; one seed "
                  "gives no spread to set a tolerance" % test["difference"])
    else:
        reason = ("held-out MLM loss, keras-hub minus ours: %+.4f, "
                  "tolerance ±%.4f (95%% t-test, pooled seed spread %.4f)"
                  % (test["difference"], test["tolerance"],
                     test["pooled_spread"]))
    return [{"claim": "This project's ALBERT learns as well as keras-hub's",
             "paper": "(not a paper claim: the check that the miniature's "
                      "model is a faithful ALBERT)",
             "verdict": test["verdict"], "reason": reason}]
