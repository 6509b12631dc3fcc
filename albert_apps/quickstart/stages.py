"""The stages of the quickstart, each a function a user can call alone.

Each stage takes what the earlier stages returned, always does its work, and
returns the dataclass the report shows for it (`stage_results`; also written
as JSON next to its outputs, which is how `albert_apps.quickstart.resume`
tells that a rerun may skip it):

    corpus = write_corpus(data_dir)
    vocabulary = build_vocabulary(corpus, data_dir)
    records = build_records(corpus, vocabulary, data_dir)
    trained = pretrain(records, vocabulary, pretrain_dir)
    exported = export_model(trained, vocabulary, output_dir)

(then `albert_apps.quickstart.stages_downstream`: fine-tuning and the queries). Each
calls the library of the matching command-line tool, so the quickstart
exercises the same code: `data_prep.vocab.train_vocab`,
`data_prep.pipeline.create_pretraining_data`,
`albert_tf.training.pretraining.run_pretraining` and
`export.pretrained_export.export_from_checkpoint`.
"""

import json
import os
import time

import tensorflow as tf

from albert_apps.quickstart import data
from albert_apps.quickstart import downstream
from albert_apps.quickstart import queries
from albert_apps.quickstart import stage_results
from albert_apps.quickstart.defaults import NUM_CHECKPOINTS
from albert_apps.quickstart.defaults import NUM_TRAIN_STEPS
from albert_apps.quickstart.defaults import TRAIN_SECONDS
from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.training import hardware
from albert_tf.training import model_dir
from albert_tf.training import pretraining
from albert_tf.training import results as results_lib
from albert_tf.training.options import PretrainingOptions
from data_prep import instances
from data_prep import pipeline
from data_prep import vocab
from export import pretrained_export
from foundation import safe_io

# What each stage records (under data/, except where noted).
CORPUS_JSON = "corpus.json"
VOCAB_JSON = "vocab.json"
BASELINE_JSON = "baseline.json"
EXPORT_JSON = "export.json"  # Under output_dir.
DATA_JSON = "quickstart_data.json"  # Under pretrain/.
# Maskings of each held-out document: two give over 2,000 held-out
# instances from the built-in corpus, enough for a stable accuracy.
EVAL_DUPE_FACTOR = 2


