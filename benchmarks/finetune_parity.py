"""Fine-tuning here against Hugging Face's PyTorch ALBERT: steps, features, outcome.

From one checkpoint of this project, converted with
`convert_checkpoint --target=huggingface`, both sides fine-tune on the same
data and are compared three ways (guide: docs/finetuning.md, "Parity with
the reference"):

- **Step parity.** Dropout off, float32, the same batches in the same order
  (the order this project's `FinetuningTask` draws), the same head weights at
  the start, and the project's official rule on the PyTorch side too: AdamW
  as released (no bias correction, weight decay 0.01 added to the update,
  LayerNorm and bias excluded, epsilon 1e-6), `WarmupPolynomialDecay`
  (linear warmup from step 0, linear decay counted from step 0) and clipping
  to global norm 1.0 with TensorFlow's formula; `torch.optim.AdamW` differs in
  the first two points. This side runs the project's own `Trainer`; the
  reference runs `transformers`' `AlbertForSequenceClassification` and
  `AlbertForQuestionAnswering`. The span heads: the reference's `qa_outputs`
  with this project's padding mask on the logits, and for SQuAD v2.0 a
  no-answer logit on the pooled output (`transformers` has no v2.0 head).
  The loss of every step and every final tensor are compared.
- **SQuAD features.** `albert_tf.tasks.squad.convert_examples` against the
  reference's offset-mapping preprocessing (`transformers`' ALBERT tokenizer on
  the same SentencePiece model, the windows of `return_overflowing_tokens`
  with `stride`, answers located through `offset_mapping`), every difference
  counted by cause.
- **Outcome.** Each side with its own default recipe (dropout on): here the
  `run_classifier` / `run_squad` jobs, there `torch.optim.AdamW` with the
  usual grouping (no decay on bias and LayerNorm weights, epsilon 1e-8),
  `get_linear_schedule_with_warmup`, `clip_grad_norm_`, the reference's
  tokenizer, features and answer post-processing, scored with a
  transcription of the official SQuAD evaluation scripts. Several seeds a
  side, the difference of means with its Welch 95% interval, and a verdict.

    python -m benchmarks.finetune_parity --output_dir=parity
        [--init_checkpoint=DIR] [--task_name=sst-2 --data_dir=DIR]
        [--train_file=F --predict_file=F] [--steps=200] [--seeds=5]

Without `--init_checkpoint` a tiny model is built (random weights, a
SentencePiece model trained on the built-in text); without the data flags a
classification task and SQuAD-format files are made from the docstrings of
the standard library. PyTorch and `transformers` come from
`requirements-peers.txt`. Writes `parity.json` and prints the tables.
"""

import collections
import dataclasses
import json
import math
import os
import platform
import random
import re
import string
import sys
import time

import numpy as np

from data_prep import safe_io

DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")
TINY_CONFIG = dict(vocab_size=2000, embedding_size=32, hidden_size=64,
                   num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1,
                   num_attention_heads=2, intermediate_size=128,
                   hidden_act="gelu", hidden_dropout_prob=0.1,
                   attention_probs_dropout_prob=0.1,
                   max_position_embeddings=256, type_vocab_size=2,
                   initializer_range=0.02)
# The classification task: which libraries a docstring sentence comes from
# (label 0: the first group, 1: the second).
CLASS_PACKAGES = (("tkinter", "asyncio"), ("email", "logging"))
SQUAD_PACKAGES = ("asyncio", "distutils", "logging", "importlib", "xml",
                  "lib2to3", "unittest", "http", "urllib")
# Verdict: "same within noise" only when the interval lies inside this.
SAME_WITHIN = 1.0
# Tensors whose gradient is zero in exact arithmetic: a softmax ignores a
# shift shared by all its inputs, and these biases add one to every
# attention score of a query (the key bias) or to every start (end) logit.
SHIFT_INVARIANT = ("attention.key.bias", "qa_outputs.bias")


# === Statistics ===

def _t_quantile(df, q=0.975):
    """The Student t quantile (bisection on the regularized incomplete beta)."""
    if df > 1e6:
        return 1.959963984540054

    def cdf(t):
        x = df / (df + t * t)
        return 1.0 - 0.5 * _betainc(df / 2.0, 0.5, x)

    low, high = 0.0, 100.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if cdf(mid) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def _betainc(a, b, x):
    """Regularized incomplete beta I_x(a, b) (continued fraction)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log(1.0 - x))
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            numerator = 1.0
        elif i % 2 == 0:
            numerator = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            numerator = -((a + m) * (a + b + m) * x
                          / ((a + 2 * m) * (a + 2 * m + 1)))
        d = 1.0 + numerator * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + numerator / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1.0 - c * d) < 1e-12:
            break
    return front * (f - 1.0) / a


def welch_interval(a, b, level=0.975):
    """`(mean(a) - mean(b), low, high)`: Welch's 95% interval of the gap."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    diff = float(a.mean() - b.mean())
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = _t_quantile(df, level) * se
    return diff, diff - half, diff + half


def verdict(low, high, margin=SAME_WITHIN):
    """"same within noise" when `[low, high]` lies inside `±margin`;
    "differs" when it excludes 0; else "can't tell"."""
    if -margin < low and high < margin:
        return "same within noise"
    if low > 0.0 or high < 0.0:
        return "differs"
    return "can't tell"


