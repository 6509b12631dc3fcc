"""The whole study: data, the four studies, their verdicts and the report."""

import dataclasses
import json
import os
import time

from absl import logging

from albert_apps.quickstart import model_config
from albert_tf.training import hardware
from albert_tf.training import input_pipeline
from benchmarks.paper_claims import data as data_lib
from benchmarks.paper_claims import report
from benchmarks.paper_claims import runs
from benchmarks.paper_claims import studies

DEFAULT_STEPS = 1500
QUICK_STEPS = 30
QUICK_CORPUS_CHARS = 300_000
RESULTS = "results.json"  # Everything the report shows, under output_dir.


def _load():
    return "%.2f" % os.getloadavg()[0]


def _cpu_seconds():
    """CPU time of this process so far (user + system, all threads)."""
    times = os.times()
    return times.user + times.system


def _held_out_batch(data, size):
    """One batch of held-out SOP records, as training features."""
    dataset = input_pipeline.pretraining_dataset(
        data["sop"]["eval"], size, data["max_seq_length"],
        data["max_predictions_per_seq"], is_training=False)
    return next(iter(dataset))


def run(output_dir="runs/paper_claims", report_dir=None, input_file=None,
        quick=False, num_train_steps=0, seeds=0, command=None):
    """Runs the four studies and writes `paper_claims.md` and its PNG.

    Args:
        output_dir: data (`data/`) and the runs (`runs/<name>/`); a rerun
            with the same settings reuses finished runs.
        report_dir: where the report goes (default: `output_dir`).
        input_file: a corpus instead of the built-in one.
        quick: the reduced study (E = base and H, all-shared and
            not-shared, one seed, `QUICK_STEPS` steps, a smaller built-in
            corpus).
        num_train_steps: steps of every run (0: `DEFAULT_STEPS`, or
            `QUICK_STEPS` with `quick`).
        seeds: seeds of each model in the parity study (0: 3, or 1 with
            `quick`).
        command: how the study was started, for the report.

    Returns:
        The results (what the report shows, also written to
        `<output_dir>/results.json`), with `report` (the paths written).

    Raises:
        ValueError: bad settings or data (from the libraries).
    """
    start, start_load = time.time(), _load()
    data = data_lib.build_data(
        os.path.join(output_dir, "data"), input_file=input_file,
        max_corpus_chars=QUICK_CORPUS_CHARS if quick and not input_file
        else None)
    data_seconds = time.time() - start
    base_config = model_config(data["vocabulary"]["pieces"],
                               data["max_seq_length"])
    recipe = runs.Recipe(
        num_train_steps=num_train_steps or (
            QUICK_STEPS if quick else DEFAULT_STEPS),
        checkpoints=2 if quick else runs.Recipe.checkpoints)
    plan = studies.make_plan(base_config, quick=quick, seeds=seeds)
    runner = studies.Runner(base_config, recipe, data,
                            os.path.join(output_dir, "runs"))
    batch = _held_out_batch(data, recipe.eval_batch_size)
    work = {
        "factorization": lambda: studies.study_factorization(runner, plan),
        "sharing": lambda: studies.study_sharing(runner, plan),
        "sop_nsp": lambda: studies.study_sop_nsp(runner, plan),
        "parity": lambda: studies.study_parity(runner, plan, batch),
    }
    results = {}
    for key, study in work.items():
        logging.info("Study %s", report.STUDY_TITLES[key])
        load = _load()
        results[key] = studies.timed(study)
        results[key]["load"] = (load, _load())
    result = {
        "command": command or "benchmarks.paper_claims.run()",
        "hardware": hardware.describe(), "data": data,
        "config": base_config.to_dict(), "recipe": dataclasses.asdict(recipe),
        "plan": dataclasses.asdict(plan), "studies": results,
        "data_seconds": data_seconds, "seconds": time.time() - start,
        "cpu_seconds": _cpu_seconds(), "cores": os.cpu_count(),
        "load": (start_load, _load())}
    judge(result)
    result["report"] = report.write_report(result, report_dir or output_dir)
    with open(os.path.join(output_dir, RESULTS), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    return result


def judge(result):
    """Adds the seed spread and every study's verdicts to `result` (what
    `run` measured, or its `results.json` read back), in place.

    Returns:
        `result`.
    """
    studies_done, config = result["studies"], result["config"]
    spread = studies.seed_spread(studies_done["parity"])
    result["seed_spread"] = spread
    studies_done["factorization"]["claims"] = studies.claims_factorization(
        studies_done["factorization"], spread, config["embedding_size"],
        config["hidden_size"])
    studies_done["sharing"]["claims"] = studies.claims_sharing(
        studies_done["sharing"], spread)
    studies_done["sop_nsp"]["claims"] = studies.claims_sop_nsp(
        studies_done["sop_nsp"])
    studies_done["parity"]["claims"] = studies.claims_parity(
        studies_done["parity"])
    return result
