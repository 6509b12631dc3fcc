"""Data made here (a classification folder and SQuAD files from text on
the machine: the standard library's docstrings, or the Rust books for a
second domain), the tiny checkpoint, its conversion to Hugging Face, and
this side's arrays of a task.
"""

import dataclasses
import json
import os
import random
import re

from foundation import safe_io

TINY_CONFIG = dict(vocab_size=2000, embedding_size=32, hidden_size=64,
                   num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1,
                   num_attention_heads=2, intermediate_size=128,
                   hidden_act="gelu", hidden_dropout_prob=0.1,
                   attention_probs_dropout_prob=0.1,
                   max_position_embeddings=256, type_vocab_size=2,
                   initializer_range=0.02)
SQUAD_PACKAGES = ("asyncio", "distutils", "logging", "importlib", "xml",
                  "lib2to3", "unittest", "http", "urllib")
# The tiny model's vocabulary is trained on these packages' docstrings.
VOCAB_PACKAGES = ("tkinter", "asyncio", "email", "logging") + SQUAD_PACKAGES
# The corpora the tasks are made from (`--corpus`). Classification: which
# group of sources a sentence comes from (label 0: the first, 1: the
# second); SQuAD: cloze questions on the documents of `squad`.
CORPORA = {
    "docstrings": {  # Python's standard library, by package.
        "classes": (("tkinter", "asyncio", "multiprocessing", "concurrent",
                     "idlelib"),
                    ("email", "logging", "http", "urllib", "xml")),
        "squad": SQUAD_PACKAGES},
    "rust_book": {  # The Rust books (rustup's HTML docs), by book.
        "classes": (("book",), ("reference", "nomicon")),
        "squad": ("book", "reference", "nomicon")},
}
# Cloze questions drawn for each document: a training document, and a dev
# document (each different question drawn is asked once: about every
# question a short document allows, so that the dev score's binomial noise,
# the main part of the seed spread at the tiny model's low SQuAD scores,
# is as small as the documents allow).
QUESTIONS_PER_DOCUMENT = 12
DEV_QUESTIONS_PER_DOCUMENT = 400


# === Data made here ===

def _package_documents(packages):
    import sysconfig

    from data_prep import builtin_corpus

    stdlib = sysconfig.get_paths()["stdlib"]
    return {name: list(builtin_corpus.iter_documents(
        [os.path.join(stdlib, name)])) for name in packages}


def check_corpus(corpus):
    """`CORPORA[corpus]`.

    Raises:
        ValueError: an unknown corpus.
    """
    if corpus not in CORPORA:
        raise ValueError(f"--corpus must be one of {', '.join(CORPORA)}. "
                         f"Received: --corpus={corpus}")
    return CORPORA[corpus]


def corpus_documents(corpus, sources):
    """`{source: [document, ...]}` of `corpus` (a key of `CORPORA`); a
    document is a list of sentences.

    Raises:
        ValueError: an unknown corpus, or one that is not on this machine.
    """
    check_corpus(corpus)
    if corpus == "docstrings":
        return _package_documents(sources)
    from benchmarks import other_domains

    documents = {book: list(other_domains.rust_book_documents(books=(book,)))
                 for book in sources}
    if not any(documents.values()):
        raise ValueError("--corpus=rust_book: no Rust books on this machine "
                         f"(looked in {other_domains.RUST_DOCS})")
    return documents


def _clean(sentence):
    return " ".join(sentence.replace("\t", " ").split())


def write_classification_task(data_dir, corpus="docstrings", max_train=None,
                              max_dev=None):
    """An SST-2-format folder: which group of `CORPORA[corpus]["classes"]`
    does a sentence come from (for the docstrings: `tkinter`, `asyncio`,
    ... (0), or `email`, `logging`, ... (1))? Every fourth document goes to
    dev; `max_train` / `max_dev` keep that many rows (default: all)."""
    rows = {"train": [], "dev": []}
    for label, sources in enumerate(check_corpus(corpus)["classes"]):
        documents = corpus_documents(corpus, sources)
        for d, doc in enumerate(doc for name in sources
                                for doc in documents[name]):
            split = "dev" if d % 4 == 3 else "train"
            rows[split] += [(_clean(s), str(label)) for s in doc if _clean(s)]
    rng = random.Random(0)
    os.makedirs(data_dir, exist_ok=True)
    for split, limit in (("train", max_train), ("dev", max_dev)):
        rng.shuffle(rows[split])
        text = "sentence\tlabel\n" + "".join(
            f"{s}\t{label}\n" for s, label in rows[split][:limit])
        safe_io.write_atomically(os.path.join(data_dir, f"{split}.tsv"), text)
    return data_dir


_WORD = re.compile(r"[A-Za-z]{5,}")
# Words of the sentence kept on each side of the blank of a question.
QUESTION_WORDS = 8
# Sentences of a document that make a context.
CONTEXT_SENTENCES = 10


