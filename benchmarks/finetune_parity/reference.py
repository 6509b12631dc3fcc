"""The reference side: everything PyTorch and `transformers` (imported
lazily: peers, not dependencies). The official AdamW in torch, the
reference's models, tokenizer and offset-mapping preprocessing, and
its fine-tuning with the usual recipe for the outcome.
"""

import math
import os
import re

import numpy as np

from benchmarks.finetune_parity.official_squad import official_squad_v1

DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")


# === Step parity: the reference side ===

def _torch():
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    # OMP_NUM_THREADS, where set, as TensorFlow's oneDNN kernels read it.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 0)
                          or max(1, os.cpu_count() or 1))
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
    from benchmarks.finetune_parity.reference import OfficialAdamW

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


# === Outcome parity: the reference side ===

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


# The reference's outcome recipes: its own (`torch.optim.AdamW`,
# `get_linear_schedule_with_warmup`, `clip_grad_norm_`), or this project's
# official rule written in torch (`OfficialAdamW`), to attribute a gap.
REFERENCE_RECIPES = ("pytorch", "official")


def _reference_train(torch, transformers, model, arrays, names, steps,
                     batch_size, learning_rate, seed, recipe="pytorch"):
    if recipe == "official":
        # Clips, follows the official schedule and clears the gradients.
        update = OfficialAdamW(model.named_parameters(), learning_rate, steps,
                               steps // 10).step
    else:
        optimizer, schedule = _reference_optimizer(
            torch, transformers, model, learning_rate, steps)

        def update():
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    generator = torch.Generator().manual_seed(seed)
    columns = {k: torch.as_tensor(np.asarray(arrays[k])) for k in names}
    num = len(columns[names[0]])
    order = []
    model.train()
    for _ in range(steps):
        if len(order) < batch_size:
            order += torch.randperm(num, generator=generator).tolist()
        rows, order = order[:batch_size], order[batch_size:]
        batch = {k: column[rows] for k, column in columns.items()}
        model(**batch).loss.backward()
        update()
    model.eval()


def reference_classification_outcome(hf_dir, task_name, data_dir, seed, steps,
                                     batch_size, learning_rate, max_seq_length,
                                     dropout=0.1, recipe="pytorch"):
    """`AlbertForSequenceClassification` with `recipe` (see
    `REFERENCE_RECIPES`) and `dropout` (encoder and classifier); dev
    accuracy in percent."""
    from albert_tf.tasks import glue_reader

    torch, transformers = _torch()
    torch.manual_seed(seed)
    task = glue_reader.get_task(task_name)
    tokenizer = reference_tokenizer(hf_dir)
    arrays = {}
    for split in ("train", "dev"):
        examples, _ = glue_reader.read_examples(task, data_dir, split)
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
    config = reference_config(hf_dir, dropout, num_labels=task.num_classes)
    model = transformers.AlbertForSequenceClassification.from_pretrained(
        hf_dir, config=config)
    _reference_train(torch, transformers, model, arrays["train"],
                     ("input_ids", "attention_mask", "token_type_ids",
                      "labels"), steps, batch_size, learning_rate, seed,
                     recipe)
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
    from albert_tf.tasks import squad_reader

    key = (hf_dir, train_file, predict_file, max_seq_length, doc_stride)
    if key not in _REFERENCE_CACHE:
        tokenizer = reference_tokenizer(hf_dir)
        examples, _ = squad_reader.read_examples(train_file, True, False)
        dev_examples, _ = squad_reader.read_examples(predict_file, False, False)
        _REFERENCE_CACHE[key] = (
            _reference_squad_arrays(tokenizer, examples, max_seq_length,
                                    doc_stride),
            _reference_dev_windows(tokenizer, dev_examples, max_seq_length,
                                   doc_stride))
    return _REFERENCE_CACHE[key]


def reference_squad_outcome(hf_dir, train_file, predict_file, seed, steps,
                            batch_size, learning_rate, max_seq_length,
                            doc_stride, dropout=0.1, recipe="pytorch"):
    """`AlbertForQuestionAnswering` with `recipe` (see `REFERENCE_RECIPES`)
    and `dropout`; EM and F1 by the official v1.1 script (transcribed)."""
    from albert_tf.tasks import squad_reader

    torch, transformers = _torch()
    torch.manual_seed(seed)
    arrays, windows = _reference_squad_inputs(
        hf_dir, train_file, predict_file, max_seq_length, doc_stride)
    config = reference_config(hf_dir, dropout)
    model = transformers.AlbertForQuestionAnswering.from_pretrained(
        hf_dir, config=config)
    _reference_train(torch, transformers, model, arrays,
                     tuple(arrays), steps, batch_size, learning_rate, seed,
                     recipe)
    predictions = reference_squad_predictions(model, windows)
    data, _ = squad_reader.load_dataset(predict_file)
    result = official_squad_v1(data, predictions)
    return {"exact": result["exact_match"], "f1": result["f1"]}
