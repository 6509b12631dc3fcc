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


def test_task_pairs_come_from_distinct_documents(tmp_path):
    documents = [["Doc %d says %s." % (i, w) for w in ("one", "two", "three")]
                 for i in range(30)]
    documents.append(["A lone sentence is no pair."])
    corpus = _corpus(tmp_path / "held_out.txt", documents)
    counts = downstream.write_task(corpus, str(tmp_path / "task"),
                                   num_train=8, num_dev=12, seed=3)
    assert counts == {"train": 8, "dev": 12, "documents": 30,
                      "task_dir": str(tmp_path / "task")}
    task = downstream.load_task(str(tmp_path / "task"))
    assert len(task.train_pairs) == 8 and len(task.dev_pairs) == 12
    assert set(task.train_labels) <= {0, 1} and set(task.dev_labels) == {0, 1}

    def doc_of(pair):
        return {s.split()[1] for s in (pair[0] + " " + pair[1]).split(".")
                if s.strip()}

    train_docs = set().union(*map(doc_of, task.train_pairs))
    dev_docs = set().union(*map(doc_of, task.dev_pairs))
    assert not train_docs & dev_docs
    for pair, label in zip(task.dev_pairs, task.dev_labels):
        # The halves put back in order give the document's sentences.
        first, second = pair if label == 0 else pair[::-1]
        words = (first + " " + second).split()
        assert [w for w in words if w in ("one.", "two.", "three.")] == [
            "one.", "two.", "three."]
    # Same seed, same files.
    again = downstream.write_task(corpus, str(tmp_path / "again"),
                                  num_train=8, num_dev=12, seed=3)
    assert again["dev"] == 12
    for name in downstream.TASK_FILES:
        assert (tmp_path / "task" / name).read_text() == (
            tmp_path / "again" / name).read_text()


def test_small_corpora_split_in_half_and_too_small_is_refused(tmp_path):
    documents = [["First of %d here." % i, "Second of %d here." % i]
                 for i in range(5)]
    counts = downstream.write_task(_corpus(tmp_path / "c.txt", documents),
                                   str(tmp_path / "t"))
    assert (counts["train"], counts["dev"]) == (2, 3)
    with pytest.raises(ValueError, match="at least 4 held-out documents"):
        downstream.write_task(_corpus(tmp_path / "d.txt", documents[:3]),
                              str(tmp_path / "u"))
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

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.layers.preprocessing import TextPreprocessor
    from data_prep import builtin_corpus, vocab
    from export import exporter, tasks

    corpus = str(tmp_path / "c.txt")
    builtin_corpus.write_corpus(corpus, max_chars=60_000)
    spm_model, _ = vocab.train_vocab(corpus, str(tmp_path / "spm"),
                                     vocab_size=300, hard_vocab_limit=False)
    downstream.write_task(corpus, str(tmp_path / "task"), num_train=32,
                          num_dev=40)
    task = downstream.load_task(str(tmp_path / "task"))
    config = AlbertConfig.from_preset("tiny", vocab_size=300,
                                      max_position_embeddings=32)
    with open(spm_model, "rb") as f:
        proto = f.read()
    paths = exporter.export_pretrainer(AlbertPretrainer(config), proto,
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
    served = tasks.export_classifier(model, spm_model, str(tmp_path / "cls"),
                                     labels=list(downstream.LABELS),
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
