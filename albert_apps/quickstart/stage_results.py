"""What each stage of the quickstart returns, and the report they make.

Each stage hands the next a dataclass of this module; the stage writes it
as JSON next to its outputs (`to_json(result, stage_file=True)`), and a
rerun reads it back (`from_json` of its class) to tell whether the stage may
be skipped (`albert_apps.quickstart.resume`). The report (`Report`) holds
every stage's result and is written whole as `report.json`.

Rows that other libraries return (the evaluation rows of
`albert_tf.training.results`, a fine-tuning run of `finetuning.Finetuner`,
each fill-mask query of `queries.fill_mask`) stay the dicts they are.
"""

import dataclasses
from typing import Optional

from albert_apps.quickstart.downstream import TaskFiles

# Field metadata: left out of the stage's own JSON file (only in the
# report), or left out of any JSON when None.
_REPORT_ONLY = {"report_only": True}
_OMIT_NONE = {"omit_none": True}


def to_json(value, stage_file=False):
    """`value` as JSON values: dataclasses become dicts of their fields.

    Args:
        value: a dataclass of this module, or JSON values holding some.
        stage_file: leave out the fields only the report shows (a stage's
            own file has them not).
    """
    if dataclasses.is_dataclass(value):
        out = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if stage_file and field.metadata.get("report_only"):
                continue
            if item is None and field.metadata.get("omit_none"):
                continue
            out[field.name] = to_json(item, stage_file)
        return out
    if isinstance(value, dict):
        return {key: to_json(item, stage_file) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item, stage_file) for item in value]
    return value


class _Json:
    """`to_json` as a method, and `from_json` for flat dataclasses."""

    def to_json(self, stage_file=False):
        """This result as JSON values (see the module's `to_json`)."""
        return to_json(self, stage_file)

    @classmethod
    def from_json(cls, value):
        """The result a stage wrote (what `to_json` gave)."""
        return cls(**value)


@dataclasses.dataclass
class Corpus(_Json):
    """Stage 1 (`stages.write_corpus`): the corpus split in three.

    Fields: the counts of `data.split_corpus` (`documents`, `sentences`,
    `characters` of the pretraining and held-out text, `train_documents`,
    `eval_documents`, `downstream_documents`); `settings` (what the corpus
    depends on, `stages.corpus_settings`); `source` (in words); the three
    text files; `downstream_every` (one document in this many of a user's
    corpus went downstream; None for the built-in corpus); `tasks` (the
    downstream tasks written, `downstream.TaskFiles`).
    """

    documents: int
    sentences: int
    characters: int
    train_documents: int
    eval_documents: int
    downstream_documents: int
    settings: dict
    source: str
    train_file: str
    eval_file: str
    downstream_file: str
    downstream_every: Optional[int]
    tasks: list

    @classmethod
    def from_json(cls, value):
        return cls(**dict(value, tasks=[TaskFiles(**t)
                                        for t in value["tasks"]]))


@dataclasses.dataclass
class Vocabulary(_Json):
    """Stage 2 (`stages.build_vocabulary`): the SentencePiece model.

    Fields: `requested_size` (`--vocab_size`), `pieces` (what it holds),
    `model_file`, `vocab_file` and `corpus` (the corpus settings it was
    trained on).
    """

    requested_size: int
    pieces: int
    model_file: str
    vocab_file: str
    corpus: dict


@dataclasses.dataclass
class RecordFile(_Json):
    """One split's TFRecord file: `path`, `stats` (its statistics file)
    and `instances`."""

    path: str
    stats: str
    instances: int


@dataclasses.dataclass
class Baseline(_Json):
    """The masked-LM baseline of the held-out records: always predicting
    the most frequent masked token (`token_id`, `piece`) scores
    `masked_lm_accuracy` over `masked_tokens`; `records_mtime` ties it to
    the records it counted."""

    masked_lm_accuracy: float
    token_id: int
    piece: str
    masked_tokens: int
    records_mtime: float


