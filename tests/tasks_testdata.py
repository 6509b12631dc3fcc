"""Tiny files in each benchmark's official format, and a tiny vocabulary."""

import functools
import json
import os
import tempfile

_TMP = tempfile.mkdtemp(prefix="albert_tasks_")


@functools.lru_cache(maxsize=None)
def spm_model_path():
    """A small SentencePiece model with the ALBERT special pieces (cached)."""
    from data_prep import builtin_corpus
    from data_prep import vocab

    corpus = os.path.join(_TMP, "corpus.txt")
    builtin_corpus.write_corpus(corpus, max_chars=150_000)
    with open(corpus, "a", encoding="utf-8") as f:
        f.write("The cat sat on the mat in 1990s Paris.\nNaïve café ﬁne.\n")
    model, _ = vocab.train_vocab(corpus, os.path.join(_TMP, "spm"),
                                 vocab_size=600, num_threads=1)
    return model


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _tsv(rows):
    return "".join("\t".join(map(str, r)) + "\n" for r in rows)


# Headers of the distributed GLUE files.
MNLI_TRAIN = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
              "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
              "sentence1", "sentence2", "label1", "gold_label"]
MNLI_DEV = MNLI_TRAIN[:11] + ["label2", "label3", "label4", "label5",
                              "gold_label"]
MNLI_TEST = MNLI_TRAIN[:10]
STSB = ["index", "genre", "filename", "year", "old_index", "source1",
        "source2", "sentence1", "sentence2", "score"]


def write_glue(root):
    """Writes a folder per GLUE task under `root`; returns {task: folder}."""
    dirs = {}
    d = dirs["cola"] = os.path.join(root, "CoLA")
    _write(f"{d}/train.tsv", _tsv([["gj04", 1, "", "The cat sat on the mat."],
                                   ["gj04", 0, "*", "Cat the mat on sat."]]))
    _write(f"{d}/dev.tsv", _tsv([["gj04", 1, "", "A dog ran."]]))
    _write(f"{d}/test.tsv", _tsv([["index", "sentence"], [0, "Dog a ran."]]))
    d = dirs["sst-2"] = os.path.join(root, "SST-2")
    for split in ("train", "dev"):
        _write(f"{d}/{split}.tsv", _tsv([["sentence", "label"],
                                         ["a fine film ", 1], ["dull", 0]]))
    _write(f"{d}/test.tsv", _tsv([["index", "sentence"], [0, "lovely"]]))
    d = dirs["mrpc"] = os.path.join(root, "MRPC")
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    for split in ("train", "dev"):
        _write(f"{d}/{split}.tsv", "\ufeff" + _tsv(
            [header, [1, 11, 12, "He said so.", "He told us so."],
             [0, 13, 14, "It rained.", "The sun shone."]]))
    _write(f"{d}/test.tsv", "\ufeff" + _tsv(
        [["index"] + header[1:], [0, 1, 2, "Yes.", "Indeed."]]))
    d = dirs["sts-b"] = os.path.join(root, "STS-B")
    for split in ("train", "dev"):
        _write(f"{d}/{split}.tsv", _tsv(
            [STSB, [0, "main", "f", "2012", 1, "none", "none", "A man plays.",
                    "A man is playing.", "4.750"],
             [1, "main", "f", "2012", 2, "none", "none", "A cat.", "Rain.",
              "0.000"]]))
    _write(f"{d}/test.tsv", _tsv([STSB[:-1], [0, "main", "f", "2012", 1, "n",
                                              "n", "Hi.", "Hello."]]))
    d = dirs["qqp"] = os.path.join(root, "QQP")
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    for split in ("train", "dev"):
        _write(f"{d}/{split}.tsv", _tsv(
            [header, [0, 1, 2, "How old are you?", "What is your age?", 1],
             [1, 3, 4, "Why?", "When?", 0],
             [2, 5, 6, "A line missing its columns"]]))
    _write(f"{d}/test.tsv", _tsv([["id", "question1", "question2"],
                                  [0, "Who?", "Whom?"]]))
    for name, dev, test in (("mnli", "dev_matched", "test_matched"),
                            ("mnli-mm", "dev_mismatched", "test_mismatched")):
        d = dirs[name] = os.path.join(root, "MNLI")
        parse = ["(x)"] * 4
        _write(f"{d}/train.tsv", _tsv(
            [MNLI_TRAIN, [0, 1, "1e", "fiction"] + parse +
             ["A man sleeps.", "A person rests.", "entailment", "entailment"],
             [1, 2, "2n", "fiction"] + parse +
             ["A man sleeps.", "Nobody sleeps.", "contradiction",
              "contradiction"]]))
        _write(f"{d}/{dev}.tsv", _tsv(
            [MNLI_DEV, [0, 1, "1e", "slate"] + parse +
             ["It is red.", "It has a color.", "entailment", "entailment",
              "neutral", "entailment", "entailment", "entailment"]]))
        _write(f"{d}/{test}.tsv", _tsv(
            [MNLI_TEST, [7, 1, "1e", "slate"] + parse + ["A b.", "C d."]]))
    for name, folder, a, b, labels in (
            ("qnli", "QNLI", "question", "sentence",
             ("entailment", "not_entailment")),
            ("rte", "RTE", "sentence1", "sentence2",
             ("entailment", "not_entailment")),
            ("wnli", "WNLI", "sentence1", "sentence2", (1, 0))):
        d = dirs[name] = os.path.join(root, folder)
        for split in ("train", "dev"):
            _write(f"{d}/{split}.tsv", _tsv(
                [["index", a, b, "label"], [0, "Who ran?", "Bo ran.", labels[0]],
                 [1, "Who sat?", "Al ran.", labels[1]]]))
        _write(f"{d}/test.tsv", _tsv([["index", a, b], [0, "Why?", "So."]]))
    return dirs