def cosine(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(a @ b / (na * nb))


def relative_difference(a, b):
    """`|a - b| / max(|a|, |b|)`, elementwise (0 where both are 0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    return np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1), 0)


# === The official SQuAD evaluation scripts, transcribed ===

def _official_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_squad_v1(dataset, predictions):
    """`evaluate` of the official SQuAD v1.1 script: `exact_match`, `f1`."""
    def f1_score(prediction, ground_truth):
        prediction_tokens = _official_normalize(prediction).split()
        ground_truth_tokens = _official_normalize(ground_truth).split()
        common = (collections.Counter(prediction_tokens)
                  & collections.Counter(ground_truth_tokens))
        num_same = sum(common.values())
        if num_same == 0:
            return 0
        precision = 1.0 * num_same / len(prediction_tokens)
        recall = 1.0 * num_same / len(ground_truth_tokens)
        return (2 * precision * recall) / (precision + recall)

    def exact_match_score(prediction, ground_truth):
        return (_official_normalize(prediction)
                == _official_normalize(ground_truth))

    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                ground_truths = [x["text"] for x in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += max(exact_match_score(prediction, gt)
                                   for gt in ground_truths)
                f1 += max(f1_score(prediction, gt) for gt in ground_truths)
    return {"exact_match": 100.0 * exact_match / total,
            "f1": 100.0 * f1 / total}


def official_squad_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
    """`main` of the official SQuAD v2.0 script, as a dict (every question
    needs a prediction there, as in the script)."""
    qid_to_has_ans = {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid_to_has_ans[qa["id"]] = bool(qa["answers"])
    has_ans = [k for k, v in qid_to_has_ans.items() if v]
    no_ans = [k for k, v in qid_to_has_ans.items() if not v]

    def compute_f1(a_gold, a_pred):
        gold_toks = _official_normalize(a_gold).split() if a_gold else []
        pred_toks = _official_normalize(a_pred).split() if a_pred else []
        common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
        num_same = sum(common.values())
        if len(gold_toks) == 0 or len(pred_toks) == 0:
            return int(gold_toks == pred_toks)
        if num_same == 0:
            return 0
        precision = 1.0 * num_same / len(pred_toks)
        recall = 1.0 * num_same / len(gold_toks)
        return (2 * precision * recall) / (precision + recall)

    exact_scores, f1_scores = {}, {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid = qa["id"]
                gold_answers = [a["text"] for a in qa["answers"]
                                if _official_normalize(a["text"])]
                if not gold_answers:
                    gold_answers = [""]
                if qid not in preds:
                    continue
                a_pred = preds[qid]
                exact_scores[qid] = max(
                    int(_official_normalize(a) == _official_normalize(a_pred))
                    for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    if na_probs is None:
        probs = {k: 0.0 for k in preds}
    else:
        probs = na_probs

    def apply_no_ans_threshold(scores):
        new_scores = {}
        for qid, s in scores.items():
            pred_na = probs[qid] > na_prob_thresh
            new_scores[qid] = float(not qid_to_has_ans[qid]) if pred_na else s
        return new_scores

    exact_thresh = apply_no_ans_threshold(exact_scores)
    f1_thresh = apply_no_ans_threshold(f1_scores)

    def make_eval_dict(qid_list=None):
        if not qid_list:
            total = len(exact_thresh)
            return {"exact": 100.0 * sum(exact_thresh.values()) / total,
                    "f1": 100.0 * sum(f1_thresh.values()) / total,
                    "total": total}
        total = len(qid_list)
        return {"exact": 100.0 * sum(exact_thresh[k] for k in qid_list) / total,
                "f1": 100.0 * sum(f1_thresh[k] for k in qid_list) / total,
                "total": total}

    out = make_eval_dict()
    if has_ans:
        out.update({"HasAns_" + k: v
                    for k, v in make_eval_dict(has_ans).items()})
    if no_ans:
        out.update({"NoAns_" + k: v for k, v in make_eval_dict(no_ans).items()})

    def find_best_thresh(scores):
        num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
        cur_score = num_no_ans
        best_score = cur_score
        best_thresh = 0.0
        qid_list = sorted(probs, key=lambda k: probs[k])
        for qid in qid_list:
            if qid not in scores:
                continue
            if qid_to_has_ans[qid]:
                diff = scores[qid]
            elif preds[qid]:
                diff = -1
            else:
                diff = 0
            cur_score += diff
            if cur_score > best_score:
                best_score = cur_score
                best_thresh = probs[qid]
        return 100.0 * best_score / len(scores), best_thresh

    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = find_best_thresh(
            exact_scores)
        out["best_f1"], out["best_f1_thresh"] = find_best_thresh(f1_scores)
    return out


# === Data made here ===

def _package_documents(packages):
    import sysconfig

    from data_prep import builtin_corpus

    stdlib = sysconfig.get_paths()["stdlib"]
    return {name: list(builtin_corpus.iter_documents(
        [os.path.join(stdlib, name)])) for name in packages}


def _clean(sentence):
    return " ".join(sentence.replace("\t", " ").split())


def write_classification_task(data_dir, max_train=1200, max_dev=800):
    """An SST-2-format folder: is a docstring sentence from `tkinter` or
    `asyncio` (0), or from `email` or `logging` (1)? Every fourth document
    goes to dev."""
    rows = {"train": [], "dev": []}
    for label, packages in enumerate(CLASS_PACKAGES):
        documents = _package_documents(packages)
        for d, doc in enumerate(doc for name in packages
                                for doc in documents[name]):
            split = "dev" if d % 4 == 3 else "train"
            rows[split] += [(_clean(s), str(label)) for s in doc if _clean(s)]
    rng = random.Random(0)
    os.makedirs(data_dir, exist_ok=True)
    for split, limit in (("train", max_train), ("dev", max_dev)):
        rng.shuffle(rows[split])
        text = "sentence\tlabel\n" + "".join(
            f"{s}\t{label}\n" for s, label in rows[split][:limit])
        safe_io.write_atomically(os.path.join(data_dir, f"{split}.tsv"), text)
    return data_dir


_WORD = re.compile(r"[A-Za-z]{5,}")
# Words of the sentence kept on each side of the blank of a question.
QUESTION_WORDS = 8


def _squad_records(docs, rng, with_impossible, per_doc=4):
    """Cloze questions: a sentence of the context with one word replaced by
    "what"; the answer is that word where it stands. With
    `with_impossible`, a third of the questions come from another
    document's sentence and have no answer."""
    paragraphs = []
    for d, doc in enumerate(docs):
        sentences = [_clean(s) for s in doc if _clean(s)][:10]
        if len(sentences) < 3:
            continue
        context = " ".join(sentences)
        qas = []
        for q in range(per_doc):
            impossible = with_impossible and q % 3 == 2
            source = (docs[(d + 7) % len(docs)] if impossible else sentences)
            source = [_clean(s) for s in source if _clean(s)]
            sentence = rng.choice(source)
            words = [m for m in _WORD.finditer(sentence)
                     if len(re.findall(r"\b%s\b" % m.group(), context)) == 1]
            if impossible:
                words = [m for m in _WORD.finditer(sentence)
                         if m.group() not in context]
            if not words:
                continue
            word = rng.choice(words)
            before = sentence[:word.start()].split()[-QUESTION_WORDS:]
            after = sentence[word.end():].split()[:QUESTION_WORDS]
            question = " ".join(before + ["what"] + after)
            qid = f"q{d}_{q}"
            if impossible:
                qas.append({"id": qid, "question": question, "answers": [],
                            "is_impossible": True})
                continue
            start = re.search(r"\b%s\b" % word.group(), context).start()
            qas.append({"id": qid, "question": question, "answers": [
                {"text": word.group(), "answer_start": start}]})
        if qas:
            paragraphs.append({"context": context, "qas": qas})
    return paragraphs


def write_squad_files(directory, version_2=False):
    """`train.json` and `dev.json` in the official SQuAD layout, from the
    docstrings of `SQUAD_PACKAGES`; every fifth document goes to dev."""
    rng = random.Random(1)
    docs = [doc for _, package in sorted(
        _package_documents(SQUAD_PACKAGES).items()) for doc in package]
    docs = [doc for doc in docs if len(doc) >= 3]
    splits = {"train": [d for i, d in enumerate(docs) if i % 5],
              "dev": [d for i, d in enumerate(docs) if i % 5 == 0]}
    os.makedirs(directory, exist_ok=True)
    paths = {}
    version = "v2.0" if version_2 else "1.1"
    for split, split_docs in splits.items():
        data = [{"title": "docstrings",
                 "paragraphs": _squad_records(split_docs, rng, version_2)}]
        paths[split] = os.path.join(directory, f"{split}.json")
        safe_io.write_atomically(paths[split], json.dumps(
            {"version": version, "data": data}))
    return paths["train"], paths["dev"]


def build_tiny_checkpoint(model_dir, seed=0):
    """A tiny model directory of this project: random weights and a
    SentencePiece model trained on the built-in docstrings."""
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.training import checkpoint
    from data_prep import vocab

    packages = sum(CLASS_PACKAGES, ()) + SQUAD_PACKAGES
    texts = [s for docs in _package_documents(packages).values()
             for doc in docs for s in doc]
    spm_bytes = vocab.model_from_texts(texts, TINY_CONFIG["vocab_size"],
                                       hard_vocab_limit=True)
    os.makedirs(model_dir, exist_ok=True)
    spm_file = os.path.join(model_dir, ".spm.model.tmp")
    with open(spm_file, "wb") as f:
        f.write(spm_bytes)
    keras.utils.set_random_seed(seed)
    model = AlbertPretrainer(AlbertConfig(**TINY_CONFIG))
    checkpoint.save_model_dir(model, model_dir, spm_model_file=spm_file)
    os.remove(spm_file)
    return model_dir


def convert_to_huggingface(init_checkpoint, output_dir):
    """What `python -m albert_tf.convert_checkpoint --source=albert_tf
    --target=huggingface` does."""
    from albert_tf.convert import pretrained

    if not os.path.isdir(output_dir):
        pretrained.convert_checkpoint(init_checkpoint, output_dir,
                                      source="albert_tf",
                                      target="huggingface")
    return output_dir


def _config_file(init_checkpoint, work_dir, dropout):
    """This project's config of `init_checkpoint`, with its dropout set."""
    from albert_tf.config import AlbertConfig
    from albert_tf.training import checkpoint

    path = checkpoint.find_in_model_dir(init_checkpoint,
                                        [checkpoint.CONFIG_NAME])
    config = AlbertConfig.from_json_file(path)
    if dropout is not None:
        config = dataclasses.replace(config, hidden_dropout_prob=dropout,
                                     attention_probs_dropout_prob=dropout)
    out = os.path.join(work_dir, f"albert_config_dropout{dropout}.json")
    config.to_json_file(out)
    return out


def _spm_file(init_checkpoint):
    from albert_tf.convert import pretrained

    return pretrained.spm_model_path(init_checkpoint)


# === Features of this side ===

@dataclasses.dataclass
class _TaskData:
    """One task's arrays on this side (inputs + labels), train and dev."""

    kind: str
    train: dict
    dev: dict = None
    num_classes: int = 2
    extra: dict = None


def classification_data(task_name, data_dir, spm_file, max_seq_length):
    from albert_tf.tasks import glue
    from albert_tf.tasks.tokenization import Tokenizer

    task = glue.get_task(task_name)
    tokenizer = Tokenizer(spm_file)
    arrays = {}
    for split in ("train", "dev"):
        examples, _ = glue.read_examples(task, data_dir, split)
        arrays[split], _ = glue.convert_examples(examples, task, tokenizer,
                                                 max_seq_length)
    return _TaskData("classification", arrays["train"], arrays["dev"],
                    task.num_classes)


def squad_data(train_file, spm_file, version_2, max_seq_length, doc_stride,
               max_query_length):
    from albert_tf.tasks import squad
    from albert_tf.tasks.tokenization import Tokenizer

    examples, _ = squad.read_examples(train_file, True, version_2)
    features = squad.convert_examples(
        examples, Tokenizer(spm_file), max_seq_length, doc_stride,
        max_query_length, is_training=True)
    kind = "squad_v2.0" if version_2 else "squad_v1.1"
    return _TaskData(kind, features.arrays, extra={"train_file": train_file})


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
    from albert_tf.tasks import finetune
    from albert_tf.tasks import options as options_lib

    kind = data.kind
    if kind == "classification":
        options = options_lib.ClassifierOptions(
            task_name="sst-2", data_dir=output_dir)
        loss_fn = finetune.classification_loss
    else:
        options = options_lib.SquadOptions(
            train_file=data.extra["train_file"],
            version_2_with_negative=kind == "squad_v2.0")
        loss_fn = finetune.span_loss
    options = dataclasses.replace(
        options, output_dir=output_dir, init_checkpoint=init_checkpoint,
        albert_config_file=config_file, do_train=True, train_step=steps,
        warmup_step=warmup, learning_rate=learning_rate,
        train_batch_size=batch_size, dropout=0.0, iterations_per_loop=1,
        save_checkpoints_steps=steps, jit_compile=False, seed=seed,
        dtype="float32", optimizer="adamw")
    initial = {}

    def model_fn(dtype):
        encoder = finetune.encoder_from_checkpoint(init_checkpoint, config_file,
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
    task = finetune.FinetuningTask(model_fn, loss_fn, features, seed=seed)
    trainer, report = finetune.run_finetuning(task, options)
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


# === Step parity: the reference side ===

def _torch():
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    return torch, transformers


def decays(name):
    """Whether the official AdamW decays the reference's tensor `name`."""
    return not any(re.search(p, name) for p in DECAY_EXCLUSIONS)


def official_learning_rate(step, peak, num_steps, warmup):
    """`WarmupPolynomialDecay` with power 1, as a float."""
    if warmup and step < warmup:
        return peak * step / warmup
    return peak * (1.0 - min(step, num_steps) / num_steps)


class OfficialAdamW:
    """The released AdamW on torch tensors: no bias correction, L2 decay
    added to the update (not on LayerNorm and bias), TensorFlow's global-norm
    clipping, the official schedule counted from step 0.

    Example:

    ```python
    import torch
    from benchmarks.finetune_parity import OfficialAdamW

    layer = torch.nn.Linear(4, 2)
    optimizer = OfficialAdamW(layer.named_parameters(), peak=1e-3,
                              num_steps=100, warmup=10)
    layer(torch.ones(3, 4)).square().mean().backward()
    optimizer.step()  # step 0: learning rate 0, the moments move
    ```
    """

    def __init__(self, named_parameters, peak, num_steps, warmup,
                 weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 clip_norm=1.0):
        import torch

        self.params = [(n, p) for n, p in named_parameters if p.requires_grad]
        self.state = {n: (torch.zeros_like(p), torch.zeros_like(p))
                      for n, p in self.params}
        self.peak, self.num_steps, self.warmup = peak, num_steps, warmup
        self.weight_decay, self.epsilon = weight_decay, epsilon
        self.beta_1, self.beta_2, self.clip_norm = beta_1, beta_2, clip_norm
        self.iterations = 0

    def step(self):
        import torch

        live = [(n, p) for n, p in self.params if p.grad is not None]
        with torch.no_grad():
            norm = torch.sqrt(sum(torch.sum(p.grad * p.grad) for _, p in live))
            # tf.clip_by_global_norm: g * c / max(norm, c).
            scale = self.clip_norm / torch.maximum(
                norm, torch.tensor(self.clip_norm))
            lr = official_learning_rate(self.iterations, self.peak,
                                        self.num_steps, self.warmup)
            for name, p in live:
                g = p.grad * scale
                m, v = self.state[name]
                m.mul_(self.beta_1).add_(g, alpha=1.0 - self.beta_1)
                v.mul_(self.beta_2).add_(g * g, alpha=1.0 - self.beta_2)
                update = m / (torch.sqrt(v) + self.epsilon)
                if self.weight_decay and decays(name):
                    update = update + self.weight_decay * p
                p.sub_(lr * update)
                p.grad = None
        self.iterations += 1


def _batch(torch, arrays, rows, names):
    return {name: torch.tensor(np.asarray(arrays[name])[rows])
            for name in names if name in arrays}


class _SpanModel:
    """The reference's span extractor: `AlbertForQuestionAnswering`'s
    `qa_outputs` over the sequence (with padding masked) and, for v2.0, a
    no-answer logit on the pooled output."""

    def __init__(self, hf_dir, config, with_no_answer):
        torch, transformers = _torch()
        if with_no_answer:
            self.albert = transformers.AlbertModel.from_pretrained(
                hf_dir, config=config)
            self.qa_outputs = torch.nn.Linear(config.hidden_size, 2)
            self.no_answer = torch.nn.Linear(config.hidden_size, 1)
            self.modules = {"albert": self.albert, "qa_outputs": self.qa_outputs,
                            "no_answer": self.no_answer}
        else:
            model = transformers.AlbertForQuestionAnswering.from_pretrained(
                hf_dir, config=config)
            self.albert, self.qa_outputs = model.albert, model.qa_outputs
            self.no_answer = None
            self.modules = {"albert": self.albert, "qa_outputs": self.qa_outputs}

    def named_parameters(self):
        for prefix, module in self.modules.items():
            for name, p in module.named_parameters():
                yield f"{prefix}.{name}", p

    def state(self):
        return {n: p.detach().numpy().copy() for n, p in self.named_parameters()}

    def train(self):
        for module in self.modules.values():
            module.train()

    def loss(self, batch):
        import torch

        mask = batch["input_mask"]
        out = self.albert(input_ids=batch["input_word_ids"].long(),
                          attention_mask=mask.long(),
                          token_type_ids=batch["input_type_ids"].long())
        logits = self.qa_outputs(out.last_hidden_state)  # [B, T, 2]
        logits = logits - 1e4 * (1.0 - mask.float())[:, :, None]
        start, end = logits[..., 0], logits[..., 1]
        ce = torch.nn.functional.cross_entropy
        loss = 0.5 * (ce(start, batch["start_positions"].long(), reduction="none")
                      + ce(end, batch["end_positions"].long(), reduction="none"))
        if self.no_answer is not None:
            na = self.no_answer(out.pooler_output)[:, 0]
            loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(
                na, batch["is_impossible"].float(), reduction="none")
        return loss.mean()


class _ClassifierModel:
    """`AlbertForSequenceClassification` as the reference ships it."""

    def __init__(self, hf_dir, config):
        _, transformers = _torch()
        self.model = transformers.AlbertForSequenceClassification.from_pretrained(
            hf_dir, config=config)

    def named_parameters(self):
        return self.model.named_parameters()

    def state(self):
        return {n: p.detach().numpy().copy()
                for n, p in self.model.named_parameters()}

    def train(self):
        self.model.train()

    def loss(self, batch):
        return self.model(input_ids=batch["input_word_ids"].long(),
                          attention_mask=batch["input_mask"].long(),
                          token_type_ids=batch["input_type_ids"].long(),
                          labels=batch["label_ids"].long()).loss


def reference_config(hf_dir, dropout=None, num_labels=2):
    _, transformers = _torch()
    kwargs = {"num_labels": num_labels}
    if dropout is not None:
        kwargs.update(hidden_dropout_prob=dropout,
                      attention_probs_dropout_prob=dropout,
                      classifier_dropout_prob=dropout)
    return transformers.AlbertConfig.from_pretrained(hf_dir, **kwargs)


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


# === SQuAD features: the reference's offset-mapping preprocessing ===

def reference_tokenizer(hf_dir):
    """`transformers.AlbertTokenizer` (the `tokenizers` one) on the
    directory's `spiece.model`, lowercasing and dropping accents.

    Built from the model's pieces and normalization table as
    `from_pretrained` builds it; `from_pretrained` itself reads the model
    through `sentencepiece`'s generated protobuf module, which needs a newer
    protobuf runtime than TensorFlow's pin, so it is parsed here with the
    module `transformers` ships for protobuf 4 and later.
    """
    _, transformers = _torch()
    from transformers.utils import sentencepiece_model_pb2_new as model_pb2

    proto = model_pb2.ModelProto()
    with open(os.path.join(hf_dir, "spiece.model"), "rb") as f:
        proto.ParseFromString(f.read())
    return transformers.AlbertTokenizer(
        vocab=[(p.piece, p.score) for p in proto.pieces],
        _spm_precompiled_charsmap=(
            proto.normalizer_spec.precompiled_charsmap or None),
        do_lower_case=True, keep_accents=False)


def _reference_windows(tokenizer, example, max_seq_length, doc_stride):
    """The reference's windows of one question (None when the question
    alone leaves no room for context: the reference keeps questions whole)."""
    question = example.question_text.lstrip()
    q_len = len(tokenizer(question, add_special_tokens=False)["input_ids"])
    room = max_seq_length - 3 - q_len
    if room < 1:
        return None
    return tokenizer(
        question, example.context_text, truncation="only_second",
        max_length=max_seq_length, stride=max(0, room - doc_stride),
        return_overflowing_tokens=True, return_offsets_mapping=True,
        return_token_type_ids=True, padding="max_length")


def reference_train_features(tokenizer, examples, max_seq_length, doc_stride,
                             pad_on_right=True):
    """Training features the standard way of the reference's question
    answering examples: windows by `return_overflowing_tokens` with
    `stride`, answers located through `offset_mapping`; an answer outside a
    window, or no answer, points at `[CLS]`.

    `doc_stride` is this project's (pieces between window starts); the
    reference's `stride` is the overlap, so the window is given as
    `max_seq_length` and the overlap as `max_seq_length - 3 - len(question)
    - doc_stride` per question.
    """
    features = []
    for index, example in enumerate(examples):
        encoded = _reference_windows(tokenizer, example, max_seq_length,
                                     doc_stride)
        if encoded is None:
            continue
        for w in range(len(encoded["input_ids"])):
            ids = encoded["input_ids"][w]
            offsets = encoded["offset_mapping"][w]
            sequence_ids = encoded.sequence_ids(w)
            cls_index = ids.index(tokenizer.cls_token_id)
            start = end = cls_index
            if not example.is_impossible and example.start_char >= 0:
                start_char = example.start_char
                end_char = start_char + len(example.answer_text)
                ts = 0
                while sequence_ids[ts] != 1:
                    ts += 1
                te = len(ids) - 1
                while sequence_ids[te] != 1:
                    te -= 1
                if offsets[ts][0] <= start_char and offsets[te][1] >= end_char:
                    while ts < len(offsets) and offsets[ts][0] <= start_char:
                        ts += 1
                    start = ts - 1
                    while offsets[te][1] >= end_char:
                        te -= 1
                    end = te + 1
            features.append({
                "example_index": index, "window": w,
                "input_ids": list(ids),
                "token_type_ids": list(encoded["token_type_ids"][w]),
                "sequence_ids": sequence_ids,
                "start": start, "end": end,
                "is_impossible": int(start == cls_index)})
    return features


def _tokenization_cause(ours_tok, tokenizer, text):
    """None when both sides give the same ids for `text`, else the cause:
    `digit_comma_split` when the pieces spell the same text and the
    reference holds a piece ending in a digit and a comma (which the
    official tokenization splits in two), else `other_tokenization`."""
    mine = ours_tok.encode(text)
    theirs = tokenizer(text.lstrip(), add_special_tokens=False)["input_ids"]
    if mine == theirs:
        return None
    their_pieces = tokenizer.convert_ids_to_tokens(theirs)
    if ("".join(ours_tok.id_to_piece(i) for i in mine)
            == "".join(their_pieces)
            and any(re.search(r"[0-9],$", p) for p in their_pieces)):
        return "digit_comma_split"
    return "other_tokenization"


def _example_cause(example, ours_tok, tokenizer, max_query_length,
                   reference_features):
    """Why an example's features differ: the first reason that applies.

    - `question_truncated_here_only`: longer than `max_query_length` here;
      the reference keeps questions whole (so its windows hold less context).
    - `digit_comma_split`, `other_tokenization`: see `_tokenization_cause`.
    - `reference_start_off_context`: the reference's answer start lands on
      `[SEP]` (an answer starting at a window's last context token: its
      search runs past the context), where this side names the token.
    - `coarse_offsets_here`: the text around the answer changes length in
      preprocessing (two backquotes become one double quote), and this
      side's pieces of such a word all span the whole word, so the target
      takes the word's punctuation pieces too; the reference's offsets are
      exact to the character.
    """
    if len(ours_tok.encode(example.question_text)) > max_query_length:
        return "question_truncated_here_only"
    for text in (example.question_text, example.context_text):
        cause = _tokenization_cause(ours_tok, tokenizer, text)
        if cause:
            return cause
    for f in reference_features:
        if f["start"] < len(f["sequence_ids"]) and (
                f["sequence_ids"][f["start"]] != 1 and not f["is_impossible"]):
            return "reference_start_off_context"
    if example.start_char >= 0:
        word_start = example.context_text.rfind(" ", 0, example.start_char) + 1
        word_end = example.context_text.find(
            " ", example.start_char + len(example.answer_text))
        word = example.context_text[word_start:word_end if word_end >= 0
                                    else None]
        from data_prep import text as text_lib

        if len(text_lib.preprocess_text(word, ours_tok.do_lower_case)) != len(
                word):
            return "coarse_offsets_here"
    return "unexplained"


def compare_features(examples, ours, reference, ours_tok, tokenizer,
                     max_query_length):
    """Differences between this side's features and the reference's.

    Returns:
        `(differences, causes)`: differing features by field (and examples
        whose window counts differ), and differing examples by cause (see
        `_example_cause`); `unexplained` should not appear.
    """
    by_example = collections.defaultdict(list)
    for f in reference:
        by_example[f["example_index"]].append(f)
    mine = collections.defaultdict(list)
    for w, window in enumerate(ours.windows):
        mine[window.example_index].append(w)
    arrays = ours.arrays
    counts, causes = collections.Counter(), collections.Counter()
    for index in range(len(examples)):
        theirs, own = by_example.get(index, []), mine.get(index, [])
        differs = len(theirs) != len(own)
        counts["window_count"] += differs
        for w, f in zip(own, theirs):
            length = int(arrays["input_mask"][w].sum())
            ids = [int(x) for x in arrays["input_word_ids"][w][:length]]
            their_ids = [x for x in f["input_ids"]
                         if x != tokenizer.pad_token_id]
            checks = {
                "input_ids": ids != their_ids,
                "token_type_ids": [int(x) for x in arrays["input_type_ids"][
                    w][:length]] != f["token_type_ids"][:length],
                "start_end": (int(arrays["start_positions"][w]),
                              int(arrays["end_positions"][w]))
                != (f["start"], f["end"]),
                "is_impossible": int(arrays["is_impossible"][w])
                != f["is_impossible"]}
            for field, bad in checks.items():
                counts[field] += bad
                differs = differs or bad
        if differs:
            causes[_example_cause(examples[index], ours_tok, tokenizer,
                                  max_query_length, theirs)] += 1
    return {k: v for k, v in counts.items() if v}, dict(causes)


def features_parity(train_file, version_2, spm_file, hf_dir, max_seq_length,
                    doc_stride, max_query_length):
    from albert_tf.tasks import squad
    from albert_tf.tasks.tokenization import Tokenizer

    examples, _ = squad.read_examples(train_file, True, version_2)
    ours_tok = Tokenizer(spm_file)
    ours = squad.convert_examples(examples, ours_tok, max_seq_length,
                                  doc_stride, max_query_length,
                                  is_training=True)
    tokenizer = reference_tokenizer(hf_dir)
    reference = reference_train_features(tokenizer, examples, max_seq_length,
                                         doc_stride)
    differences, causes = compare_features(examples, ours, reference,
                                           ours_tok, tokenizer,
                                           max_query_length)
    return {"examples": len(examples), "ours": len(ours.windows),
            "reference": len(reference), "differences": differences,
            "differing_examples_by_cause": causes}


# === Outcome parity ===

def ours_outcome(kind, init_checkpoint, work_dir, seed, steps, batch_size,
                 learning_rate, task_name=None, data_dir=None, train_file=None,
                 predict_file=None, max_seq_length=128, doc_stride=64,
                 max_query_length=32):
    """This project's job with its defaults (dropout on); returns the metric."""
    from albert_tf.tasks import finetune_jobs
    from albert_tf.tasks import options as options_lib

    out = os.path.join(work_dir, f"ours_{kind}_{seed}")
    common = dict(output_dir=out, init_checkpoint=init_checkpoint,
                  do_train=True, do_eval=True, train_step=steps,
                  warmup_step=steps // 10, learning_rate=learning_rate,
                  train_batch_size=batch_size, save_checkpoints_steps=steps,
                  iterations_per_loop=steps, seed=seed,
                  max_seq_length=max_seq_length, eval_batch_size=64,
                  predict_batch_size=64, jit_compile=False)
    if kind == "classification":
        options = options_lib.ClassifierOptions(
            task_name=task_name, data_dir=data_dir, **common)
        _, report = finetune_jobs.run_classifier(options)
        return 100.0 * report["eval_results"][-1]["accuracy"]
    options = options_lib.SquadOptions(
        train_file=train_file, predict_file=predict_file,
        doc_stride=doc_stride, max_query_length=max_query_length, **common)
    _, report = finetune_jobs.run_squad(options)
    result = report["eval_results"][-1]
    return {"exact": result["exact"], "f1": result["f1"]}


def _reference_optimizer(torch, transformers, model, learning_rate, steps):
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=learning_rate, eps=1e-8)
    schedule = transformers.get_linear_schedule_with_warmup(
        optimizer, steps // 10, steps)
    return optimizer, schedule


def _reference_train(torch, transformers, model, arrays, names, steps,
                     batch_size, learning_rate, seed):
    optimizer, schedule = _reference_optimizer(torch, transformers, model,
                                               learning_rate, steps)
    generator = torch.Generator().manual_seed(seed)
    num = len(arrays[names[0]])
    order = []
    model.train()
    for _ in range(steps):
        if len(order) < batch_size:
            order += torch.randperm(num, generator=generator).tolist()
        rows, order = order[:batch_size], order[batch_size:]
        batch = {k: torch.tensor(np.asarray(arrays[k])[rows]) for k in names}
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    model.eval()


def reference_classification_outcome(hf_dir, task_name, data_dir, seed, steps,
                                     batch_size, learning_rate, max_seq_length):
    """`AlbertForSequenceClassification` with the usual PyTorch recipe;
    dev accuracy in percent."""
    from albert_tf.tasks import glue

    torch, transformers = _torch()
    torch.manual_seed(seed)
    task = glue.get_task(task_name)
    tokenizer = reference_tokenizer(hf_dir)
    arrays = {}
    for split in ("train", "dev"):
        examples, _ = glue.read_examples(task, data_dir, split)
        encoded = tokenizer(
            [e.text_a for e in examples],
            *([[e.text_b for e in examples]] if examples[0].text_b else []),
            truncation=True, max_length=max_seq_length, padding="max_length",
            return_token_type_ids=True)
        arrays[split] = {"input_ids": encoded["input_ids"],
                         "attention_mask": encoded["attention_mask"],
                         "token_type_ids": encoded["token_type_ids"],
                         "labels": [task.labels.index(e.label)
                                    for e in examples]}
    config = reference_config(hf_dir, num_labels=task.num_classes)
    model = transformers.AlbertForSequenceClassification.from_pretrained(
        hf_dir, config=config)
    _reference_train(torch, transformers, model, arrays["train"],
                     ("input_ids", "attention_mask", "token_type_ids",
                      "labels"), steps, batch_size, learning_rate, seed)
    dev = arrays["dev"]
    predictions = []
    with torch.no_grad():
        for i in range(0, len(dev["labels"]), 64):
            logits = model(**{k: torch.tensor(dev[k][i:i + 64]) for k in (
                "input_ids", "attention_mask", "token_type_ids")}).logits
            predictions += logits.argmax(-1).tolist()
    return 100.0 * float(np.mean(np.asarray(predictions)
                                 == np.asarray(dev["labels"])))


def _reference_squad_arrays(tokenizer, examples, max_seq_length, doc_stride):
    features = reference_train_features(tokenizer, examples, max_seq_length,
                                        doc_stride)
    return {"input_ids": [f["input_ids"] for f in features],
            "attention_mask": [[int(t != tokenizer.pad_token_id)
                                for t in f["input_ids"]] for f in features],
            "token_type_ids": [f["token_type_ids"] for f in features],
            "start_positions": [f["start"] for f in features],
            "end_positions": [f["end"] for f in features]}


def _reference_dev_windows(tokenizer, examples, max_seq_length, doc_stride):
    """Every dev question's windows: `(example, encoding)` per question."""
    return [(example, _reference_windows(tokenizer, example, max_seq_length,
                                         doc_stride)) for example in examples]


def reference_squad_predictions(model, windows, n_best_size=20,
                                max_answer_length=30, batch_size=64):
    """The reference's answer post-processing: the best start + end score
    over every window of a question, mapped to text by `offset_mapping`."""
    import torch

    rows = [(e, enc, w) for e, enc in windows if enc is not None
            for w in range(len(enc["input_ids"]))]
    start_logits, end_logits = [], []
    with torch.no_grad():
        for i in range(0, len(rows), batch_size):
            part = rows[i:i + batch_size]
            out = model(**{key: torch.tensor([enc[key][w] for _, enc, w in part])
                           for key in ("input_ids", "attention_mask",
                                       "token_type_ids")})
            start_logits += list(out.start_logits.numpy())
            end_logits += list(out.end_logits.numpy())
    best = {e.qas_id: (-math.inf, "") for e, _ in windows}
    for (example, enc, w), starts, ends in zip(rows, start_logits, end_logits):
        sequence_ids = enc.sequence_ids(w)
        offsets = [o if sequence_ids[k] == 1 else None
                   for k, o in enumerate(enc["offset_mapping"][w])]
        for s in np.argsort(starts)[-1:-n_best_size - 1:-1]:
            for e in np.argsort(ends)[-1:-n_best_size - 1:-1]:
                if (offsets[s] is None or offsets[e] is None or e < s
                        or e - s + 1 > max_answer_length):
                    continue
                score = float(starts[s] + ends[e])
                if score > best[example.qas_id][0]:
                    best[example.qas_id] = (score, example.context_text[
                        offsets[s][0]:offsets[e][1]])
    return {qid: text for qid, (_, text) in best.items()}


_REFERENCE_CACHE = {}


def _reference_squad_inputs(hf_dir, train_file, predict_file, max_seq_length,
                            doc_stride):
    """The reference's tokenizer, training arrays and dev windows (made once
    per file, for every seed)."""
    from albert_tf.tasks import squad

    key = (hf_dir, train_file, predict_file, max_seq_length, doc_stride)
    if key not in _REFERENCE_CACHE:
        tokenizer = reference_tokenizer(hf_dir)
        examples, _ = squad.read_examples(train_file, True, False)
        dev_examples, _ = squad.read_examples(predict_file, False, False)
        _REFERENCE_CACHE[key] = (
            _reference_squad_arrays(tokenizer, examples, max_seq_length,
                                    doc_stride),
            _reference_dev_windows(tokenizer, dev_examples, max_seq_length,
                                   doc_stride))
    return _REFERENCE_CACHE[key]


def reference_squad_outcome(hf_dir, train_file, predict_file, seed, steps,
                            batch_size, learning_rate, max_seq_length,
                            doc_stride):
    """`AlbertForQuestionAnswering` with the usual PyTorch recipe; EM and F1
    by the official v1.1 script (transcribed)."""
    from albert_tf.tasks import squad

    torch, transformers = _torch()
    torch.manual_seed(seed)
    arrays, windows = _reference_squad_inputs(
        hf_dir, train_file, predict_file, max_seq_length, doc_stride)
    config = reference_config(hf_dir)
    model = transformers.AlbertForQuestionAnswering.from_pretrained(
        hf_dir, config=config)
    _reference_train(torch, transformers, model, arrays,
                     tuple(arrays), steps, batch_size, learning_rate, seed)
    predictions = reference_squad_predictions(model, windows)
    data, _ = squad.load_dataset(predict_file)
    result = official_squad_v1(data, predictions)
    return {"exact": result["exact_match"], "f1": result["f1"]}


def outcome_row(metric, ours, reference):
    diff, low, high = welch_interval(ours, reference)
    return {"metric": metric, "ours_mean": float(np.mean(ours)),
            "ours_sd": float(np.std(ours, ddof=1)) if len(ours) > 1 else 0.0,
            "reference_mean": float(np.mean(reference)),
            "reference_sd": (float(np.std(reference, ddof=1))
                             if len(reference) > 1 else 0.0),
            "seeds": len(ours), "ours": [round(x, 3) for x in ours],
            "reference": [round(x, 3) for x in reference],
            "diff": diff, "diff_ci95": [low, high],
            "verdict": verdict(low, high)}


# === Report ===

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    flags = open("/proc/cpuinfo").read()
                    isa = ("AVX-512" if " avx512f" in flags else
                           "AVX2" if " avx2" in flags else "no AVX2")
                    return f"{name} ({isa}, {os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def format_tables(result):
    lines = [f"CPU: {result['cpu']}", "",
             "| task | steps | max rel. loss diff | min weight cosine | "
             "min update cosine |", "|---|---|---|---|---|"]
    for task, row in result.get("step_parity", {}).items():
        lines.append(
            f"| {task} | {row['steps']} | {row['max_rel_loss_diff']:.2e} | "
            f"{row['min_weight_cosine']:.7f} | "
            f"{(row['min_update_cosine'] or float('nan')):.6f} |")
    if result.get("features"):
        lines += ["", "| SQuAD file | examples | features here | reference | "
                  "differences | causes |", "|---|---|---|---|---|---|"]
        for task, row in result["features"].items():
            lines.append(
                f"| {task} | {row['examples']} | {row['ours']} | "
                f"{row['reference']} | {row['differences'] or 'none'} | "
                f"{row['differing_examples_by_cause'] or 'none'} |")
    if result.get("outcome"):
        lines += ["", "| task | metric | here (mean ± sd) | reference | "
                  "seeds | difference [95% CI] | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for task, row in result["outcome"].items():
            low, high = row["diff_ci95"]
            lines.append(
                f"| {task} | {row['metric']} | {row['ours_mean']:.1f} ± "
                f"{row['ours_sd']:.1f} | {row['reference_mean']:.1f} ± "
                f"{row['reference_sd']:.1f} | {row['seeds']} | "
                f"{row['diff']:+.1f} [{low:+.1f}, {high:+.1f}] | "
                f"{row['verdict']} |")
    return "\n".join(lines)


@dataclasses.dataclass
class ParityOptions:
    """The benchmark's options: its flags, checked by `validate`.

    Example:

    ```python
    from benchmarks import finetune_parity

    options = finetune_parity.ParityOptions(
        "parity", steps=20, seeds=2, parts=("steps", "features"))
    result = finetune_parity.run(options)  # also writes parity/parity.json
    print(finetune_parity.format_tables(result))
    ```
    """

    output_dir: str
    init_checkpoint: str = None
    task_name: str = None
    data_dir: str = None
    train_file: str = None
    predict_file: str = None
    version_2_with_negative: bool = False
    steps: int = 200
    batch_size: int = 8
    learning_rate: float = 1e-4
    seeds: int = 5
    outcome_steps: int = 200
    outcome_learning_rate: float = 5e-4
    max_seq_length: int = 64
    squad_max_seq_length: int = 128
    doc_stride: int = 64
    max_query_length: int = 32
    parts: tuple = ("steps", "features", "outcome")

    def validate(self):
        if bool(self.task_name) != bool(self.data_dir):
            raise ValueError("--task_name and --data_dir go together. "
                             f"Received: --task_name={self.task_name}, "
                             f"--data_dir={self.data_dir}")
        if bool(self.train_file) != bool(self.predict_file):
            raise ValueError("--train_file and --predict_file go together. "
                             f"Received: --train_file={self.train_file}, "
                             f"--predict_file={self.predict_file}")
        for name in ("steps", "batch_size", "seeds", "outcome_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be positive. Received: "
                                 f"--{name}={getattr(self, name)}")
        for path in (self.data_dir, self.init_checkpoint):
            if path and not os.path.exists(path):
                raise ValueError(f"Nothing at {path}. Received: {path}")
        for path in (self.train_file, self.predict_file):
            if path and not os.path.isfile(path):
                raise ValueError(f"No SQuAD file at {path}. Received: {path}")
        unknown = set(self.parts) - {"steps", "features", "outcome"}
        if unknown:
            raise ValueError("--parts takes steps, features, outcome. "
                             f"Received: {sorted(unknown)}")


def run(options, log=print):
    """Runs the benchmark; returns the result written to `parity.json`."""
    options.validate()
    work = options.output_dir
    os.makedirs(work, exist_ok=True)
    start = time.time()
    init = options.init_checkpoint or build_tiny_checkpoint(
        os.path.join(work, "tiny_model"))
    hf_dir = convert_to_huggingface(init, os.path.join(work, "huggingface"))
    spm_file = _spm_file(init)
    if spm_file is None:
        raise ValueError("The checkpoint has no SentencePiece model (spm.model "
                         f"beside it). Received: --init_checkpoint={init}")
    task_name, data_dir = options.task_name, options.data_dir
    if not data_dir:
        task_name = "sst-2"
        data_dir = write_classification_task(os.path.join(work, "data", "sst"))
    squad_files = {}
    if options.train_file:
        version = "squad_v2.0" if options.version_2_with_negative else "squad_v1.1"
        squad_files[version] = (options.train_file, options.predict_file)
    else:
        squad_files["squad_v1.1"] = write_squad_files(
            os.path.join(work, "data", "squad1"), False)
        squad_files["squad_v2.0"] = write_squad_files(
            os.path.join(work, "data", "squad2"), True)
    result = {"cpu": cpu_name(), "init_checkpoint": init,
              "reference": _reference_versions(),
              "classification_task": {"task_name": task_name,
                                      "data_dir": data_dir},
              "squad_files": squad_files, "step_parity": {},
              "features": {}, "outcome": {}}
    squad_window = dict(max_seq_length=options.squad_max_seq_length,
                        doc_stride=options.doc_stride,
                        max_query_length=options.max_query_length)
    if "steps" in options.parts:
        datasets = [classification_data(task_name, data_dir, spm_file,
                                         options.max_seq_length)]
        for version, (train_file, _) in squad_files.items():
            datasets.append(squad_data(train_file, spm_file,
                                       version == "squad_v2.0", **squad_window))
        for data in datasets:
            t = time.time()
            row = step_parity(data, init, hf_dir, work, options.steps,
                              options.batch_size, options.learning_rate)
            row["seconds"] = round(time.time() - t, 1)
            result["step_parity"][data.kind] = row
            _write(work, result)
            log(f"step parity {data.kind}: {row['steps']} steps, max rel. "
                f"loss diff {row['max_rel_loss_diff']:.2e}, min cosine "
                f"{row['min_weight_cosine']:.7f} ({row['seconds']} s)")
    if "features" in options.parts:
        for version, (train_file, _) in squad_files.items():
            result["features"][version] = features_parity(
                train_file, version == "squad_v2.0", spm_file, hf_dir,
                **squad_window)
            _write(work, result)
            log(f"features {version}: {result['features'][version]}")
    if "outcome" in options.parts:
        _outcome(options, result, init, hf_dir, task_name, data_dir,
                 squad_files, log)
    result["seconds"] = round(time.time() - start, 1)
    _write(work, result)
    return result


def _write(work, result):
    safe_io.write_atomically(os.path.join(work, "parity.json"),
                             json.dumps(result, indent=2))


def _outcome(options, result, init, hf_dir, task_name, data_dir, squad_files,
             log):
    work = options.output_dir
    common = dict(steps=options.outcome_steps, batch_size=options.batch_size * 2,
                  learning_rate=options.outcome_learning_rate)
    ours, theirs = [], []
    for seed in range(options.seeds):
        ours.append(ours_outcome(
            "classification", init, work, seed, task_name=task_name,
            data_dir=data_dir, max_seq_length=options.max_seq_length, **common))
        theirs.append(reference_classification_outcome(
            hf_dir, task_name, data_dir, seed,
            max_seq_length=options.max_seq_length, **common))
        log(f"outcome classification seed {seed}: here {ours[-1]:.1f}, "
            f"reference {theirs[-1]:.1f}")
    result["outcome"]["classification"] = outcome_row("accuracy", ours, theirs)
    version = "squad_v1.1" if "squad_v1.1" in squad_files else None
    if version is None:
        return
    train_file, predict_file = squad_files[version]
    ours, theirs = [], []
    for seed in range(options.seeds):
        ours.append(ours_outcome(
            "squad", init, work, seed, train_file=train_file,
            predict_file=predict_file,
            max_seq_length=options.squad_max_seq_length,
            doc_stride=options.doc_stride,
            max_query_length=options.max_query_length, **common))
        theirs.append(reference_squad_outcome(
            hf_dir, train_file, predict_file, seed,
            max_seq_length=options.squad_max_seq_length,
            doc_stride=options.doc_stride, **common))
        log(f"outcome {version} seed {seed}: here {ours[-1]}, reference "
            f"{theirs[-1]}")
    for metric in ("exact", "f1"):
        result["outcome"][f"{version} {metric}"] = outcome_row(
            "EM" if metric == "exact" else "F1", [o[metric] for o in ours],
            [t[metric] for t in theirs])


def _reference_versions():
    try:
        import torch
        import transformers
    except ImportError:
        return None
    return {"torch": torch.__version__, "transformers": transformers.__version__}


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.finetune_parity",
        description=__doc__.split("\n\n")[0])
    defaults = ParityOptions(output_dir=None)
    for field in dataclasses.fields(ParityOptions):
        default = getattr(defaults, field.name)
        if field.name == "parts":
            parser.add_argument("--parts", default=",".join(default))
        elif field.type is bool or isinstance(default, bool):
            parser.add_argument(f"--{field.name}", action="store_true")
        else:
            kind = type(default) if default is not None else str
            parser.add_argument(f"--{field.name}", type=kind, default=default,
                                required=field.name == "output_dir")
    args = vars(parser.parse_args(argv))
    args["parts"] = tuple(p for p in args["parts"].split(",") if p)
    options = ParityOptions(**args)
    try:
        options.validate()
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        print(f"finetune_parity: the reference needs PyTorch and transformers "
              f"(pip install -r requirements-peers.txt). Received: {error}",
              file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"finetune_parity: {error}", file=sys.stderr)
        return 2
    try:
        result = run(options)
    except (ValueError, OSError) as error:
        print(f"finetune_parity: {error}", file=sys.stderr)
        return 1
    print(format_tables(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