def _squad_records(docs, rng, with_impossible,
                   per_doc=QUESTIONS_PER_DOCUMENT, distinct=False):
    """Cloze questions: a sentence of the context with one word replaced by
    "what"; the answer is that word where it stands. With
    `with_impossible`, a third of the questions come from another
    document's sentence and have no answer. With `distinct`, a question
    drawn twice for a document is asked once."""
    paragraphs = []
    for d, doc in enumerate(docs):
        sentences = [_clean(s) for s in doc if _clean(s)][:CONTEXT_SENTENCES]
        if len(sentences) < 3:
            continue
        context = " ".join(sentences)
        sources = {False: sentences}
        if with_impossible:
            sources[True] = [_clean(s) for s in docs[(d + 7) % len(docs)]
                             if _clean(s)]
        candidates = {}  # (impossible, sentence): the words it may ask
        qas, asked = [], set()
        for q in range(per_doc):
            impossible = with_impossible and q % 3 == 2
            sentence = rng.choice(sources[impossible])
            if (impossible, sentence) not in candidates:
                found = _WORD.finditer(sentence)
                candidates[impossible, sentence] = [
                    m for m in found if m.group() not in context] if (
                    impossible) else [m for m in found if len(re.findall(
                        r"\b%s\b" % m.group(), context)) == 1]
            words = candidates[impossible, sentence]
            if not words:
                continue
            word = rng.choice(words)
            before = sentence[:word.start()].split()[-QUESTION_WORDS:]
            after = sentence[word.end():].split()[:QUESTION_WORDS]
            question = " ".join(before + ["what"] + after)
            if distinct and question in asked:
                continue
            asked.add(question)
            qid = f"q{d}_{q}"
            if impossible:
                qas.append({"id": qid, "question": question, "answers": [],
                            "is_impossible": True})
                continue
            start = re.search(r"\b%s\b" % word.group(), context).start()
            qas.append({"id": qid, "question": question, "answers": [
                {"text": word.group(), "answer_start": start}]})
        if qas:
            paragraphs.append({"context": context, "qas": qas})
    return paragraphs


def write_squad_files(directory, version_2=False, corpus="docstrings"):
    """`train.json` and `dev.json` in the official SQuAD layout, from the
    documents of `CORPORA[corpus]["squad"]`; every fifth document goes to
    dev, asked every different question of `DEV_QUESTIONS_PER_DOCUMENT`
    draws."""
    rng = random.Random(1)
    sources = check_corpus(corpus)["squad"]
    docs = [doc for _, package in sorted(
        corpus_documents(corpus, sources).items()) for doc in package]
    docs = [doc for doc in docs if len(doc) >= 3]
    splits = {"train": [d for i, d in enumerate(docs) if i % 5],
              "dev": [d for i, d in enumerate(docs) if i % 5 == 0]}
    os.makedirs(directory, exist_ok=True)
    paths = {}
    version = "v2.0" if version_2 else "1.1"
    for split, split_docs in splits.items():
        dev = split == "dev"
        data = [{"title": corpus, "paragraphs": _squad_records(
            split_docs, rng, version_2, distinct=dev,
            per_doc=DEV_QUESTIONS_PER_DOCUMENT if dev
            else QUESTIONS_PER_DOCUMENT)}]
        paths[split] = os.path.join(directory, f"{split}.json")
        safe_io.write_atomically(paths[split], json.dumps(
            {"version": version, "data": data}))
    return paths["train"], paths["dev"]


def build_tiny_checkpoint(model_dir, seed=0):
    """A tiny model directory of this project: random weights and a
    SentencePiece model trained on the built-in docstrings."""
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.training import model_dir as model_dir_lib
    from data_prep import vocab

    texts = [s for docs in _package_documents(VOCAB_PACKAGES).values()
             for doc in docs for s in doc]
    spm_bytes = vocab.model_from_texts(texts, TINY_CONFIG["vocab_size"],
                                       hard_vocab_limit=True)
    os.makedirs(model_dir, exist_ok=True)
    spm_file = os.path.join(model_dir, ".spm.model.tmp")
    with open(spm_file, "wb") as f:
        f.write(spm_bytes)
    keras.utils.set_random_seed(seed)
    model = AlbertPretrainer(AlbertConfig(**TINY_CONFIG))
    model_dir_lib.save_model_dir(model, model_dir, spm_model_file=spm_file)
    os.remove(spm_file)
    return model_dir


# The main job's folder (`python -m albert_apps.quickstart`): its best
# checkpoint (config beside it) and its vocabulary.
MAIN_JOB_CHECKPOINT = os.path.join("pretrain", "best")
MAIN_JOB_SPM = os.path.join("data", "spm.model")


