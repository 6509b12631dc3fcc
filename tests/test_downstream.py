"""The quickstart's downstream task (`albert_apps.quickstart.downstream`)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_apps.quickstart import downstream


def _corpus(path, documents):
    path.write_text("".join("\n".join(d) + "\n\n" for d in documents),
                    encoding="utf-8")
    return str(path)


def _documents(count, sentences=6):
    # Document i's sentence j: "Doc i sentence j of the text." (6 words:
    # PASSAGE_WORDS=24 puts four sentences in a passage).
    return [["Doc %d sentence %d of the text." % (i, j)
             for j in range(sentences)] for i in range(count)]


def _doc_and_sentences(passage):
    words = passage.replace(".", "").split()
    docs = {int(words[k + 1]) for k, w in enumerate(words) if w == "Doc"}
    sentences = [int(words[k + 1]) for k, w in enumerate(words)
                 if w == "sentence"]
    return docs, sentences


@pytest.mark.parametrize("name", list(downstream.TASKS))
def test_task_pairs_follow_the_corpus_structure(tmp_path, name):
    corpus = _corpus(tmp_path / "held_out.txt",
                     _documents(60, sentences=12) + [["A lone sentence."]])
    counts = downstream.write_task(name, corpus, str(tmp_path / name),
                                   num_train=20, num_dev=40, seed=3)
    assert counts.name == name and counts.documents == 60
    assert counts.train == 20 and counts.dev >= 40
    assert counts.short is None
    task = downstream.load_task(str(tmp_path / name))
    assert task.name == name and task.labels == downstream.TASKS[name][0]
    assert len(task.train_pairs) == 20 and len(task.dev_pairs) == counts.dev
    # Every label, near balance.
    shares = np.bincount(task.dev_labels, minlength=len(task.labels)) / len(
        task.dev_labels)
    assert np.all(np.abs(shares - 1 / len(task.labels)) < 0.15), shares

    def docs(pairs):
        return set().union(*(_doc_and_sentences(p)[0]
                             for pair in pairs for p in pair))

    # No document's text is in both train and dev.
    assert not docs(task.train_pairs) & docs(task.dev_pairs)
    for (first, second), label in zip(task.dev_pairs, task.dev_labels):
        (doc_a, sent_a), (doc_b, sent_b) = (_doc_and_sentences(first),
                                            _doc_and_sentences(second))
        if name == "section":
            # One passage; documents 0-14 are section 0, ... 45-59 section 3.
            assert second == "" and len(doc_a) == 1
            assert label == min(doc_a) // 15
        else:
            # Adjacent passages of one document, swapped when label 1.
            assert doc_a == doc_b
            if label:
                sent_a, sent_b = sent_b, sent_a
            assert sent_a + sent_b == list(range(sent_a[0], sent_b[-1] + 1))
    # Same seed, same files.
    downstream.write_task(name, corpus, str(tmp_path / "again"),
                          num_train=20, num_dev=40, seed=3)
    for file_name in downstream.TASK_FILES:
        assert (tmp_path / name / file_name).read_text() == (
            tmp_path / "again" / file_name).read_text()


def test_passages_and_capacity():
    document = ["one two three four five six."] * 9
    assert downstream.passages(document, max_words=12) == [
        " ".join(document[:2])] * 4 + [document[0]]
    # A long sentence is a passage of its own.
    assert downstream.passages(["w " * 30 + ".", "Short one here."], 12) == [
        "w " * 30 + ".", "Short one here."]
    assert downstream.capacity("sentence_order", 1) == 0
    assert downstream.capacity("sentence_order", 5) == 4
    assert downstream.PAIRS_PER_DOCUMENT == 16
    assert downstream.capacity("sentence_order", 50) == 16
    assert downstream.capacity("section", 2) == 2
    assert downstream.capacity("section", 50) == 16


def test_the_downstream_share_follows_the_corpus():
    # Long documents: one in 10 gives the pairs wanted.
    long_docs = _documents(2000, sentences=40)
    assert downstream.choose_every(long_docs) == downstream.MAX_EVERY
    # Short documents (two passages, one sentence-order pair each): one in
    # 5 gives 1600 pairs, the 1.1 * 1400 wanted; one in 6 would not.
    short_docs = _documents(8000, sentences=6)
    assert [len(downstream.passages(d)) for d in short_docs[:2]] == [2, 2]
    assert downstream.choose_every(short_docs) == 5
    # A cap on the pretraining text reads less of the corpus.
    assert downstream.choose_every(short_docs, max_chars=100_000) == \
        downstream.MIN_EVERY


def test_few_documents_say_so_and_too_few_are_refused(tmp_path):
    corpus = _corpus(tmp_path / "c.txt", _documents(10))
    counts = downstream.write_task("sentence_order", corpus,
                                   str(tmp_path / "t"))
    assert counts.train >= 1 and counts.dev >= 1
    assert "fewer than the 400 / 1000 wanted" in counts.short
    written = downstream.write_tasks(corpus, str(tmp_path / "all"))
    assert [t.name for t in written] == list(downstream.TASKS)
    with pytest.raises(ValueError, match="at least 4 held-out documents"):
        downstream.write_task("section",
                              _corpus(tmp_path / "d.txt", _documents(3)),
                              str(tmp_path / "u"))
    with pytest.raises(ValueError, match="Unknown downstream task"):
        downstream.write_task("topic", corpus, str(tmp_path / "v"))
    with pytest.raises(FileNotFoundError, match="train.tsv"):
        downstream.load_task(str(tmp_path / "nothing"))
    (tmp_path / "bad").mkdir()
    for name in downstream.TASK_FILES:
        (tmp_path / "bad" / name).write_text("a\tb\n0\tx\n")
    with pytest.raises(ValueError, match="not a task file"):
        downstream.load_task(str(tmp_path / "bad"))


@pytest.mark.slow
def test_finetune_through_the_exported_encoder_and_serve(tmp_path):
    import tensorflow_text  # noqa: F401

    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.layers.preprocessing import TextPreprocessor
    from data_prep import builtin_corpus
    from data_prep import vocab
    from export import finetuned_exports
    from export import pretrained_export

    corpus = str(tmp_path / "c.txt")
    builtin_corpus.write_corpus(corpus, max_chars=60_000)
    spm_model, _ = vocab.train_vocab(corpus, str(tmp_path / "spm"),
                                     vocab_size=300, hard_vocab_limit=False)
    downstream.write_task("sentence_order", corpus,
                          str(tmp_path / "sentence_order"), num_train=32,
                          num_dev=40)
    task = downstream.load_task(str(tmp_path / "sentence_order"))
    config = AlbertConfig.from_preset("tiny", vocab_size=300,
                                      max_position_embeddings=32)
    with open(spm_model, "rb") as f:
        proto = f.read()
    paths = pretrained_export.export_pretrainer(AlbertPretrainer(config), proto,
                                                str(tmp_path / "export"),
                                                max_seq_length=32, save_keras=False)
    result = downstream.finetune(paths["encoder"], spm_model, task,
                                 num_train_steps=6, batch_size=8,
                                 max_seq_length=32)
    assert 0.0 <= result["dev_accuracy"] <= 1.0 and result["steps"] == 6
    model = result["model"]
    # The exported encoder's weights are the layer's own, and they trained.
    fresh = tf.saved_model.load(paths["encoder"])
    tuned = [w for w in model.weights if "classifier" not in w.path]
    assert len(tuned) == len(fresh.variables)
    def sums(values):
        return sorted(float(np.abs(np.asarray(v, np.float64)).sum())
                      for v in values)

    assert not np.allclose(sums(tuned), sums(v.numpy() for v in
                                             fresh.variables), rtol=1e-7)

    # The fine-tuned model serves raw text through the CLIs' classifier
    # export, with its own numbers.
    served = finetuned_exports.export_classifier(model, spm_model,
                                                 str(tmp_path / "cls"),
                                                 labels=list(task.labels),
                                                 max_seq_length=32, model_name="order")
    loaded = tf.saved_model.load(served)
    firsts = [a for a, _ in task.dev_pairs[:5]]
    seconds = [b for _, b in task.dev_pairs[:5]]
    out = loaded.signatures["serving_default"](
        text=tf.constant(firsts), text_b=tf.constant(seconds))
    inputs = downstream.encode_pairs(TextPreprocessor(proto, 32),
                                     task.dev_pairs[:5], 32)
    logits = model.predict(inputs, verbose=0)["logits"]
    np.testing.assert_allclose(out["probabilities"].numpy(),
                               tf.nn.softmax(logits).numpy(), atol=1e-5)
    assert set(out["label"].numpy()) <= {b"in order", b"swapped"}
    assert os.path.exists(os.path.join(served, "saved_model.pb"))
