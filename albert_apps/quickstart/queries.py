"""Questions asked of the exported SavedModels, through their signatures.

The queries go through the served models (not the Keras ones) so that the
answers show what TF Serving would answer for raw text. None is hand-picked:

- Fill-mask: held-out sentences (documents never pretrained on), in file
  order, of at most `MAX_QUERY_WORDS` words; in each, one content word is
  masked: a run of at least 4 ASCII letters, not a function word
  (`FUNCTION_WORDS`), that the vocabulary holds as one piece (so that one
  `[MASK]` can be filled with it), drawn with a seeded generator. The
  answer is right when the masked word's piece is the top prediction
  (top-1) or among the top 5, counted twice: over all pieces, and over the
  content-word pieces (same rule) among the served top `FILL_MASK_TOP_K`,
  since a small model spreads its probability over frequent function
  words. The baseline answers every query with the 5 content words most
  frequent in the pretraining text.
- Classifier: the fine-tuned downstream model's `serving_default`, on the
  downstream task's dev pairs.
"""

import collections
import random
import re

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SavedModels' ops)

from albert_apps.quickstart import data

NUM_FILL_MASK_QUERIES = 200
MAX_QUERY_WORDS = 30
TOP_K = 5
# K of the quickstart export's `fill_mask`, so that its most probable
# content words can be read among the answers.
FILL_MASK_TOP_K = 50
_WORD = re.compile(r"\b[A-Za-z]{4,}\b")
# English function words (and a few docstring fillers), never masked.
FUNCTION_WORDS = frozenset("""
about above after again against also although among another anything
around back because been before being below between both cannot could does
doing done down during each either else even ever every from further have
having here hers herself himself however into itself just least less like
made make many might more most much must myself neither never none once
only onto other others otherwise ours ourselves over same shall should
since some something such than that their theirs them themselves then
there therefore these they thing things this those though through thus
under unless until upon very want well were what whatever when whenever
where whereas whether which while whom whose will with within without
would your yours yourself yourselves
""".split())


def is_content_word(word):
    """Whether a lowercased word may be masked: at least 4 ASCII letters and
    not a function word."""
    return bool(_WORD.fullmatch(word)) and word not in FUNCTION_WORDS


def _candidates(sentence, sp_model):
    """Spans of the words of `sentence` that a fill-mask query may mask."""
    spans = []
    for match in _WORD.finditer(sentence):
        word = match.group().lower()
        if not is_content_word(word):
            continue
        if sp_model.encode(word, out_type=str) == ["\u2581" + word]:
            spans.append(match.span())
    return spans


def fill_mask_queries(eval_file, sp_model, count=NUM_FILL_MASK_QUERIES,
                      seed=0):
    """Fill-mask queries from held-out sentences, by the module's rule.

    Args:
        eval_file: the held-out documents.
        sp_model: the `sentencepiece.SentencePieceProcessor` of the model.
        count: queries wanted (fewer when the file runs out).
        seed: the generator choosing the masked word of each sentence.

    Returns:
        A list of dicts: `query` (the sentence with `[MASK]`) and `answer`
        (the masked word, lowercased).
    """
    rng = random.Random(seed)
    queries = []
    for document in data.read_documents(eval_file):
        for sentence in document:
            if len(sentence.split()) > MAX_QUERY_WORDS:
                continue
            spans = _candidates(sentence, sp_model)
            if not spans:
                continue
            start, end = spans[rng.randrange(len(spans))]
            queries.append({
                "query": sentence[:start] + "[MASK]" + sentence[end:],
                "answer": sentence[start:end].lower()})
            if len(queries) == count:
                return queries
    return queries


def frequent_content_words(train_file, sp_model, top_k=TOP_K):
    """The `top_k` most frequent maskable words of the pretraining text."""
    counts = collections.Counter()
    seen = {}
    for document in data.read_documents(train_file):
        for sentence in document:
            for match in _WORD.finditer(sentence):
                word = match.group().lower()
                if word not in seen:
                    seen[word] = (is_content_word(word) and
                                  sp_model.encode(word, out_type=str) ==
                                  ["\u2581" + word])
                if seen[word]:
                    counts[word] += 1
    return [word for word, _ in counts.most_common(top_k)]