def write_squad(path, version_2=False, extra_questions=()):
    """A SQuAD JSON file with a long context (several windows)."""
    filler = " ".join(f"Sentence number {i} tells nothing." for i in range(30))
    context = (f"{filler} The Eiffel Tower was finished in 1889 in Paris. "
               f"{filler} Naïve visitors loved the 1990s café.")
    tower = context.index("1889")
    cafe = context.index("café")
    qas = [
        {"id": "q1", "question": "When was the tower finished?",
         "answers": [{"text": "1889", "answer_start": tower}]},
        {"id": "q2", "question": "What did visitors love?",
         "answers": [{"text": "the 1990s café",
                      "answer_start": context.index("the 1990s café")},
                     {"text": "café", "answer_start": cafe}]},
    ]
    if version_2:
        qas.append({"id": "q3", "question": "Who built the moon?",
                    "answers": [], "is_impossible": True,
                    "plausible_answers": [{"text": "Paris",
                                           "answer_start": context.index("Paris")}]})
    qas.extend(extra_questions)
    payload = {"version": "v2.0" if version_2 else "1.1",
               "data": [{"title": "Tower", "paragraphs": [
                   {"context": context, "qas": qas}]}]}
    _write(path, json.dumps(payload))
    return path, context


def race_record(file_id, answers=("B", "A")):
    return {
        "id": file_id,
        "article": "Tom has a red bike. He rides it to school every day.",
        "questions": ["What color is the bike?", "Tom rides his bike to _ ."],
        "options": [["blue", "red", "green", "black"],
                    ["school", "the park", "the shop", "the zoo"]],
        "answers": list(answers),
    }


def write_race(root):
    """A RACE folder with train/dev/test splits under high/ and middle/."""
    for split in ("train", "dev", "test"):
        for level in ("high", "middle"):
            _write(os.path.join(root, split, level, f"{level}1.txt"),
                   json.dumps(race_record(f"{level}1.txt")))
    return root
