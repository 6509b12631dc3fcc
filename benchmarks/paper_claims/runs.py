"""One pretraining run of the study, and evaluations of its checkpoints.

Every run trains with `albert_tf.training.pretraining.run_pretraining` and
one `Recipe` (the same steps, batch, optimizer, schedule and evaluation for
every model of the study); a `RunSpec` says what varies: the embedding size,
the sharing scheme, the pretraining task (SOP or NSP records), the model
(this project's `AlbertPretrainer` or keras-hub's, see `peer`) and the seed.
Each run's folder keeps a `summary.json`; a rerun of the study with the same
settings reads it instead of training again.
"""

import dataclasses
import json
import os
import shutil
import time

import keras

from albert_apps import quickstart
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import checkpoint as checkpoint_lib
from albert_tf.training import pretraining
from albert_tf.training.options import PretrainingOptions
from albert_tf.training.trainer import build_trainer
from benchmarks.paper_claims import keras_hub_parity

SUMMARY = "summary.json"
MODELS = ("albert_tf", "keras_hub")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What every run of the study shares.

    Attributes:
        num_train_steps: optimizer steps.
        train_batch_size: the batch.
        learning_rate: peak learning rate (linear warmup over the first 5%
            of the steps, then linear decay to 0).
        optimizer: `lamb` (the official one) or `adamw`.
        checkpoints: evenly spaced checkpoints, each evaluated on the
            held-out records of the run's task.
        eval_batch_size: held-out batch.
        max_eval_steps: held-out batches per evaluation (at most).
        jit_compile: XLA for the training step. Fixed, so that no run spends
            steps timing the choice; off by default: on a 2-core CPU, XLA's
            compilation of each new model costs about what it saves over a
            few thousand steps of this small model.
    """

    num_train_steps: int = 1500
    train_batch_size: int = 32
    learning_rate: float = 5e-3
    optimizer: str = "lamb"
    checkpoints: int = 4
    eval_batch_size: int = 64
    max_eval_steps: int = 100
    jit_compile: bool = False


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What one run varies.

    Attributes:
        embedding_size: E.
        share: `all`, `attention`, `ffn` or `none`.
        task: `sop` or `nsp`: the records it is pretrained (and evaluated
            during training) on.
        model: `albert_tf` or `keras_hub`.
        seed: initialization and data order.
    """

    embedding_size: int
    share: str = "all"
    task: str = "sop"
    model: str = "albert_tf"
    seed: int = 0

    @property
    def name(self):
        """The run's folder name, e.g. `albert_tf_all_e64_sop_s0`."""
        return "%s_%s_e%d_%s_s%d" % (self.model, self.share,
                                     self.embedding_size, self.task, self.seed)


def model_config(base_config, spec):
    """`base_config` with the run's embedding size and sharing."""
    return dataclasses.replace(base_config, embedding_size=spec.embedding_size,
                               share=spec.share)


def parameter_counts(config, model="albert_tf"):
    """Exact counts: `encoder` (the paper's figure) and `total` (with the MLM
    and SOP heads)."""
    if model == "keras_hub":
        built = keras_hub_parity.peer_pretrainer(config)
        backbone = built.get_layer(keras_hub_parity.BACKBONE_NAME)
        return {"encoder": int(backbone.count_params()),
                "total": int(built.count_params())}
    return {"encoder": int(AlbertEncoder(config).count_params()),
            "total": int(AlbertPretrainer(config).count_params())}


