"""The whole quickstart job: the eight stages in order, resuming.

`run` calls one function per stage (`albert_apps.quickstart.stages`, then
`albert_apps.quickstart.report`) and skips the stages whose outputs are
current (`albert_apps.quickstart.resume`), logging each stage's start, end and
time.
"""

import contextlib
import os
import time

from absl import logging

from albert_apps.quickstart import inputs
from albert_apps.quickstart import report as report_lib
from albert_apps.quickstart import resume
from albert_apps.quickstart import stage_results
from albert_apps.quickstart import stages
from albert_apps.quickstart import stages_downstream

STAGES = ("corpus", "vocab", "records", "pretrain", "export", "finetune",
          "query", "report")


class StageTimer:
    """Logs each stage's start, end and time; records them for the report."""

    def __init__(self):
        self.timings = {}

    @contextlib.contextmanager
    def stage(self, name):
        """Times the stage `name` (a `stage_results.StageTime`); the body
        sets its `skipped` when the stage's outputs were reused."""
        index = STAGES.index(name) + 1
        logging.info("==== [%d/%d] %s ...", index, len(STAGES), name)
        start = time.time()
        entry = stage_results.StageTime()
        yield entry
        entry.seconds = round(time.time() - start, 2)
        self.timings[name] = entry
        logging.info("==== [%d/%d] %s %s in %.1f s", index, len(STAGES), name,
                     "skipped (outputs exist)" if entry.skipped else "done",
                     entry.seconds)


def _reuse(entry, current):
    """Marks the stage skipped when there is a `current` result to reuse."""
    entry.skipped = current is not None
    return entry.skipped


def _data_stages(timer, data_dir, input_file, max_corpus_chars, vocab_size,
                 num_threads, dupe_factor, shape):
    """Stages 1-3: the corpus, the vocabulary and the pretraining records,
    each reused when current.

    Returns:
        (corpus, vocabulary, records): what the stages returned.
    """
    with timer.stage("corpus") as entry:
        corpus = resume.current_corpus(data_dir, input_file, max_corpus_chars)
        if not _reuse(entry, corpus):
            corpus = stages.write_corpus(data_dir, input_file, max_corpus_chars)
    with timer.stage("vocab") as entry:
        vocabulary = resume.current_vocabulary(corpus, data_dir, vocab_size)
        if not _reuse(entry, vocabulary):
            vocabulary = stages.build_vocabulary(corpus, data_dir, vocab_size,
                                                 num_threads)
    with timer.stage("records") as entry:
        records = resume.current_records(corpus, vocabulary, data_dir,
                                         dupe_factor=dupe_factor, **shape)
        if not _reuse(entry, records):
            records = stages.build_records(corpus, vocabulary, data_dir,
                                           dupe_factor=dupe_factor, **shape)
    return corpus, vocabulary, records


def _finetune_stage(timer, corpus, vocabulary, records, trained, exported,
                    output_dir, max_seq_length, finetune_seeds,
                    finetune_steps):
    """Stage 6: the downstream tasks (`stages_downstream.finetune`), reused when
    current; the tasks held-out SOP rules out (`stages_downstream.tasks_to_skip`)
    are skipped."""
    with timer.stage("finetune") as entry:
        held_out = report_lib.results(trained, records.baseline,
                                      records.eval.instances)
        tuning = dict(seeds=tuple(finetune_seeds),
                      num_train_steps=finetune_steps,
                      skipped=stages_downstream.tasks_to_skip(
                          held_out.sentence_order_verdict))
        finetuned = resume.current_finetune(exported, corpus, output_dir,
                                            **tuning)
        if not _reuse(entry, finetuned):
            finetuned = stages_downstream.finetune(
                exported, corpus, vocabulary, output_dir, max_seq_length,
                **tuning)
    return finetuned