def model_dir_of(path, work_dir):
    """A model directory (config, checkpoint, `spm.model`) for `path`:
    `path` itself, or, for the main job's output folder, its best
    checkpoint and vocabulary copied into `<work_dir>/main_job_model`."""
    import shutil

    from albert_tf.training import model_dir as model_dir_lib

    best = os.path.join(path, MAIN_JOB_CHECKPOINT)
    spm = os.path.join(path, MAIN_JOB_SPM)
    if not (os.path.isdir(best) and os.path.isfile(spm)):
        return path
    try:
        prefix = model_dir_lib.resolve_checkpoint(best)
    except FileNotFoundError as error:
        raise ValueError(f"The main job's folder {path} has no checkpoint "
                         f"({error}; run the main job to its end). Received: "
                         f"--init_checkpoint={path}") from None
    out = os.path.join(work_dir, "main_job_model")
    staging = out + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    folder, stem = os.path.split(prefix)
    for name in os.listdir(folder):  # the checkpoint as model.ckpt.*
        if name.startswith(stem + "."):
            shutil.copy2(os.path.join(folder, name), os.path.join(
                staging, model_dir_lib.CHECKPOINT_NAME + name[len(stem):]))
    shutil.copy2(os.path.join(best, model_dir_lib.CONFIG_NAME), staging)
    shutil.copy2(spm, os.path.join(staging, model_dir_lib.SPM_NAME))
    shutil.rmtree(out, ignore_errors=True)
    os.rename(staging, out)
    return out


def convert_to_huggingface(init_checkpoint, output_dir):
    """What `python -m albert_tf.convert_checkpoint --source=albert_tf
    --target=huggingface` does."""
    from albert_tf.convert import pretrained

    if not os.path.isdir(output_dir):
        pretrained.convert_checkpoint(init_checkpoint, output_dir,
                                      source="albert_tf",
                                      target="huggingface")
    return output_dir


def _config_file(init_checkpoint, work_dir, dropout):
    """This project's config of `init_checkpoint`, with its dropout set."""
    from albert_tf.config import AlbertConfig
    from albert_tf.training import model_dir as model_dir_lib

    path = model_dir_lib.find_in_model_dir(init_checkpoint,
                                           [model_dir_lib.CONFIG_NAME])
    config = AlbertConfig.from_json_file(path)
    if dropout is not None:
        config = dataclasses.replace(config, hidden_dropout_prob=dropout,
                                     attention_probs_dropout_prob=dropout)
    out = os.path.join(work_dir, f"albert_config_dropout{dropout}.json")
    config.to_json_file(out)
    return out


def check_lengths(init_checkpoint, lengths):
    """Refuses sequence lengths (`{flag: length}`) the checkpoint has no
    positions for, before any work.

    Raises:
        ValueError: naming the flag and the checkpoint's limit.
    """
    from albert_tf.config import AlbertConfig
    from albert_tf.training import model_dir as model_dir_lib

    path = model_dir_lib.find_in_model_dir(init_checkpoint,
                                           [model_dir_lib.CONFIG_NAME])
    if path is None:
        raise ValueError(f"No {model_dir_lib.CONFIG_NAME} beside the "
                         "checkpoint. Received: "
                         f"--init_checkpoint={init_checkpoint}")
    positions = AlbertConfig.from_json_file(path).max_position_embeddings
    for flag, length in lengths.items():
        if length > positions:
            raise ValueError(
                f"{flag}={length} is longer than the checkpoint's "
                f"max_position_embeddings={positions} ({path}); use "
                f"{flag}={positions} or less. Received: {flag}={length}")


def _spm_file(init_checkpoint):
    from albert_tf.convert import pretrained

    return pretrained.spm_model_path(init_checkpoint)


# === Features of this side ===

@dataclasses.dataclass
class _TaskData:
    """One task's arrays on this side (inputs + labels), train and dev."""

    kind: str
    train: dict
    dev: dict = None
    num_classes: int = 2
    extra: dict = None


def classification_data(task_name, data_dir, spm_file, max_seq_length):
    from albert_tf.tasks import glue_reader
    from albert_tf.tasks.tokenization import Tokenizer

    task = glue_reader.get_task(task_name)
    tokenizer = Tokenizer(spm_file)
    arrays = {}
    for split in ("train", "dev"):
        examples, _ = glue_reader.read_examples(task, data_dir, split)
        arrays[split], _ = glue_reader.convert_examples(examples, task, tokenizer,
                                                        max_seq_length)
    return _TaskData("classification", arrays["train"], arrays["dev"],
                     task.num_classes)


def squad_data(train_file, spm_file, version_2, max_seq_length, doc_stride,
               max_query_length):
    from albert_tf.tasks import squad_reader
    from albert_tf.tasks.tokenization import Tokenizer

    examples, _ = squad_reader.read_examples(train_file, True, version_2)
    features = squad_reader.convert_examples(
        examples, Tokenizer(spm_file), max_seq_length, doc_stride,
        max_query_length, is_training=True)
    kind = "squad_v2.0" if version_2 else "squad_v1.1"
    return _TaskData(kind, features.arrays, extra={"train_file": train_file})
