"""The main job on text of other domains than its built-in docstrings.

Assembles corpora from documentation already on the machine, each in the
main job's input format (one sentence a line, a blank line between
documents), runs `python -m albert_apps.quickstart --input_file=...` on each
as a user would, and prints one row per corpus: size, held-out masked-LM
accuracy against its baseline, held-out SOP accuracy with its 95% interval,
each downstream task's margin of pretraining with its interval and verdict,
and the wall time.

    python -m benchmarks.other_domains [--corpora=rust_book,man_pages]
        [--train_seconds=240] [--max_chars=2000000] [--work_dir=DIR]

The corpora (a source that is not on the machine is skipped, saying so):
- `rust_book`: the Rust language's books (HTML of rustup's docs; book-style
  technical prose), one document per section;
- `man_pages`: section-1 manual pages (roff; terse reference text), one
  document per page;
- `info_manuals`: the GNU Info manuals (plain text; user manuals), one
  document per node;
- `builtin`: the main job's own corpus, for comparison.
"""

import glob
import gzip
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from data_prep import builtin_corpus

_CORPORA = flags.DEFINE_list(
    "corpora", ["rust_book", "man_pages"], "Corpora to run, in order: "
    "rust_book, man_pages, info_manuals, builtin.")
_TRAIN_SECONDS = flags.DEFINE_float(
    "train_seconds", 240, "The main job's --train_seconds.")
_MAX_CHARS = flags.DEFINE_integer(
    "max_chars", 2_000_000, "Characters of each corpus (at most).")
_WORK_DIR = flags.DEFINE_string(
    "work_dir", None, "Where corpora and runs go (default: a temporary "
    "folder).")
_EXTRA = flags.DEFINE_list(
    "quickstart_flags", [], "More flags for the main job (name=value).")

RUST_DOCS = os.path.expanduser(
    "~/.rustup/toolchains/*/share/doc/rust/html")
RUST_BOOKS = ("book", "nomicon", "reference")
MAN_DIR = "/usr/share/man/man1"
INFO_DIR = "/usr/share/info"


class _HtmlSections(html.parser.HTMLParser):
    """Text of an mdBook page's `<main>`, one paragraph per `<p>` or
    `<li>`, a new section at each heading; code blocks are left out."""

    _SKIP = {"pre", "script", "style", "nav", "table"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections, self.paragraphs, self.current = [], [], []
        self.skip = 0
        self.in_main = False

    def _end_paragraph(self):
        text = " ".join("".join(self.current).split())
        if text:
            self.paragraphs.append(text)
        self.current = []

    def _end_section(self):
        self._end_paragraph()
        if self.paragraphs:
            self.sections.append("\n\n".join(self.paragraphs))
        self.paragraphs = []

    def handle_starttag(self, tag, attrs):
        if tag == "main":
            self.in_main = True
        elif tag in self._SKIP:
            self.skip += 1
        elif tag in ("h1", "h2", "h3"):
            self._end_section()
        elif tag in ("p", "li", "blockquote"):
            self._end_paragraph()

    def handle_endtag(self, tag):
        if tag == "main":
            self._end_section()
            self.in_main = False
        elif tag in self._SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in ("p", "li", "h1", "h2", "h3"):
            if tag.startswith("h"):
                self.current = []  # A heading is no sentence.
            else:
                self._end_paragraph()

    def handle_data(self, data):
        if self.in_main and not self.skip:
            self.current.append(data)


def rust_book_documents(root=None, books=RUST_BOOKS):
    """Sections of the Rust `books` as documents."""
    roots = [root] if root else sorted(glob.glob(RUST_DOCS))[:1]
    for base in roots:
        for book in books:
            for path in sorted(glob.glob(os.path.join(base, book, "*.html"))):
                if os.path.basename(path) in ("print.html", "toc.html",
                                              "404.html", "SUMMARY.html"):
                    continue
                parser = _HtmlSections()
                with open(path, encoding="utf-8", errors="replace") as f:
                    parser.feed(f.read())
                parser.close()
                for section in parser.sections:
                    yield builtin_corpus.prose_sentences(section)


_ROFF_ESCAPES = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""),  # font changes
    (re.compile(r"\\\((lq|rq|dq)"), '"'),
    (re.compile(r"\\\((aq|cq|oq)"), "'"),
    (re.compile(r"\\\((em|en|mi|hy)"), "-"),
    (re.compile(r"\\\*(\(..|\[[^\]]*\]|.)"), ""),  # strings
    (re.compile(r"\\\(..|\\\[[^\]]*\]"), ""),  # other glyphs
    (re.compile(r"\\[-e]"), lambda m: "-" if m.group(0) == "\\-" else "\\"),
    (re.compile(r"\\[&|^:%]"), ""),
    (re.compile(r"\\ "), " "),
]
_ROFF_TEXT_MACROS = re.compile(r"^\.(B|I|BR|BI|IB|IR|RB|RI|SM|SB)\s+(.*)$")
_ROFF_BREAKS = re.compile(r"^\.(SH|SS|PP|P|LP|TP|IP|HP|sp|br|RS|RE|TH)\b")


def roff_text(source):
    """The running text of a manual page (roff), paragraphs separated by
    blank lines; macros and escapes are dropped."""
    lines = []
    for line in source.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        match = _ROFF_TEXT_MACROS.match(line)
        if match:
            line = match.group(2).replace('"', "")
        elif _ROFF_BREAKS.match(line):
            lines.append("")
            continue
        elif line.startswith((".", "'")):
            continue
        for pattern, replacement in _ROFF_ESCAPES:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return "\n".join(lines)