def write_json(path, value):
    """Writes `value` (JSON values, or a dataclass of `stage_results` as its
    stage file) as JSON; a reader sees the old file or the new one
    (`safe_io.write_atomically`: checked, then renamed into place).

    Raises:
        safe_io.OutputError: the file could not be written (names it and
            the cause: a full disk, a read-only folder).
    """
    value = stage_results.to_json(value, stage_file=True)
    safe_io.write_atomically(
        path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_json(path):
    """The JSON value in `path`, or None when there is no such file.

    Raises:
        ValueError: the file is not JSON (names it).
    """
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("%s is not readable JSON: the job writes it whole, "
                         "so it was changed by hand; remove it and run "
                         "again to redo its stage" % path) from None


def corpus_settings(input_file=None, max_corpus_chars=3_000_000):
    """What the corpus depends on (a change means a new corpus)."""
    return {"input_file": input_file and os.path.abspath(input_file),
            "max_corpus_chars": max_corpus_chars,
            "eval_every": data.EVAL_EVERY,
            "downstream": ("chosen from the corpus" if input_file else
                           list(data.DOWNSTREAM_PACKAGES)),
            "tasks": {"names": list(downstream.TASKS),
                      "wanted": [downstream.NUM_TRAIN, downstream.NUM_DEV],
                      "passage_words": downstream.PASSAGE_WORDS,
                      "pairs_per_document": downstream.PAIRS_PER_DOCUMENT}}


def write_corpus(data_dir, input_file=None, max_corpus_chars=3_000_000):
    """Stage 1: the corpus, split into pretraining, held-out and downstream
    documents, and the downstream tasks built from the last.

    Of a user's corpus, one document in `downstream.choose_every(...)` goes
    downstream: the smallest share (10% to 25%) that gives the tasks the
    pairs they want.

    Args:
        data_dir: where `train.txt`, `eval.txt`, `downstream.txt`, `task/`
            and `corpus.json` go.
        input_file: a corpus (one sentence a line, a blank line between
            documents); default: the built-in corpus (docstrings of the
            standard library and of the installed packages).
        max_corpus_chars: cap on the pretraining and held-out text.

    Returns:
        A `stage_results.Corpus`.

    Raises:
        ValueError: too few documents for the downstream tasks.
    """
    files = {name: os.path.join(data_dir, name + ".txt")
             for name in ("train", "eval", "downstream")}
    every = None
    if input_file is None:
        source = ("built-in: docstrings of the standard library and the "
                  "installed packages; downstream: the standard library's %s"
                  % ", ".join(data.DOWNSTREAM_PACKAGES))
        held_out = data.builtin_downstream_documents()
        corpus = data.split_corpus(
            data.builtin_documents(exclude=held_out), files["train"],
            files["eval"], files["downstream"], max_chars=max_corpus_chars,
            downstream_documents=held_out)
    else:
        source = os.path.abspath(input_file)
        every = downstream.choose_every(data.read_documents(input_file),
                                        max_corpus_chars)
        corpus = data.split_corpus(
            data.read_documents(input_file), files["train"], files["eval"],
            files["downstream"], downstream_every=every,
            max_chars=max_corpus_chars)
    tasks = downstream.write_tasks(files["downstream"],
                                   os.path.join(data_dir, "task"))
    if not tasks:
        raise ValueError(
            "The held-out documents of %s give no downstream task a train "
            "and a dev pair: the corpus needs documents of two or more "
            "passages (a blank line between documents)" % source)
    corpus = stage_results.Corpus(
        **corpus, settings=corpus_settings(input_file, max_corpus_chars),
        source=source, train_file=files["train"], eval_file=files["eval"],
        downstream_file=files["downstream"], downstream_every=every,
        tasks=tasks)
    write_json(os.path.join(data_dir, CORPUS_JSON), corpus)
    return corpus


def build_vocabulary(corpus, data_dir, vocab_size=4000, num_threads=2):
    """Stage 2: a SentencePiece model trained on the training documents.

    Args:
        corpus: what `write_corpus` returned.
        data_dir: where `spm.model`, `spm.vocab` and `vocab.json` go.
        vocab_size: pieces (a soft limit: a small corpus may give fewer).
        num_threads: SentencePiece trainer threads.

    Returns:
        A `stage_results.Vocabulary`.
    """
    try:
        model_file, vocab_file = vocab.train_vocab(
            corpus.train_file, os.path.join(data_dir, "spm"),
            vocab_size=vocab_size, hard_vocab_limit=False,
            num_threads=num_threads)
    except RuntimeError as error:
        # SentencePiece's own refusal (too few pieces for the characters,
        # which `inputs.check_corpus` estimates beforehand): one line.
        raise ValueError("--vocab_size=%d: SentencePiece cannot train on %s: "
                         "%s" % (vocab_size, corpus.train_file,
                                 str(error).rsplit("] ", 1)[-1])) from None
    info = stage_results.Vocabulary(
        requested_size=vocab_size,
        pieces=vocab.load_model(model_file).get_piece_size(),
        model_file=model_file, vocab_file=vocab_file, corpus=corpus.settings)
    write_json(os.path.join(data_dir, VOCAB_JSON), info)
    return info


def default_max_predictions(max_seq_length):
    """Masked tokens a record: 15% of `max_seq_length`, rounded up."""
    return max(1, -(-max_seq_length * 15 // 100))


def record_path(data_dir, split):
    """The TFRecord file of `split` (`train` or `eval`)."""
    return os.path.join(data_dir, split + ".tfrecord")


def build_records(corpus, vocabulary, data_dir, max_seq_length=64,
                  max_predictions_per_seq=None, dupe_factor=10):
    """Stage 3: pretraining TFRecords of both splits, and the baseline.

    Args:
        corpus: what `write_corpus` returned.
        vocabulary: what `build_vocabulary` returned.
        data_dir: where `train.tfrecord`, `eval.tfrecord` (each with its
            statistics file) and `baseline.json` go.
        max_seq_length: tokens a record.
        max_predictions_per_seq: masked tokens a record; default
            `default_max_predictions(max_seq_length)`.
        dupe_factor: maskings of each training document (held-out documents
            are masked `EVAL_DUPE_FACTOR` times).

    Returns:
        A `stage_results.Records`: both splits' files and `baseline` (the
        masked-LM accuracy of always predicting the most frequent masked
        token of the held-out records).
    """
    max_predictions_per_seq = (max_predictions_per_seq or
                               default_max_predictions(max_seq_length))
    options = instances.InstanceOptions(
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq)
    files = {}
    for split, dupes in (("train", dupe_factor), ("eval", EVAL_DUPE_FACTOR)):
        path = record_path(data_dir, split)
        stats = pipeline.create_pretraining_data(
            getattr(corpus, split + "_file"), path, vocabulary.model_file,
            options=options, dupe_factor=dupes)
        files[split] = stage_results.RecordFile(
            path=path, stats=pipeline.stats_path(path),
            instances=stats["instances"])
    eval_path = files["eval"].path
    accuracy, token, total = data.masked_token_baseline(
        eval_path, max_predictions_per_seq)
    baseline = stage_results.Baseline(
        masked_lm_accuracy=accuracy, token_id=token,
        piece=vocab.load_model(vocabulary.model_file).id_to_piece(token),
        masked_tokens=total, records_mtime=os.path.getmtime(eval_path))
    write_json(os.path.join(data_dir, BASELINE_JSON), baseline)
    return stage_results.Records(files["train"], files["eval"], baseline)


def model_config(vocab_size, max_seq_length):
    """The quickstart's model: the tiny preset (4 layers sharing one group)
    widened, without dropout, a model that learns on this corpus in a few
    minutes of CPU."""
    return AlbertConfig.from_preset(
        "tiny", vocab_size=vocab_size, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=max_seq_length, embedding_size=64,
        hidden_size=128, num_attention_heads=2, intermediate_size=512)


def eval_batch_size(instances_count):
    """64, halved until the held-out records fill at least one batch."""
    size = 64
    while size > 1 and size > instances_count:
        size //= 2
    return size


def pretraining_options(records, config, pretrain_dir, max_seq_length=64,
                        max_predictions_per_seq=None,
                        num_train_steps=NUM_TRAIN_STEPS,
                        train_seconds=TRAIN_SECONDS, train_batch_size=32,
                        learning_rate=5e-3, save_checkpoints_steps=None,
                        max_eval_steps=None, dtype="auto"):
    """The `PretrainingOptions` of the quickstart (LAMB, evaluation of every
    checkpoint on the held-out records).

    Args:
        records: what `build_records` returned.
        config: the `AlbertConfig`.
        pretrain_dir: the training output folder.
        max_seq_length, max_predictions_per_seq: T and P of the records
            (P by default `default_max_predictions(max_seq_length)`).
        num_train_steps: total steps (over all runs).
        train_seconds: time budget of this run (0 or None: none).
        train_batch_size: the batch.
        learning_rate: peak LAMB learning rate.
        save_checkpoints_steps: default: `NUM_CHECKPOINTS` over the run.
        max_eval_steps: evaluation batches per checkpoint; default: every
            held-out instance (the full batches).
        dtype: `float32`, `bfloat16` or `auto` (bfloat16 where the hardware
            has fast bfloat16 matmuls), as `--dtype` of pretraining.
    """
    if save_checkpoints_steps is None:
        save_checkpoints_steps = max(1, -(-num_train_steps // NUM_CHECKPOINTS))
    batch = eval_batch_size(records.eval.instances)
    if max_eval_steps is None:
        max_eval_steps = max(1, records.eval.instances // batch)
    return PretrainingOptions(
        input_file=records.train.path, output_dir=pretrain_dir,
        config=config, train_batch_size=train_batch_size,
        eval_batch_size=batch,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=(max_predictions_per_seq or
                                 default_max_predictions(max_seq_length)),
        num_train_steps=num_train_steps,
        num_warmup_steps=max(1, num_train_steps // 20),
        learning_rate=learning_rate,
        save_checkpoints_steps=save_checkpoints_steps,
        iterations_per_loop=min(100, save_checkpoints_steps),
        keep_checkpoint_max=10, do_eval=True, max_eval_steps=max_eval_steps,
        eval_input_file=records.eval.path,
        max_train_seconds=train_seconds or 0.0, dtype=dtype)


def claim_checkpoints(pretrain_dir, vocabulary, records):
    """Ties `pretrain_dir`'s checkpoints to the vocabulary and records.

    Checkpoints belong to one vocabulary and set of records: resuming them on
    rebuilt data would mix two runs (or fail on the shapes).

    Returns:
        The step of the newest checkpoint (0: none).

    Raises:
        ValueError: the checkpoints were trained on other data.
    """
    latest = tf.train.latest_checkpoint(pretrain_dir)
    data_json = os.path.join(pretrain_dir, DATA_JSON)
    key = {"vocab": os.path.getmtime(vocabulary.model_file),
           "train_records": os.path.getmtime(records.train.path)}
    claimed = read_json(data_json)
    if latest and claimed not in (None, key):
        raise ValueError(
            "%s holds checkpoints trained on an earlier vocabulary or "
            "records, and the data was rebuilt with other settings; use "
            "another --output_dir or remove that folder. Received: "
            "checkpoints of %s, data of %s" % (pretrain_dir, claimed, key))
    if claimed != key:
        os.makedirs(pretrain_dir, exist_ok=True)
        write_json(data_json, key)
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def pretrain(records, vocabulary, pretrain_dir, max_seq_length=64, **kwargs):
    """Stage 4: pretrains from scratch or continues from the newest checkpoint
    of `pretrain_dir`, evaluating every checkpoint on the held-out records;
    the best goes to `pretrain/best/`.

    Args:
        records: what `build_records` returned.
        vocabulary: what `build_vocabulary` returned.
        pretrain_dir: checkpoints, `eval_results.txt`, `best/`, TensorBoard
            logs.
        max_seq_length: T of the model and of the records.
        **kwargs: the other arguments of `pretraining_options`.

    Returns:
        A `stage_results.PretrainingRun`: the model, the steps done, the
        evaluation of the last and of the best checkpoint, and where they
        are.

    Raises:
        ValueError: `pretrain_dir` holds checkpoints of other data (see
            `claim_checkpoints`), or bad options.
    """
    config = model_config(vocabulary.pieces, max_seq_length)
    options = pretraining_options(records, config, pretrain_dir,
                                  max_seq_length, **kwargs)
    resumed_from = claim_checkpoints(pretrain_dir, vocabulary, records)
    start = time.time()
    result = pretraining.run_pretraining(options)
    eval_results = result["eval_results"]
    best = results_lib.read_eval_results(os.path.join(
        pretrain_dir, results_lib.BEST_DIR, results_lib.EVAL_RESULTS))
    # Every checkpoint evaluated, over all runs of this folder.
    curve = results_lib.read_eval_results(os.path.join(
        pretrain_dir, results_lib.EVAL_RESULTS))
    return stage_results.PretrainingRun(
        output_dir=pretrain_dir,
        preset="tiny widened (E %d, H %d, %d layers, %d hidden group(s))" % (
            config.embedding_size, config.hidden_size,
            config.num_hidden_layers, config.num_hidden_groups),
        parameters=int(AlbertEncoder(config).count_params()),
        steps=int(result["train"]["step"]),
        resumed_from_step=resumed_from,
        dtype=hardware.resolve_dtype(options.dtype),
        num_train_steps=options.num_train_steps,
        stopped_by_time_budget=bool(result["train"].get("timed_out")),
        seconds_this_run=round(time.time() - start, 1),
        train_batch_size=options.train_batch_size,
        checkpoints=[r["checkpoint"] for r in eval_results],
        last_eval=eval_results[-1],
        eval_curve=curve,
        best_eval=best[0] if best else eval_results[-1],
        best_dir=os.path.join(pretrain_dir, results_lib.BEST_DIR),
        eval_results=os.path.join(pretrain_dir, results_lib.EVAL_RESULTS),
    )


def export_model(trained, vocabulary, output_dir, max_seq_length=64):
    """Stage 5: the best checkpoint as SavedModels (TF Serving layout), in
    the next free version under `<output_dir>/export`.

    Args:
        trained: what `pretrain` returned.
        vocabulary: what `build_vocabulary` returned.
        output_dir: the quickstart's folder (`export/` and `export.json`).
        max_seq_length: T of the text-in signatures.

    Returns:
        A `stage_results.ExportedModels` (`reused` False).
    """
    export_dir = os.path.join(output_dir, "export")
    best_dir = trained.best_dir
    paths = pretrained_export.export_from_checkpoint(
        best_dir, os.path.join(best_dir, model_dir.CONFIG_NAME),
        vocabulary.model_file, export_dir, max_seq_length=max_seq_length,
        top_k=queries.FILL_MASK_TOP_K)
    exported = stage_results.ExportedModels(
        checkpoint_step=int(trained.best_eval["global_step"]), paths=paths,
        version=int(os.path.basename(paths["serving"])),
        export_dir=export_dir, reused=False)
    write_json(os.path.join(output_dir, EXPORT_JSON), exported)
    return exported
