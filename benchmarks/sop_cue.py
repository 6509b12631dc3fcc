"""Why sentence order is learned from docstrings: their one-line summaries.

A docstring opens with a summary line ("Return the ..."); which of two SOP
segments holds it tells their order. This check takes the documents of at
least `--min_sentences` sentences of the built-in corpus (the quickstart's
pretraining documents: the downstream packages left out), or of
`--input_file`, and writes them twice: as they are, and without each
document's first sentence. On each it runs the quickstart's corpus,
vocabulary, records and pretraining stages for `--steps` steps (no time
budget), evaluating every checkpoint on the held-out documents, and prints
each one's held-out SOP accuracy per checkpoint with its 95% interval, and
the masked-LM accuracy.

    python -m benchmarks.sop_cue [--steps=1500] [--input_file=TEXT] \
        [--work_dir=DIR]
"""

import itertools
import os
import tempfile

from absl import app
from absl import flags

VARIANTS = ("with_first", "without_first")


def variants(documents, min_sentences=3):
    """`{variant: documents}`: the documents of at least `min_sentences`
    sentences as they are, and without their first sentence."""
    kept = [list(d) for d in documents if len(d) >= max(2, min_sentences)]
    return {"with_first": kept, "without_first": [d[1:] for d in kept]}


def write_documents(path, documents):
    """Writes documents in the corpus format; returns the characters
    written."""
    text = "".join("\n".join(d) + "\n\n" for d in documents)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return len(text)


def _documents(input_file, max_chars):
    from albert_apps.quickstart import builtin_documents
    from albert_apps.quickstart import read_documents

    source = (read_documents(input_file) if input_file
              else builtin_documents())
    total = 0
    for document in source:
        total += sum(len(s) + 1 for s in document) + 1
        if total > max_chars:
            return
        yield document


def run_variant(text_file, work_dir, steps, max_chars=3_000_000):
    """The quickstart's stages 1-4 on `text_file` for `steps` steps; returns
    `(held-out evaluation curve, independent held-out SOP pairs)`."""
    from albert_apps.quickstart import EVAL_DUPE_FACTOR
    from albert_apps.quickstart import build_records
    from albert_apps.quickstart import build_vocabulary
    from albert_apps.quickstart import pretrain
    from albert_apps.quickstart import write_corpus

    data_dir = os.path.join(work_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    corpus = write_corpus(data_dir, text_file, max_chars)
    vocabulary = build_vocabulary(corpus, data_dir, 4000, 2)
    records = build_records(corpus, vocabulary, data_dir, dupe_factor=10,
                            max_seq_length=64)
    trained = pretrain(records, vocabulary, os.path.join(work_dir, "pretrain"),
                       num_train_steps=steps, train_seconds=0)
    pairs = max(1, records.eval.instances // EVAL_DUPE_FACTOR)
    return trained.eval_curve, pairs


def define_flags():
    """The program's flags (defined when it runs, so that importing this
    module beside the other benchmarks defines none of theirs twice)."""
    return {
        "steps": flags.DEFINE_integer(
            "steps", 1500, "Pretraining steps of each run."),
        "min_sentences": flags.DEFINE_integer(
            "min_sentences", 3, "Documents shorter than this are left out of "
            "both variants (a document must keep two sentences without its "
            "first)."),
        "max_chars": flags.DEFINE_integer(
            "max_chars", 3_000_000, "Text read from the corpus, at most."),
        "input_file": flags.DEFINE_string(
            "input_file", None, "Text to use instead of the built-in corpus "
            "(one sentence a line, a blank line between documents)."),
        "work_dir": flags.DEFINE_string(
            "work_dir", None, "Data and runs (default: a temporary folder)."),
    }


def main(argv, options):
    del argv
    from albert_apps import intervals

    values = {name: flag.value for name, flag in options.items()}
    work_dir = values["work_dir"] or tempfile.mkdtemp(prefix="sop_cue_")
    os.makedirs(work_dir, exist_ok=True)
    documents = variants(_documents(values["input_file"], values["max_chars"]),
                         values["min_sentences"])
    rows = {}
    for name in VARIANTS:
        text_file = os.path.join(work_dir, name + ".txt")
        chars = write_documents(text_file, documents[name])
        curve, pairs = run_variant(text_file, os.path.join(work_dir, name),
                                   values["steps"], values["max_chars"])
        rows[name] = (chars, curve, pairs)
    print("\n%d documents of %d+ sentences, %d steps of batch 32 each" % (
        len(documents["with_first"]), values["min_sentences"],
        values["steps"]))
    print("| step | " + " | ".join(
        "%s: SOP [95%%] (%d pairs, %.2f MB) | masked-LM" % (
            name, rows[name][2], rows[name][0] / 1e6) for name in VARIANTS) +
          " |")
    print("|---|" + "---|---|" * len(VARIANTS))
    for points in itertools.zip_longest(*(rows[n][1] for n in VARIANTS)):
        cells = []
        for name, point in zip(VARIANTS, points):
            if point is None:
                cells += ["", ""]
                continue
            sop = point["sentence_order_accuracy"]
            low, high = intervals.wilson(sop, rows[name][2])
            cells += ["%.1f%% [%.1f, %.1f]" % (100 * sop, 100 * low,
                                               100 * high),
                      "%.1f%%" % (100 * point["masked_lm_accuracy"])]
        step = next(p for p in points if p)["global_step"]
        print("| %d | %s |" % (step, " | ".join(cells)))


if __name__ == "__main__":
    _OPTIONS = define_flags()
    app.run(lambda argv: main(argv, _OPTIONS))
