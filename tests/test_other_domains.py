"""The other-domain corpora of `benchmarks.other_domains`: what each
parser keeps of its source format, and the table of results."""

import gzip

from benchmarks import other_domains


def test_rust_book_sections_are_documents(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    (book / "ch01.html").write_text(
        "<html><nav><p>Menu text.</p></nav><main><h1>Getting started</h1>"
        "<p>Rust is a language. It is very fast.</p><pre>fn main() {}</pre>"
        "<h2>Installing</h2><p>Use rustup to install. It is quite easy.</p>"
        "</main></html>", encoding="utf-8")
    (book / "print.html").write_text("<main><p>All of it. Again.</p></main>")
    documents = list(other_domains.rust_book_documents(str(tmp_path)))
    assert documents == [["Rust is a language.", "It is very fast."],
                         ["Use rustup to install.", "It is quite easy."]]


def test_man_pages_lose_their_macros_and_escapes(tmp_path):
    page = ('.\\" a comment\n.TH LS 1\n.SH NAME\nls \\- list files\n'
            '.SH DESCRIPTION\nList the \\fBfiles\\fR of a folder.\n'
            '.B Sort\nthem by name.\n')
    with gzip.open(tmp_path / "ls.1.gz", "wt") as f:
        f.write(page)
    with gzip.open(tmp_path / "dir.1.gz", "wt") as f:
        f.write(".so man1/ls.1\n")
    text = other_domains.roff_text(page)
    assert "comment" not in text and ".TH" not in text
    assert "List the files of a folder." in text
    documents = list(other_domains.man_page_documents(str(tmp_path)))
    assert len(documents) == 1  # The .so link is no page.
    assert "List the files of a folder." in documents[0]


def test_info_nodes_are_documents_and_the_corpus_skips_repeats(tmp_path):
    manual = ("preamble\x1f\nFile: x.info, Node: Top\n\nThe manual starts here. "
              "It has many nodes.\n* Menu:\n* Intro::\n\x1f\nFile: x.info, Node: "
              "Intro\n\nAn introduction is here. It explains the tool.\n=====\n")
    with gzip.open(tmp_path / "x.info.gz", "wt") as f:
        f.write(manual)
    documents = list(other_domains.info_documents(str(tmp_path)))
    assert documents == [["The manual starts here.", "It has many nodes."],
                         ["An introduction is here.", "It explains the tool."]]
    other_domains.SOURCES["twice"] = lambda: iter(documents * 2 + [["One."]])
    try:
        counts = other_domains.write_corpus("twice", str(tmp_path / "c.txt"),
                                            10_000)
    finally:
        del other_domains.SOURCES["twice"]
    assert counts["documents"] == 2
    assert (tmp_path / "c.txt").read_text().count("\n\n") == 2


def test_the_table_has_a_column_per_task_of_any_row():
    def report(tasks):
        return {"results": {"last_masked_lm_accuracy": 0.15,
                            "masked_lm_baseline": 0.05,
                            "last_sentence_order_accuracy": 0.52,
                            "sentence_order_ci95": [0.48, 0.56],
                            "sentence_order_verdict": "at chance"},
                "corpus": {"characters": 2_000_000, "documents": 500},
                "pretrain": {"steps": 1200},
                "finetune": {"tasks": [
                    {"name": name, "margin": 0.08, "margin_ci95": [0.03, 0.13],
                     "verdict": "pretraining helped", "dev_examples": 1200}
                    for name in tasks]}}

    rows = [other_domains.row("a", report(["section"]), 300),
            other_domains.row("b", report(["section", "sentence_order"]), 61)]
    table = other_domains.format_table(rows).splitlines()
    assert "section margin [95%]" in table[0]
    assert "sentence_order margin [95%]" in table[0]
    assert "+8.0 [3.0, 13.0] pretraining helped (1200 dev)" in table[2]
    assert table[2].count(" - ") == 1 and "5 min 00 s" in table[2]
    assert "15.0 vs 5.0" in table[3] and "52.0 [48.0, 56.0] at chance" in table[3]