def run(output_dir, input_file=None, max_corpus_chars=3_000_000,
        vocab_size=4000, max_seq_length=64,
        num_train_steps=stages.NUM_TRAIN_STEPS,
        train_seconds=stages.TRAIN_SECONDS, train_batch_size=32,
        dupe_factor=10,
        max_predictions_per_seq=None, save_checkpoints_steps=None,
        learning_rate=5e-3, max_eval_steps=None, num_threads=2, dtype="auto",
        finetune_seeds=stages_downstream.FINETUNE_SEEDS,
        finetune_steps=stages_downstream.FINETUNE_STEPS):
    """Runs (or resumes) the whole job; returns the
    `stage_results.Report`.

    Everything is checked first, and the folder held for this run alone
    (`inputs.claim_output`); then `run_claimed` runs the stages.

    Args:
        output_dir: where everything goes.
        input_file, max_corpus_chars: see `stages.write_corpus`.
        vocab_size, num_threads: see `stages.build_vocabulary`.
        max_seq_length: tokens a record, and T of the exported models.
        dupe_factor, max_predictions_per_seq: see `stages.build_records`.
        num_train_steps, train_seconds, train_batch_size,
            save_checkpoints_steps, learning_rate, max_eval_steps, dtype:
            see `stages.pretraining_options`.
        finetune_seeds, finetune_steps: see `stages_downstream.finetune`.

    Raises:
        ValueError: a bad setting or corpus, an output folder that cannot
            be written, is held by another job or holds a run of other
            inputs (one line naming the flag).
    """
    arguments = dict(locals())
    with inputs.claim_output(**arguments):
        return run_claimed(**arguments)


def run_claimed(output_dir, input_file=None, max_corpus_chars=3_000_000,
                vocab_size=4000, max_seq_length=64,
                num_train_steps=stages.NUM_TRAIN_STEPS,
                train_seconds=stages.TRAIN_SECONDS, train_batch_size=32,
                dupe_factor=10, max_predictions_per_seq=None,
                save_checkpoints_steps=None, learning_rate=5e-3,
                max_eval_steps=None, num_threads=2, dtype="auto",
                finetune_seeds=stages_downstream.FINETUNE_SEEDS,
                finetune_steps=stages_downstream.FINETUNE_STEPS):
    """Runs the stages in a folder `inputs.claim_output` checked and holds
    (the arguments are `run`'s); returns the `stage_results.Report`."""
    output_dir = os.path.abspath(output_dir)
    data_dir = os.path.join(output_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    start, timer = time.time(), StageTimer()
    shape = dict(max_seq_length=max_seq_length,
                 max_predictions_per_seq=max_predictions_per_seq)
    corpus, vocabulary, records = _data_stages(
        timer, data_dir, input_file, max_corpus_chars, vocab_size,
        num_threads, dupe_factor, shape)
    with timer.stage("pretrain") as entry:
        trained = stages.pretrain(
            records, vocabulary, os.path.join(output_dir, "pretrain"),
            num_train_steps=num_train_steps, train_seconds=train_seconds,
            train_batch_size=train_batch_size, learning_rate=learning_rate,
            save_checkpoints_steps=save_checkpoints_steps,
            max_eval_steps=max_eval_steps, dtype=dtype, **shape)
        entry.skipped = trained.resumed_from_step >= num_train_steps
    with timer.stage("export") as entry:
        exported = resume.current_export(trained, output_dir)
        if not _reuse(entry, exported):
            exported = stages.export_model(trained, vocabulary, output_dir,
                                           max_seq_length)
    finetuned = _finetune_stage(
        timer, corpus, vocabulary, records, trained, exported, output_dir,
        max_seq_length, finetune_seeds, finetune_steps)
    with timer.stage("query"):
        answers = stages_downstream.query(exported.paths["serving"],
                                          finetuned, corpus, vocabulary)
    report = stage_results.Report(
        output_dir=output_dir, corpus=corpus, vocab=vocabulary,
        records=records, pretrain=trained, export=exported,
        finetune=finetuned, queries=answers)
    with timer.stage("report"):
        report_lib.summarize(report)
    report.stages = timer.timings
    report.seconds = round(time.time() - start, 1)
    report_lib.write_report(report)
    return report
