"""The main job in one command: `python -m albert_tf.quickstart`.

Builds an English corpus from the Python standard library's docstrings (no
download), then runs the ALBERT stages that exist in this checkout on it and
prints a report. See the README for what each stage writes.
"""

import os

from absl import app, flags, logging

_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", "runs/quickstart", "Where every artifact goes.")
_INPUT_FILE = flags.DEFINE_string(
    "input_file", None, "Text corpus (one sentence a line, blank line between "
    "documents); default: the standard library's docstrings.")
_MAX_CORPUS_CHARS = flags.DEFINE_integer(
    "max_corpus_chars", 2_000_000, "Cap on the built-in corpus size.")


def parameter_table():
    """Rows `(preset, encoder parameters)` for the released presets."""
    from albert_tf import AlbertConfig, AlbertEncoder, PRESETS

    rows = []
    for name in sorted(PRESETS):
        if name.endswith("_v1"):
            continue  # Same shapes as v2.
        encoder = AlbertEncoder(AlbertConfig.from_preset(name))
        rows.append((name.replace("_v2", ""), encoder.count_params()))
    return rows


def run(output_dir, input_file=None, max_corpus_chars=2_000_000):
    """Runs the quickstart; returns a dict report."""
    from data_prep import builtin_corpus

    os.makedirs(output_dir, exist_ok=True)
    report = {"output_dir": output_dir}
    if input_file is None:
        input_file = os.path.join(output_dir, "corpus.txt")
        docs, sentences, chars = builtin_corpus.write_corpus(
            input_file, max_chars=max_corpus_chars)
        report["corpus"] = dict(documents=docs, sentences=sentences,
                                characters=chars, path=input_file)
    report["parameters"] = parameter_table()
    return report


def main(argv):
    del argv
    report = run(_OUTPUT_DIR.value, _INPUT_FILE.value, _MAX_CORPUS_CHARS.value)
    if "corpus" in report:
        c = report["corpus"]
        print(f"corpus: {c['documents']} documents, {c['sentences']} sentences, "
              f"{c['characters']:,} characters -> {c['path']}")
    print("encoder parameters:")
    for name, count in report["parameters"]:
        print(f"  {name:16s} {count:>13,}")


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    app.run(main)
