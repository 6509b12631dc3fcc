"""The corpus variants of `benchmarks.sop_cue` (the pretraining runs take
minutes: the benchmark runs them)."""

from albert_apps.quickstart import data
from benchmarks import sop_cue


def test_variants_drop_each_first_sentence_of_the_same_documents(tmp_path):
    documents = [["Return the sum.", "It adds.", "Ints only."],
                 ["Short.", "Two."],
                 ["A summary.", "One.", "Two.", "Three."]]
    out = sop_cue.variants(iter(documents), min_sentences=3)
    assert out["with_first"] == [documents[0], documents[2]]
    assert out["without_first"] == [["It adds.", "Ints only."],
                                    ["One.", "Two.", "Three."]]
    # Every document keeps two sentences, whatever the minimum asked.
    assert sop_cue.variants(documents, min_sentences=1)["without_first"][1] \
        == ["Two."]
    assert len(sop_cue.variants(documents, 1)["with_first"]) == 3

    path = str(tmp_path / "corpus.txt")
    chars = sop_cue.write_documents(path, out["without_first"])
    assert chars == len(open(path, encoding="utf-8").read())
    assert list(data.read_documents(path)) == out["without_first"]
