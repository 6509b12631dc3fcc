"""The study's data: the quickstart's corpus, vocabulary and records, plus NSP.

The corpus (split by documents), the SentencePiece model and the SOP
training records come from the quickstart's stages
(`albert_tf.quickstart.stages`). Next to them, from the same documents and
with the same options and seed, `data_prep.pipeline.create_pretraining_data`
writes the NSP training records (`random_next_sentence`) and the held-out
records of both tasks, each held-out document masked `EVAL_DUPES` times so
that the held-out accuracies rest on a few thousand pairs rather than a few
hundred.
"""

import os

from data_prep import instances
from data_prep import pipeline
from data_prep import vocab

from albert_tf import quickstart
from albert_tf.quickstart import stages

EVAL_DUPES = 8
TASKS = ("sop", "nsp")


def build_data(data_dir, input_file=None, max_corpus_chars=None,
               vocab_size=2000, max_seq_length=64, dupe_factor=5):
    """Writes everything the pretraining runs read.

    Args:
        data_dir: the folder (created if missing).
        input_file: a corpus (one sentence a line, a blank line between
            documents); default: the quickstart's built-in corpus.
        max_corpus_chars: cap on the built-in corpus (None: the quickstart's
            default).
        vocab_size: SentencePiece pieces (a soft limit).
        max_seq_length: T of the records.
        dupe_factor: maskings of each training document.

    Returns:
        A dict: `corpus` (the quickstart's counts), `vocabulary` (its
        `model_file` and `pieces`), `max_seq_length`,
        `max_predictions_per_seq`, `source` (the corpus, in words),
        `eval_dupes`, `baseline` (`masked_lm_accuracy` and `piece` of
        always predicting the most frequent masked token of the held-out
        SOP records), and per task (`sop`, `nsp`) a dict with the `train`
        and `eval` record files, their instance counts and `eval_chance`
        (the held-out accuracy of always answering the more frequent
        label: NSP records take segment B from another document for every
        one-sentence chunk too, as the official script does, so more than
        half of them are "not next").
    """
    os.makedirs(data_dir, exist_ok=True)
    corpus_args = {} if max_corpus_chars is None else {
        "max_corpus_chars": max_corpus_chars}
    corpus = stages.write_corpus(data_dir, input_file=input_file,
                                 **corpus_args)
    vocabulary = stages.build_vocabulary(corpus, data_dir,
                                         vocab_size=vocab_size)
    max_predictions = stages.default_max_predictions(max_seq_length)
    records = stages.build_records(
        corpus, vocabulary, data_dir, max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions, dupe_factor=dupe_factor)
    data = {"corpus": corpus, "vocabulary": vocabulary,
            "source": (input_file or "the built-in corpus (the Python "
                       "standard library's docstrings)"),
            "eval_dupes": EVAL_DUPES, "max_seq_length": max_seq_length,
            "max_predictions_per_seq": max_predictions,
            "sop": {"train": records["train"]["path"],
                    "train_instances": records["train"]["instances"]},
            "nsp": {}}
    for task in TASKS:
        options = instances.InstanceOptions(
            max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions,
            random_next_sentence=task == "nsp")
        splits = (("eval", EVAL_DUPES),) if task == "sop" else (
            ("train", dupe_factor), ("eval", EVAL_DUPES))
        for split, dupes in splits:
            path = os.path.join(data_dir, "%s_%s.tfrecord" % (task, split))
            stats = pipeline.create_pretraining_data(
                corpus[split + "_file"], path, vocabulary["model_file"],
                options=options, dupe_factor=dupes)
            data[task][split] = path
            data[task][split + "_instances"] = stats["instances"]
            if split == "eval":
                positives = stats["sop_label_counts"].get("1", 0)
                data[task]["eval_chance"] = max(
                    positives, stats["instances"] - positives) / max(
                        stats["instances"], 1)
    accuracy, token, _ = quickstart.masked_token_baseline(
        data["sop"]["eval"], max_predictions)
    data["baseline"] = {
        "masked_lm_accuracy": accuracy,
        "piece": vocab.load_model(vocabulary["model_file"]).id_to_piece(token)}
    return data
