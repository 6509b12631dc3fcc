"""Pretraining helps fine-tuning: a tiny ALBERT pretrained on real English text
beats the same model trained from random initialization on a held-out task.

Pretraining: standard-library docstrings (`data_prep.builtin_corpus`, the
first 540k characters, all from top-level modules), a 1000-piece vocabulary,
records from `data_prep`'s builder (ten maskings and segmentations of each
document) and `train_lib.run_pretraining` of the quickstart's model (the tiny
preset widened: embedding 64, hidden 128, intermediate 512, no dropout;
LAMB at 5e-3, batch 32) for a fixed number of steps.

Task (GLUE WNLI's TSV layout, read by `glue.read_examples`): docstrings of
standard-library packages that the pretraining corpus does not contain, each
split at a random sentence boundary into a pair that is kept in order (label
0) or swapped (label 1). Training and dev pairs come from different
docstrings. Both models are fine-tuned by `runners.run_classifier` with the
same seed, steps and learning rate; only `init_checkpoint` differs.

Why this pretraining: with a 64-wide model and 400k characters masked twice
(4k records, 23 epochs in 3000 steps) pretraining memorized its sentence-order
pairs and the transfer margin came and went with the seed (seed 2: 0.601
pretrained vs 0.585 random). Ten maskings of 540k characters (28k records,
2.3 epochs) and the wider model transfer with a margin of well over 0.05 for
every seed measured (see the test).
"""

import os
import random
import sysconfig
import time

import pytest

from albert_tf import AlbertConfig
from albert_tf.training import pretraining as train_lib
from albert_tf.tasks import runners
from data_prep import builtin_corpus, instances, pipeline, vocab

SEQ, PRED = 64, 10
TASK_PACKAGES = ("asyncio", "email", "tkinter", "distutils", "xml",
                 "importlib", "logging", "lib2to3", "http", "unittest",
                 "urllib")
NUM_TRAIN, NUM_DEV = 200, 1100
# The standard library's top-level modules hold about 545k characters of
# docstrings (Python 3.11): the corpus stays out of the task's packages.
CORPUS_CHARS, DUPE_FACTOR = 540_000, 10
# albert_tf.quickstart's model: the tiny preset widened, without dropout.
MODEL = dict(vocab_size=1000, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0, max_position_embeddings=SEQ,
             embedding_size=64, hidden_size=128, num_attention_heads=2,
             intermediate_size=512)
# 2000 steps take about 2.5 minutes on 2 CPU cores. max_train_seconds is only
# a guard against a hung or far too slow machine: the test fails, rather than
# comparing a model trained for fewer steps, if the cap stops training early.
PRETRAIN = dict(train_batch_size=32, num_train_steps=2000, num_warmup_steps=100,
                learning_rate=5e-3, iterations_per_loop=250,
                max_train_seconds=600)
FINETUNE = dict(max_seq_length=SEQ, train_batch_size=32, eval_batch_size=64,
                learning_rate=3e-4, train_step=200, warmup_step=20,
                save_checkpoints_steps=200, iterations_per_loop=100,
                do_train=True, do_eval=True, jit_compile=True)


def pretrain(folder, seed):
    """Corpus, vocabulary, records and a pretraining run under `folder`.

    Returns:
        `(model_dir, spm_model_file, corpus_documents, train_report)`, the
        last from `train_lib.run_pretraining` (`step`, `timed_out`, metrics).
    """
    os.makedirs(folder, exist_ok=True)
    corpus = os.path.join(folder, "corpus.txt")
    builtin_corpus.write_corpus(corpus, max_chars=CORPUS_CHARS)
    model_file, _ = vocab.train_vocab(
        corpus, os.path.join(folder, "spm"), vocab_size=MODEL["vocab_size"],
        hard_vocab_limit=False, num_threads=2)
    records = os.path.join(folder, "train.tfrecord")
    pipeline.create_pretraining_data(
        corpus, records, model_file, random_seed=seed,
        options=instances.InstanceOptions(max_seq_length=SEQ,
                                          max_predictions_per_seq=PRED),
        dupe_factor=DUPE_FACTOR)
    config = AlbertConfig.from_preset("tiny", **MODEL)
    model_dir = os.path.join(folder, "pretrain")
    report = train_lib.run_pretraining(train_lib.PretrainingOptions(
        input_file=records, output_dir=model_dir, config=config,
        max_seq_length=SEQ, max_predictions_per_seq=PRED,
        save_checkpoints_steps=PRETRAIN["num_train_steps"], seed=seed,
        **PRETRAIN))
    with open(corpus, encoding="utf-8") as f:
        documents = {tuple(d.split("\n")) for d in f.read().split("\n\n") if d}
    return model_dir, model_file, documents, report["train"]


