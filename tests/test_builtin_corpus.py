from data_prep import builtin_corpus


def test_sentences_drop_code_and_split_prose():
    doc = """Return the useful thing. It is very useful! Short.

    >>> thing()
    42

    A second paragraph that keeps going
    over two lines. And one more sentence here.
    """
    sentences = builtin_corpus.prose_sentences(doc)
    assert "42" not in " ".join(sentences)
    assert "A second paragraph that keeps going over two lines." in sentences
    assert "It is very useful!" in sentences
    assert "Short." not in sentences  # fewer than four words
    assert all(len(s.split()) >= 4 for s in sentences)


def test_corpus_file_format_and_determinism(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    docs, sentences, chars = builtin_corpus.write_corpus(str(a), max_chars=50_000)
    builtin_corpus.write_corpus(str(b), max_chars=50_000)
    text = a.read_text(encoding="utf-8")
    assert text == b.read_text(encoding="utf-8")
    assert docs >= 20 and sentences >= 2 * docs and chars >= 50_000
    blocks = [blk for blk in text.split("\n\n") if blk.strip()]
    assert len(blocks) == docs
    assert all(len(blk.splitlines()) >= 2 for blk in blocks)