def pretraining_options(config, recipe, data, spec, output_dir,
                        eval_task=None):
    """The `PretrainingOptions` of a run (evaluating on `eval_task`'s
    held-out records, by default those of the run's own task)."""
    steps = recipe.num_train_steps
    records = data[spec.task]
    return PretrainingOptions(
        input_file=records["train"], output_dir=output_dir, config=config,
        train_batch_size=recipe.train_batch_size,
        eval_batch_size=recipe.eval_batch_size,
        max_seq_length=data["max_seq_length"],
        max_predictions_per_seq=data["max_predictions_per_seq"],
        num_train_steps=steps, num_warmup_steps=max(1, steps // 20),
        learning_rate=recipe.learning_rate, optimizer=recipe.optimizer,
        save_checkpoints_steps=max(1, -(-steps // recipe.checkpoints)),
        iterations_per_loop=min(100, max(1, steps // recipe.checkpoints)),
        keep_checkpoint_max=recipe.checkpoints + 1, do_train=True,
        do_eval=True, max_eval_steps=recipe.max_eval_steps,
        eval_input_file=data[eval_task or spec.task]["eval"],
        seed=spec.seed, jit_compile=recipe.jit_compile)


def task_for(spec, options):
    """The `PretrainingTask` that trains the run's model."""
    if spec.model == "keras_hub":
        return keras_hub_parity.PeerPretrainingTask(options)
    return pretraining.PretrainingTask(options)


def _settings(config, recipe, data, spec):
    """What a finished run depends on (a stored summary with other settings
    is stale)."""
    return {"config": config.to_dict(), "recipe": dataclasses.asdict(recipe),
            "spec": dataclasses.asdict(spec),
            "data": {task: data[task] for task in ("sop", "nsp")},
            "corpus": {k: data["corpus"].get(k) for k in (
                "documents", "sentences", "characters", "settings")}}


def run(base_config, recipe, data, spec, runs_dir):
    """Pretrains one model (or reads the summary of an identical earlier run).

    Args:
        base_config: the study's `AlbertConfig` (E and sharing replaced).
        recipe: the `Recipe`.
        data: what `data.build_data` returned.
        spec: the `RunSpec`.
        runs_dir: the folder of all runs; this one is `<runs_dir>/<name>`.

    Returns:
        A dict: `name`, `spec`, `parameters` (see `parameter_counts`),
        `seconds` (training and its evaluations), `reused`, `curve` (one
        entry per checkpoint: `step` and the four held-out metrics),
        `final` (the last checkpoint's), `checkpoints` (their paths) and
        `output_dir`.
    """
    config = model_config(base_config, spec)
    output_dir = os.path.join(runs_dir, spec.name)
    summary_path = os.path.join(output_dir, SUMMARY)
    settings = json.loads(json.dumps(_settings(config, recipe, data, spec)))
    if os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
        if summary.get("settings") == settings:
            return dict(summary, reused=True)
    # A run of other settings (or an interrupted one) starts over.
    shutil.rmtree(output_dir, ignore_errors=True)
    options = pretraining_options(config, recipe, data, spec, output_dir)
    start = time.time()
    report = pretraining.run_pretraining(options, task=task_for(spec, options))
    seconds = time.time() - start
    curve = [{"step": r["global_step"], **{
        k: r[k] for k in ("masked_lm_accuracy", "masked_lm_loss",
                          "sentence_order_accuracy", "sentence_order_loss",
                          "eval_batches")}} for r in report["eval_results"]]
    summary = {"name": spec.name, "spec": dataclasses.asdict(spec),
               "parameters": parameter_counts(config, spec.model),
               "seconds": round(seconds, 1), "curve": curve,
               "final": curve[-1],
               "checkpoints": [os.path.join(output_dir, r["checkpoint"])
                               for r in report["eval_results"]],
               "output_dir": output_dir, "settings": settings}
    with open(summary_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    os.replace(summary_path + ".tmp", summary_path)
    return dict(summary, reused=False)


def evaluate(base_config, recipe, data, summary, eval_task, checkpoint=None):
    """Held-out metrics of a run's checkpoint on `eval_task`'s records.

    The run's own evaluation (`PretrainingTask.evaluate`) on other records:
    the SOP head of an NSP-trained model is the same 2-way classifier, so it
    is scored on sentence order as it is, and the other way round.

    Args:
        base_config, recipe, data: as for `run`.
        summary: what `run` returned.
        eval_task: `sop` or `nsp`.
        checkpoint: a checkpoint path (default: the run's last).

    Returns:
        The four official metrics and `eval_batches`.
    """
    spec = RunSpec(**summary["spec"])
    options = pretraining_options(model_config(base_config, spec), recipe,
                                  data, spec, summary["output_dir"],
                                  eval_task=eval_task)
    task = task_for(spec, options)
    trainer = build_trainer(task, options)
    trainer.checkpoints.restore_weights(
        checkpoint or summary["checkpoints"][-1])
    return task.evaluate(trainer.evaluator)


def finetune(base_config, data, summary, seed, num_train_steps):
    """Dev accuracy of the quickstart's downstream task, fine-tuned from a
    run's last checkpoint (or, with `summary` None, from a random
    initialization drawn with `seed`).

    Args:
        base_config, data: as for `run`.
        summary: what `run` returned (an `albert_tf` model), or None.
        seed: seeds the fine-tuning (and the random initialization).
        num_train_steps: fine-tuning steps.

    Returns:
        What `albert_apps.quickstart.finetune` returned, without its model.
    """
    keras.utils.set_random_seed(seed)
    if summary is None:
        encoder = AlbertEncoder(base_config)
    else:
        spec = RunSpec(**summary["spec"])
        pretrainer = AlbertPretrainer(model_config(base_config, spec))
        checkpoint_lib.restore_model(pretrainer, summary["checkpoints"][-1])
        encoder = pretrainer.encoder
    result = quickstart.finetune(
        encoder, data["vocabulary"]["model_file"],
        quickstart.load_task(data["task_dir"]), seed=seed,
        num_train_steps=num_train_steps,
        max_seq_length=data["max_seq_length"])
    result.pop("model")
    return result
