"""Step parity: the same steps here (through the project's `Trainer`) and
in PyTorch (the official AdamW rule), compared loss by loss and tensor
by tensor.
"""

import dataclasses
import os

import numpy as np

from benchmarks.finetune_parity.reference import OfficialAdamW
from benchmarks.finetune_parity.reference import _batch
from benchmarks.finetune_parity.reference import _ClassifierModel
from benchmarks.finetune_parity.reference import _SpanModel
from benchmarks.finetune_parity.reference import _torch
from benchmarks.finetune_parity.reference import decays
from benchmarks.finetune_parity.reference import reference_config
from benchmarks.finetune_parity.stats import cosine
from benchmarks.finetune_parity.stats import relative_difference
from benchmarks.finetune_parity.tasks import _config_file

# Tensors whose gradient is zero in exact arithmetic: a softmax ignores a
# shift shared by all its inputs, and these biases add one to every
# attention score of a query (the key bias) or to every start (end) logit.
SHIFT_INVARIANT = ("attention.key.bias", "qa_outputs.bias")


# === Step parity: this side, through the project's Trainer ===

INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _head_paths(model):
    """`{keras path: value}` of the task model's own (non-encoder) weights."""
    encoder = {id(v) for v in model.encoder.weights}
    return {v.path: np.array(v.numpy()) for v in model.weights
            if id(v) not in encoder}


def run_ours_steps(data, init_checkpoint, config_file, output_dir, steps,
                   batch_size, learning_rate, warmup, seed):
    """Fine-tunes with the project's `Trainer`, one step per loop.

    Returns:
        A dict: `losses` per step, `order` (example indices of each batch),
        `initial_heads` and `final` (`{hf name: array}`), `encoder` (the
        final encoder tensors by official name).
    """
    import keras
    import tensorflow as tf

    from albert_tf.convert import weight_set
    from albert_tf.models import task_models
    from albert_tf.tasks import finetuning_task
    from albert_tf.tasks import options as options_lib

    kind = data.kind
    if kind == "classification":
        options = options_lib.ClassifierOptions(
            task_name="sst-2", data_dir=output_dir)
        loss_fn = finetuning_task.classification_loss
    else:
        options = options_lib.SquadOptions(
            train_file=data.extra["train_file"],
            version_2_with_negative=kind == "squad_v2.0")
        loss_fn = finetuning_task.span_loss
    options = dataclasses.replace(
        options, output_dir=output_dir, init_checkpoint=init_checkpoint,
        albert_config_file=config_file, do_train=True, train_step=steps,
        warmup_step=warmup, learning_rate=learning_rate,
        train_batch_size=batch_size, dropout=0.0, iterations_per_loop=1,
        save_checkpoints_steps=steps, jit_compile=False, seed=seed,
        dtype="float32", optimizer="adamw")
    initial = {}

    def model_fn(dtype):
        encoder = finetuning_task.encoder_from_checkpoint(init_checkpoint, config_file,
                                                          dtype)
        if kind == "classification":
            model = task_models.AlbertClassifier(encoder, data.num_classes,
                                                 dropout=0.0)
        else:
            model = task_models.AlbertSpanExtractor(
                encoder, with_no_answer=kind == "squad_v2.0", dropout=0.0)
        initial.update(_head_paths(model))
        return model

    features = dict(data.train)
    features["example_index"] = np.arange(len(features[INPUTS[0]]),
                                          dtype=np.int32)
    task = finetuning_task.FinetuningTask(model_fn, loss_fn, features, seed=seed)
    trainer, report = finetuning_task.run_finetuning(task, options)
    losses = [loss for _, loss in report["train"]["history"]]
    # The batches it drew: the same dataset, the same seeds, read again.
    keras.utils.set_random_seed(seed)
    dataset = task.train_dataset(tf.distribute.InputContext(), batch_size, 0)
    order = [batch["example_index"].numpy()
             for batch in dataset.take(steps)]
    return {"losses": losses, "order": order, "initial_heads": initial,
            "final_heads": _head_paths(trainer.model),
            "encoder": weight_set.model_to_official(trainer.model.encoder),
            "config": trainer.model.encoder.config,
            "optimizer": trainer.optimizer, "model": trainer.model}


# Keras head paths -> the reference's names (kernels are transposed).
HEAD_NAMES = {
    "classifier/output/kernel": "classifier.weight",
    "classifier/output/bias": "classifier.bias",
    "span/output/kernel": "qa_outputs.weight",
    "span/output/bias": "qa_outputs.bias",
    "no_answer/output/kernel": "no_answer.weight",
    "no_answer/output/bias": "no_answer.bias",
}


def _head_name(path):
    for suffix, name in HEAD_NAMES.items():
        if path.endswith(suffix):
            return name
    raise KeyError(f"No reference name for the head weight. Received: {path}")


def ours_as_reference_names(result):
    """`{reference name: array}` of this side's final weights."""
    from albert_tf.convert import huggingface

    out = {}
    for rule in huggingface.rules(result["config"]):
        if rule.official in result["encoder"]:
            out[rule.external] = rule.to_external(result["encoder"][rule.official])
    for path, value in result["final_heads"].items():
        name = _head_name(path)
        out[name] = value.T if value.ndim == 2 else value
    return out


# === Step parity: the reference's steps, and the comparison ===