def man_page_documents(folder=MAN_DIR):
    """Section-1 manual pages as documents (the English ones of `folder`)."""
    for path in sorted(glob.glob(os.path.join(folder, "*.gz"))):
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                source = f.read()
        except (OSError, EOFError):
            continue
        if source.startswith(".so "):
            continue  # A link to another page.
        yield builtin_corpus.prose_sentences(roff_text(source))


def info_documents(folder=INFO_DIR):
    """Nodes of the GNU Info manuals as documents."""
    for path in sorted(glob.glob(os.path.join(folder, "*.info*.gz"))):
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                source = f.read()
        except (OSError, EOFError):
            continue
        for node in source.split("\x1f")[1:]:
            lines = [line for line in node.splitlines()[1:]
                     if not re.match(r"^\s*([*=\-.]{3,}|\* .*::|\* Menu:)", line)]
            yield builtin_corpus.prose_sentences("\n".join(lines))


SOURCES = {"rust_book": rust_book_documents,
           "man_pages": man_page_documents,
           "info_manuals": info_documents}


def write_corpus(name, path, max_chars):
    """Writes corpus `name` (a key of `SOURCES`) to `path`.

    Returns:
        A dict: `documents`, `sentences`, `characters` (0 documents: the
        source is not on this machine).
    """
    counts = {"documents": 0, "sentences": 0, "characters": 0}
    seen = set()
    with open(path, "w", encoding="utf-8") as f:
        for document in SOURCES[name]():
            key = "\n".join(document)
            if len(document) < 2 or key in seen:
                continue  # One-sentence documents and repeats (links, copies).
            seen.add(key)
            f.write(key + "\n\n")
            counts["documents"] += 1
            counts["sentences"] += len(document)
            counts["characters"] += len(key) + 2
            if counts["characters"] >= max_chars:
                break
    return counts


def run_quickstart(input_file, output_dir, train_seconds, extra=()):
    """Runs the main job as a user does; returns `(report, wall seconds)`."""
    command = [sys.executable, "-m", "albert_apps.quickstart",
               "--output_dir=" + output_dir,
               "--train_seconds=%g" % train_seconds]
    if input_file:
        command.append("--input_file=" + input_file)
    command += ["--" + flag for flag in extra]
    start = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.time() - start
    with open(os.path.join(output_dir, "report.json"), encoding="utf-8") as f:
        return json.load(f), seconds


def _pct(value):
    return "%.1f" % (100 * value)


def row(name, report, seconds):
    """One table row (a dict of strings) from a main job's report."""
    results, corpus = report["results"], report["corpus"]
    tasks = {t["name"] + " margin [95%]": "%+.1f [%s, %s] %s" % (
        100 * t["margin"], _pct(t["margin_ci95"][0]),
        _pct(t["margin_ci95"][1]), t["verdict"].split(" (")[0]) + (
            " (%d dev)" % t["dev_examples"])
        for t in report["finetune"]["tasks"]}
    return {
        "corpus": name,
        "size": "%.2f MB, %d docs" % (corpus["characters"] / 1e6,
                                      corpus["documents"]),
        "MLM vs baseline": "%s vs %s" % (
            _pct(results["last_masked_lm_accuracy"]),
            _pct(results["masked_lm_baseline"])),
        "SOP [95%]": "%s [%s, %s] %s" % (
            _pct(results["last_sentence_order_accuracy"]),
            _pct(results["sentence_order_ci95"][0]),
            _pct(results["sentence_order_ci95"][1]),
            results["sentence_order_verdict"]),
        **tasks,
        "steps": str(report["pretrain"]["steps"]),
        "wall": "%d min %02d s" % divmod(int(seconds), 60),
    }


def format_table(rows):
    """Rows as a Markdown table."""
    if not rows:
        return "(no corpus ran)"
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |",
             "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r.get(k, "-") for k in keys) + " |"
              for r in rows]
    return "\n".join(lines)


def main(argv):
    del argv
    from albert_tf.training import hardware

    work_dir = _WORK_DIR.value or tempfile.mkdtemp(prefix="other_domains_")
    os.makedirs(work_dir, exist_ok=True)
    rows = []
    for name in _CORPORA.value:
        input_file = None
        if name != "builtin":
            if name not in SOURCES:
                raise app.UsageError("Unknown corpus %r: one of %s" % (
                    name, sorted(SOURCES) + ["builtin"]))
            input_file = os.path.join(work_dir, name + ".txt")
            counts = write_corpus(name, input_file, _MAX_CHARS.value)
            if counts["documents"] < 20:
                print("%s: not on this machine (%d documents found), "
                      "skipped" % (name, counts["documents"]))
                continue
            print("%s: %d documents, %d sentences, %d characters -> %s" % (
                name, counts["documents"], counts["sentences"],
                counts["characters"], input_file), flush=True)
        report, seconds = run_quickstart(
            input_file, os.path.join(work_dir, "run_" + name),
            _TRAIN_SECONDS.value, _EXTRA.value)
        rows.append(row(name, report, seconds))
        print(format_table(rows[-1:]), flush=True)
    print()
    print("machine: %s; --train_seconds=%g" % (hardware.describe(),
                                               _TRAIN_SECONDS.value))
    print(format_table(rows))


if __name__ == "__main__":
    app.run(main)