def write_order_task(data_dir, exclude, seed):
    """Writes `train.tsv`/`dev.tsv` of in-order vs swapped docstring halves.

    Returns:
        `(num_train, num_dev)`.
    """
    stdlib = sysconfig.get_paths()["stdlib"]
    documents = [d for name in TASK_PACKAGES for d in
                 builtin_corpus.iter_documents([os.path.join(stdlib, name)])
                 if tuple(d) not in exclude]
    rng = random.Random(seed)
    rng.shuffle(documents)
    os.makedirs(data_dir, exist_ok=True)
    splits = {"dev": documents[:NUM_DEV],
              "train": documents[NUM_DEV:NUM_DEV + NUM_TRAIN]}
    for split, docs in splits.items():
        with open(os.path.join(data_dir, split + ".tsv"), "w",
                  encoding="utf-8") as f:
            f.write("index\tsentence1\tsentence2\tlabel\n")
            for i, doc in enumerate(docs):
                k = rng.randint(1, len(doc) - 1)
                a, b = (" ".join(part).replace("\t", " ")
                        for part in (doc[:k], doc[k:]))
                swapped = rng.random() < 0.5
                if swapped:
                    a, b = b, a
                f.write(f"{i}\t{a}\t{b}\t{int(swapped)}\n")
    return len(splits["train"]), len(splits["dev"])


def transfer_accuracies(folder, seed):
    """Dev accuracy of fine-tuning from the pretrained and the random model.

    Returns:
        `(accuracies, (num_train, num_dev), pretraining_report)`.
    """
    model_dir, spm_model, corpus_docs, pretraining = pretrain(
        os.path.join(folder, "pre"), seed)
    data_dir = os.path.join(folder, "task")
    sizes = write_order_task(data_dir, corpus_docs, seed)
    accuracies = {}
    for name, init in (("pretrained", model_dir), ("random", None)):
        _, report = runners.run_classifier(runners.ClassifierOptions(
            task_name="wnli", data_dir=data_dir,
            output_dir=os.path.join(folder, name), init_checkpoint=init,
            # The pretrained run finds the config in its model directory.
            albert_config_file=(None if init else
                                os.path.join(model_dir, "albert_config.json")),
            spm_model_file=spm_model, seed=seed, **FINETUNE))
        accuracies[name] = report["best"]["accuracy"]
    return accuracies, sizes, pretraining


@pytest.mark.slow
def test_pretrained_model_beats_random_init_on_sentence_order(tmp_path):
    start = time.time()
    accuracies, (num_train, num_dev), pretraining = transfer_accuracies(
        str(tmp_path), 0)
    print("train %d, dev %d pairs; pretrained %d steps; %s; %.0f s" % (
        num_train, num_dev, pretraining["step"], accuracies,
        time.time() - start))
    assert (num_train, num_dev) == (NUM_TRAIN, NUM_DEV)
    # Every step ran: the result does not depend on the machine's speed.
    assert not pretraining["timed_out"], (
        "pretraining stopped at max_train_seconds=%g, step %d of %d" % (
            PRETRAIN["max_train_seconds"], pretraining["step"],
            PRETRAIN["num_train_steps"]))
    assert pretraining["step"] == PRETRAIN["num_train_steps"]
    # Measured on 2 CPU cores (pretraining seed = task seed = fine-tuning
    # seed), dev accuracy pretrained / random: seed 0 0.796 / 0.602 and,
    # under pytest, 0.800 / 0.602; seed 1 0.760 / 0.536; seed 2 0.778 / 0.537
    # and, run again, 0.800 / 0.537; seed 3 0.837 / 0.542. The smallest margin
    # is 0.19. A run takes 3 to 3.5 minutes (this test under pytest: 162 s),
    # pretraining 2 to 2.5 of them. Before (64 wide, 400k characters
    # masked twice, 3000 steps): seed 0 0.692 / 0.563, seed 1 0.631 / 0.556,
    # seed 2 0.601 / 0.585.
    assert accuracies["pretrained"] >= accuracies["random"] + 0.05
    assert accuracies["pretrained"] > 0.6