def _rank(pieces, answer):
    ranks = [k for k, piece in enumerate(pieces) if piece == "\u2581" + answer]
    return ranks[0] if ranks else None


def fill_mask(model, queries, baseline_words, top_k=TOP_K):
    """Asks `model`'s `fill_mask` signature; scores it and the baseline.

    Args:
        model: the loaded text-in SavedModel.
        queries: what `fill_mask_queries` returned.
        baseline_words: what `frequent_content_words` returned.
        top_k: answers shown and scored per query.

    Returns:
        A dict: `queries` (each query with `predictions`, the top pieces as
        `[piece, probability]`, `content_predictions`, the top content-word
        pieces among the served answers, and `rank` and `content_rank`, the
        answer's place in each or None), `top1_accuracy`, `top5_accuracy`,
        `content_top1_accuracy`, `content_top5_accuracy`, `baseline_words`,
        `baseline_top1_accuracy`, `baseline_top5_accuracy`.
    """
    answered = []
    if queries:
        out = model.signatures["fill_mask"](
            text=tf.constant([q["query"] for q in queries]))
        pieces = out["top_k_pieces"].numpy()[:, 0]
        probabilities = out["top_k_probabilities"].numpy()[:, 0]
        for i, q in enumerate(queries):
            served = [[p.decode("utf-8"), round(float(prob), 4)]
                      for p, prob in zip(pieces[i], probabilities[i])]
            content = [[p, prob] for p, prob in served
                       if p.startswith("\u2581") and is_content_word(p[1:])]
            predictions, content = served[:top_k], content[:top_k]
            answered.append(dict(
                q, predictions=predictions, content_predictions=content,
                rank=_rank([p for p, _ in predictions], q["answer"]),
                content_rank=_rank([p for p, _ in content], q["answer"])))
    n = max(1, len(answered))

    def accuracy(hits):
        return round(sum(hits) / n, 4)

    return {
        "queries": answered,
        "top1_accuracy": accuracy(q["rank"] == 0 for q in answered),
        "top5_accuracy": accuracy(q["rank"] is not None for q in answered),
        "content_top1_accuracy": accuracy(
            q["content_rank"] == 0 for q in answered),
        "content_top5_accuracy": accuracy(
            q["content_rank"] is not None for q in answered),
        "baseline_words": list(baseline_words),
        "baseline_top1_accuracy": accuracy(
            bool(baseline_words) and q["answer"] == baseline_words[0]
            for q in answered),
        "baseline_top5_accuracy": accuracy(
            q["answer"] in baseline_words for q in answered),
    }


def classify(model, pairs, labels=None):
    """Classifies text pairs through a classifier SavedModel's
    `serving_default`.

    Args:
        model: the loaded classifier SavedModel.
        pairs: `(first, second)` strings.
        labels: the true label ids, to score (or None).

    Returns:
        A dict: `predictions` (per pair: `label`, `probability` of it,
        `probabilities`) and, with `labels`, `accuracy`.
    """
    out = model.signatures["serving_default"](
        text=tf.constant([a for a, _ in pairs]),
        text_b=tf.constant([b for _, b in pairs]))
    probabilities = out["probabilities"].numpy()
    label_ids = out["label_id"].numpy()
    names = [n.decode("utf-8") for n in out["label"].numpy()]
    result = {"predictions": [
        {"label": name, "label_id": int(i),
         "probability": round(float(p[i]), 4),
         "probabilities": [round(float(x), 4) for x in p]}
        for name, i, p in zip(names, label_ids, probabilities)]}
    if labels is not None:
        result["accuracy"] = round(float(np.mean(label_ids == labels)), 4)
    return result