def run_reference_steps(data, hf_dir, ours, steps, learning_rate, warmup):
    """The same steps in PyTorch; returns `losses` and `final` weights."""
    torch, _ = _torch()
    torch.manual_seed(0)
    config = reference_config(hf_dir, dropout=0.0, num_labels=data.num_classes)
    if data.kind == "classification":
        model = _ClassifierModel(hf_dir, config)
        labels = ("label_ids",)
    else:
        model = _SpanModel(hf_dir, config, data.kind == "squad_v2.0")
        labels = ("start_positions", "end_positions", "is_impossible")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for path, value in ours["initial_heads"].items():
            name = _head_name(path)
            params[name].copy_(torch.tensor(value.T if value.ndim == 2
                                            else value))
    model.train()
    optimizer = OfficialAdamW(model.named_parameters(), learning_rate, steps,
                              warmup)
    losses = []
    for rows in ours["order"][:steps]:
        batch = _batch(torch, data.train, rows, INPUTS + labels)
        loss = model.loss(batch)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return {"losses": losses, "final": model.state(), "model": model}


def compare_steps(ours, reference, initial_reference):
    """The step-parity row: loss per step and every final tensor."""
    a = np.asarray(ours["losses"], np.float64)
    b = np.asarray(reference["losses"], np.float64)
    n = min(len(a), len(b))
    rel = relative_difference(a[:n], b[:n])
    theirs = reference["final"]
    mine = ours_as_reference_names(ours)
    rows = []
    for name, value in mine.items():
        if name not in theirs:
            continue
        start = initial_reference.get(name)
        row = {"tensor": name, "cosine": cosine(value, theirs[name]),
               "max_abs_diff": float(np.max(np.abs(value - theirs[name])))}
        if start is not None:
            row["update_cosine"] = cosine(value - start, theirs[name] - start)
            row["max_update"] = float(max(np.max(np.abs(value - start)),
                                          np.max(np.abs(theirs[name] - start))))
        rows.append(row)
    # A tensor whose gradient is zero in exact arithmetic moves by rounding
    # noise on both sides; its cosine says nothing, its largest difference
    # does.
    noise = [r for r in rows if r["tensor"].endswith(SHIFT_INVARIANT)]
    rows = [r for r in rows if not r["tensor"].endswith(SHIFT_INVARIANT)]
    first_step = next((i for i, r in enumerate(rel) if r > 1e-4), None)
    worst = min(rows, key=lambda r: r["cosine"])
    worst_update = min((r for r in rows if "update_cosine" in r),
                       key=lambda r: r["update_cosine"], default=None)
    return {
        "steps": int(n),
        "max_rel_loss_diff": float(rel.max()) if n else None,
        "first_step_over_1e-4": first_step,
        "first_loss": [float(a[0]), float(b[0])] if n else None,
        "last_loss": [float(a[n - 1]), float(b[n - 1])] if n else None,
        "min_weight_cosine": worst["cosine"],
        "min_weight_cosine_tensor": worst["tensor"],
        "min_update_cosine": (worst_update or {}).get("update_cosine"),
        "min_update_cosine_tensor": (worst_update or {}).get("tensor"),
        "tensors_compared": len(rows),
        "noise_only_tensors": {r["tensor"]: r["max_abs_diff"] for r in noise},
        "tensors_only_here": sorted(set(mine) - set(theirs)),
    }


def check_decay_sets(ours):
    """Reference names whose weight decay this side's optimizer decides
    otherwise than `decays` (should be none)."""
    from albert_tf.convert import huggingface
    from albert_tf.convert import names as names_lib

    optimizer = ours["optimizer"]
    by_path = {v.path: v for v in ours["model"].trainable_variables}
    official_to_path = {o: p for o, _, p in names_lib.official_variables(
        ours["config"])}
    disagree = []
    for rule in huggingface.rules(ours["config"]):
        path = official_to_path.get(rule.official)
        variable = by_path.get(path)
        if variable is None:
            continue
        if optimizer.uses_weight_decay(variable) != decays(rule.external):
            disagree.append(rule.external)
    return disagree


def step_parity(data, init_checkpoint, hf_dir, work_dir, steps, batch_size,
                learning_rate, seed=12345):
    config_file = _config_file(init_checkpoint, work_dir, 0.0)
    warmup = steps // 10
    ours = run_ours_steps(data, init_checkpoint, config_file,
                          os.path.join(work_dir, f"steps_{data.kind}"), steps,
                          batch_size, learning_rate, warmup, seed)
    initial = _initial_reference(data, hf_dir, ours)
    reference = run_reference_steps(data, hf_dir, ours, steps, learning_rate,
                                    warmup)
    row = compare_steps(ours, reference, initial)
    row["decay_disagreements"] = check_decay_sets(ours)
    row["losses_ours"] = [round(x, 7) for x in ours["losses"]]
    row["losses_reference"] = [round(x, 7) for x in reference["losses"]]
    return row


def _initial_reference(data, hf_dir, ours):
    """The reference's weights before the first step (heads copied)."""
    config = reference_config(hf_dir, dropout=0.0, num_labels=data.num_classes)
    if data.kind == "classification":
        model = _ClassifierModel(hf_dir, config)
    else:
        model = _SpanModel(hf_dir, config, data.kind == "squad_v2.0")
    state = model.state()
    for path, value in ours["initial_heads"].items():
        state[_head_name(path)] = value.T if value.ndim == 2 else value
    return state