@dataclasses.dataclass
class Records(_Json):
    """Stage 3 (`stages.build_records`): the `train` and `eval`
    `RecordFile`s and the held-out `Baseline`."""

    train: RecordFile
    eval: RecordFile
    baseline: Baseline

    @classmethod
    def from_json(cls, value):
        return cls(RecordFile(**value["train"]), RecordFile(**value["eval"]),
                   Baseline(**value["baseline"]))


@dataclasses.dataclass
class PretrainingRun(_Json):
    """Stage 4 (`stages.pretrain`): the model and its run.

    Fields: `output_dir`; `preset` (the model, in words); `parameters` (of
    the encoder); `steps` (done, over all runs); `resumed_from_step`;
    `dtype`; `num_train_steps`; `stopped_by_time_budget`;
    `seconds_this_run`; `train_batch_size`; `checkpoints` (of this run);
    `last_eval`, `best_eval` and `eval_curve` (rows of `eval_results.txt`:
    the last, the best and every checkpoint evaluated); `best_dir` and
    `eval_results` (their files).
    """

    output_dir: str
    preset: str
    parameters: int
    steps: int
    resumed_from_step: int
    dtype: str
    num_train_steps: int
    stopped_by_time_budget: bool
    seconds_this_run: float
    train_batch_size: int
    checkpoints: list
    last_eval: dict
    eval_curve: list
    best_eval: dict
    best_dir: str
    eval_results: str


@dataclasses.dataclass
class ExportedModels(_Json):
    """Stage 5 (`stages.export_model`): the best checkpoint's SavedModels.

    Fields: `checkpoint_step`; `paths` (by kind, what
    `pretrained_export.export_from_checkpoint` returned); `version`;
    `export_dir`; `reused` (a rerun found them current; not in
    `export.json`).
    """

    checkpoint_step: int
    paths: dict
    version: int
    export_dir: str
    reused: bool = dataclasses.field(default=False, metadata=_REPORT_ONLY)


@dataclasses.dataclass
class TaskResult(_Json):
    """One downstream task's probes (`stages_downstream.task_result`).

    Fields: `name`, `measures`, `labels`, `train_examples`,
    `dev_examples`, `short` (why fewer examples than wanted, or None);
    `runs` (the probe runs by initialization); by initialization
    (`pretrained`, `random_init`) the mean dev accuracy, its `_ci95` and
    `_seed_range`; `margin`, `margin_ci95` and `verdict`; `max_seq_length`;
    `classifier` (the exported SavedModel of the first task, else None) and
    `finetuned` (its fine-tuning run; left out of JSON for the others).
    """

    name: str
    measures: str
    labels: list
    train_examples: int
    dev_examples: int
    short: Optional[str]
    runs: dict
    pretrained: float
    pretrained_ci95: list
    pretrained_seed_range: list
    random_init: float
    random_init_ci95: list
    random_init_seed_range: list
    margin: float
    margin_ci95: list
    verdict: str
    max_seq_length: Optional[int] = None
    classifier: Optional[str] = None
    finetuned: Optional[dict] = dataclasses.field(default=None,
                                                  metadata=_OMIT_NONE)


@dataclasses.dataclass
class DownstreamResults(_Json):
    """Stage 6 (`stages_downstream.finetune`): the downstream tasks.

    Fields: `tasks` (`TaskResult`s); `method`; `encoders` (what was
    probed); `encoder_version` (the export measured); `settings`
    (`seeds`, `num_train_steps`, `tasks`); `skipped` (task -> why). Only in
    the report: `reused`; `verdicts` and `collapsed` (task -> its
    verdict, task -> its collapse warning), which stage 8 adds.
    """

    tasks: list
    method: str
    encoders: dict
    encoder_version: int
    settings: dict
    skipped: dict
    reused: bool = dataclasses.field(default=False, metadata=_REPORT_ONLY)
    verdicts: Optional[dict] = dataclasses.field(default=None,
                                                 metadata=_REPORT_ONLY)
    collapsed: Optional[dict] = dataclasses.field(default=None,
                                                  metadata=_REPORT_ONLY)

    @classmethod
    def from_json(cls, value):
        return cls(**dict(value, tasks=[TaskResult(**t)
                                        for t in value["tasks"]]))


@dataclasses.dataclass
class ServedClassifier(_Json):
    """A fine-tuned classifier asked through its SavedModel: `task`,
    `model`, `accuracy` over `dev_pairs`, and the first `examples` (dicts of
    `queries.classify`'s answers with the pair and its true label)."""

    task: str
    model: str
    accuracy: float
    dev_pairs: int
    examples: list


@dataclasses.dataclass
class FillMaskScores(_Json):
    """What `queries.fill_mask` returned: the `queries` answered (dicts),
    the model's top-1 and top-5 accuracies over all pieces and over the
    content words, and the frequency baseline's (`baseline_words`)."""

    queries: list
    top1_accuracy: float
    top5_accuracy: float
    content_top1_accuracy: float
    content_top5_accuracy: float
    baseline_words: list
    baseline_top1_accuracy: float
    baseline_top5_accuracy: float


@dataclasses.dataclass
class Answers(_Json):
    """Stage 7 (`stages_downstream.query`): `fill_mask` (a
    `FillMaskScores`), `model` (the SavedModel asked) and `classifiers`
    (`ServedClassifier`s)."""

    fill_mask: FillMaskScores
    model: str
    classifiers: list


@dataclasses.dataclass
class CurvePoint(_Json):
    """One evaluated checkpoint: `step` and its held-out accuracies."""

    step: int
    masked_lm_accuracy: float
    sentence_order_accuracy: float


@dataclasses.dataclass
class Peak(_Json):
    """Where a metric peaked: `step`, `value`, and `last_within_noise`
    (the last checkpoint is within noise of it)."""

    step: int
    value: float
    last_within_noise: bool


@dataclasses.dataclass
class HeldOutResults(_Json):
    """The held-out accuracies of every checkpoint beside their baselines
    (`report.results`).

    Fields: the best checkpoint's (`checkpoint`, `masked_lm_accuracy`,
    `sentence_order_accuracy`) and the last's (`last_checkpoint`,
    `last_step`, `last_masked_lm_accuracy`,
    `last_sentence_order_accuracy`); `peaks` (metric -> `Peak`); `curve`
    (`CurvePoint`s); the baselines (`masked_lm_baseline`,
    `masked_lm_baseline_piece`, `sentence_order_baseline`); the last
    checkpoint's intervals (`masked_lm_ci95`, `sentence_order_ci95`) and
    `sentence_order_verdict`; `independent_pairs`; `evaluated_on` (in
    words).
    """

    checkpoint: str
    masked_lm_accuracy: float
    sentence_order_accuracy: float
    last_checkpoint: str
    last_step: int
    last_masked_lm_accuracy: float
    last_sentence_order_accuracy: float
    peaks: dict
    curve: list
    masked_lm_baseline: float
    masked_lm_baseline_piece: str
    masked_lm_ci95: list
    sentence_order_baseline: float
    sentence_order_ci95: list
    sentence_order_verdict: str
    independent_pairs: int
    evaluated_on: str


@dataclasses.dataclass
class StageTime(_Json):
    """A stage's time: `seconds`, and `skipped` (its outputs were reused)."""

    skipped: bool = False
    seconds: Optional[float] = None


@dataclasses.dataclass
class Report(_Json):
    """The whole job's report (`report.json`).

    Fields: `output_dir`; the stages' results (`corpus`, `vocab`,
    `records`, `pretrain`, `export`, `finetune`, `queries`); what stage 8
    adds (`results`, a `HeldOutResults`; `plot` and `plot_points`, the
    curves; `machine`; `tensorboard`, its command; `report_files`); and
    `stages` (name -> `StageTime`) and `seconds`, the job's times.
    """

    output_dir: str
    corpus: Corpus
    vocab: Vocabulary
    records: Records
    pretrain: PretrainingRun
    export: ExportedModels
    finetune: DownstreamResults
    queries: Answers
    results: Optional[HeldOutResults] = None
    plot: Optional[str] = None
    plot_points: Optional[dict] = None
    machine: Optional[str] = None
    tensorboard: Optional[str] = None
    report_files: Optional[list] = None
    stages: Optional[dict] = None
    seconds: Optional[float] = None
