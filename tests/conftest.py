"""Shared pytest fixtures, and the grouping of tests over pytest-xdist
workers."""

import io
import os

import numpy as np
import pytest

# --- Parallel runs (pytest-xdist, `-n 2 --dist loadgroup` in pyproject.toml) ---
# Modules that share an expensive session fixture or an in-process cache run
# on one worker, so it is built once: group name -> module file names.
XDIST_GROUPS = {
    # exported_albert, loaded_serving_model, exported_tasks.
    "exports": ("test_pretrained_export.py", "test_graph_ops.py", "test_keras_layer.py",
                "test_rest_examples.py", "test_serving_compat.py",
                "test_export_tasks.py", "test_export.py"),
    # tests/journeys/common.py's pretraining run.
    "journeys": ("test_pretrain_journey.py", "test_finetune_journey.py",
                 "test_convert_journey.py"),
    # builtin_quickstart: the main job's run on the built-in corpus.
    "builtin_quickstart": ("test_finetune_transfer.py",
                           "test_pretraining_real_text.py"),
    # short_pretraining_run: one driver run whose folder and log they read.
    "short_pretraining_run": ("test_trainer.py", "test_memory.py",
                              "test_progress.py", "test_xla_autotune.py"),
    # Module-scoped fixtures of masking statistics (one per option set, each
    # masking thousands of records with both maskers).
    "masking": ("test_ngram_masking.py",),
    # Module-scoped fixtures that are a fresh process (the imports), or hold
    # traced functions the module's tests reuse: on two workers, each would
    # make them.
    "layering": ("test_layering.py",),
    "kernels": ("test_fused_dispatch.py",),
    "masked_lm": ("test_masked_lm.py",),
    "pipeline": ("test_pipeline.py",),
}
_GROUP_OF = {name: group for group, names in XDIST_GROUPS.items()
             for name in names}


# --- Garbage collection ---
def pytest_collection_finish(session):
    """Moves what the test modules imported (TensorFlow, Keras, this
    package: about 400,000 objects) out of the garbage collector's reach.

    A full collection walks every live object, and the tests' traces
    trigger dozens of them: in one process over five of the heaviest test
    modules, the collector's time fell from 14.5 s to 9.6 s. Only what is
    alive now is frozen, and never freed: modules and their constants.
    """
    del session
    import gc

    gc.collect()
    gc.freeze()
    # A collection every 20,000 allocations, not 700: a trace allocates
    # objects by the hundred thousand. Over five heavy modules the
    # collector's time fell from 5.1 s to 3.4 s (3,116 young collections
    # to 93).
    gc.set_threshold(20000, 50, 100)


# --- XLA in the tests ---
# The tests compile many small XLA programs and run each for a few steps, so
# LLVM's backend optimizations cost more time than they save (about a
# quarter of the compile-bound tests' time). The CPU backend's older
# elemental code emitters, instead of its default fusion emitters, compile
# faster still (seven XLA-heavy test modules in one process: 84 and 80 s
# with the fusion emitters, 72 and 65 s without). The programs are the ones
# users compile, HLO for HLO: only how the CPU backend turns them into
# machine code changes (what a TPU compiles is HLO, not this code). A user's
# own XLA_FLAGS are kept; the one long training run (`builtin_quickstart`)
# runs in a process with the flags the user had.
FAST_COMPILE_XLA_FLAGS = ("--xla_backend_optimization_level=0 "
                          "--xla_llvm_disable_expensive_passes=true "
                          "--xla_cpu_use_fusion_emitters=false")
# The user's XLA_FLAGS ("" for none), kept for the worker processes too.
USER_XLA_FLAGS = "ALBERT_TESTS_USER_XLA_FLAGS"


def pytest_configure(config):
    del config
    if USER_XLA_FLAGS not in os.environ:
        os.environ[USER_XLA_FLAGS] = os.environ.get("XLA_FLAGS", "")
        os.environ.setdefault("XLA_FLAGS", FAST_COMPILE_XLA_FLAGS)


def group_of(nodeid):
    """The xdist scope of a test: its module's group, else the test alone."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return _GROUP_OF.get(module, nodeid)


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` by `XDIST_GROUPS`: each group's tests go to one
    worker, the other tests one by one to whichever worker is free.

    xdist's own loadgroup reads `xdist_group` marks through test ids that it
    rewrites on the workers, which pytest 9.2 no longer lets it do (the
    groups were silently ignored); this groups by module file name on the
    controller instead.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    return GroupScheduling(config, log)


# --- The main job on the built-in corpus (slow tests) ---

# The job's defaults (3M characters of docstrings, vocabulary, records,
# model, probes and fine-tuning), with pretraining fixed at the 1200 steps
# its 300 s budget reaches on 2 AVX2 cores; train_seconds only guards
# against a hung machine (the test fails rather than compare a model
# trained for fewer steps).
BUILTIN_QUICKSTART = ("--num_train_steps=1200", "--train_seconds=1800")


@pytest.fixture(scope="session")
def builtin_quickstart(tmp_path_factory):
    """The report (`report.json`) of one run of the main job as the README
    runs it, `python -m albert_apps.quickstart`, on the built-in corpus with
    `BUILTIN_QUICKSTART`, shared by the tests of what it learned."""
    import json
    import subprocess
    import sys
    import time

    output_dir = str(tmp_path_factory.mktemp("builtin_quickstart"))
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    if env.get(USER_XLA_FLAGS):
        env["XLA_FLAGS"] = env[USER_XLA_FLAGS]
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "albert_apps.quickstart",
         "--output_dir=" + output_dir, *BUILTIN_QUICKSTART],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        env=env, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    print("main job on the built-in corpus: %.0f s" % (time.time() - start))
    with open(os.path.join(output_dir, "report.json")) as f:
        return json.load(f)

# --- Full-size models, counted (tests/test_{encoder,pretrainer}.py) ---

@pytest.fixture
def zero_initialized(monkeypatch):
    """Truncated-normal initializers give zeros: a full-size model's weights
    take a tenth of the time to make, and counting them needs only their
    shapes."""
    import keras
    from keras.src.initializers import random_initializers

    monkeypatch.setattr(
        random_initializers.TruncatedNormal, "__call__",
        lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype=dtype))


# --- One short pretraining run (tests/test_{trainer,memory,progress,xla_autotune}.py) ---

@pytest.fixture(scope="session")
def short_pretraining_run(tmp_path_factory):
    """A finished 4-step pretraining run on 40 random records, as the
    driver's library entry `run_pretraining` makes it (checkpoints 2 and 4,
    `jit_compile` left to "auto", not on a terminal), made once.

    Returns:
        A `types.SimpleNamespace` with `data` (the records), `out` (the
        output folder: tests that write there copy it first), `report`
        (what `run_pretraining` returned), `lines` (the absl info lines
        it logged) and `stderr` (what it wrote to `sys.stderr`).
    """
    import contextlib
    import io
    import types

    from absl import logging

    from albert_tf.training import pretraining
    from data_prep import progress
    from tests import test_pretraining as t

    root = tmp_path_factory.mktemp("short_run")
    data = t.write_records(str(root / "data.tfrecord"), 40)
    out = str(root / "out")
    lines = []
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(
            io.StringIO()) as stderr:
        patch.setattr(logging, "info", lambda msg, *args: lines.append(
            msg % args if args else msg))
        patch.setattr(progress, "interactive", lambda stream=None: False)
        report = pretraining.run_pretraining(t.options(
            data, out, num_train_steps=4, keep_checkpoint_max=2,
            jit_compile=None))
    return types.SimpleNamespace(data=data, out=out, report=report,
                                 lines=lines, stderr=stderr.getvalue())


# --- Checkpoint conversion (tests/test_convert_*.py, tests/test_pretrained.py) ---

_SPM_WORDS = ("the quick brown fox jumps over a lazy dog hello world cafe "
              "naive resume model albert weights convert release").split()


@pytest.fixture(scope="session")
def albert_spm_model(tmp_path_factory):
    """A tiny SentencePiece model with the released ALBERT special pieces.

    `<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3, `[MASK]`=4, trained on
    lowercased, accent-free text as the releases were.

    Returns:
        The path of the `.model` file.
    """
    import sentencepiece as spm

    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(_SPM_WORDS, 8)) for _ in range(400)]
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buffer, vocab_size=48,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"], character_coverage=1.0,
        minloglevel=2)
    path = tmp_path_factory.mktemp("spm") / "30k-clean.model"
    path.write_bytes(buffer.getvalue())
    return str(path)


@pytest.fixture
def random_pretrainer():
    """A factory of `AlbertPretrainer`s whose every weight is random.

    Call it with `AlbertConfig.from_preset("tiny")` overrides and an optional
    `seed`; LayerNorm scales and biases get random values too, so a tensor
    mapped to the wrong place changes the outputs.
    """
    from albert_tf import AlbertConfig, AlbertPretrainer

    def make(seed=0, **overrides):
        values = dict(vocab_size=48, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)
        values.update(overrides)
        model = AlbertPretrainer(AlbertConfig.from_preset("tiny", **values))
        rng = np.random.default_rng(seed)
        for v in model.weights:
            v.assign(rng.normal(scale=0.3, size=v.shape).astype("float32"))
        return model

    return make


def pretrainer_inputs(config, batch=2, length=9, predictions=3, seed=0):
    """Random `AlbertPretrainer` inputs with padding in the second example."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), np.int32)
    mask[1:, length // 2:] = 0
    return {
        "input_word_ids": rng.integers(0, config.vocab_size, (batch, length),
                                       dtype=np.int32),
        "input_mask": mask,
        "input_type_ids": (np.arange(length)[None, :] >= length // 3).astype(
            np.int32).repeat(batch, 0),
        "masked_lm_positions": rng.integers(0, length // 2, (batch, predictions),
                                            dtype=np.int32),
    }


@pytest.fixture
def assert_same_model():
    """Checks two pretrainers have bit-identical weights and outputs."""

    def check(expected, actual):
        assert expected.config == actual.config
        ours = {v.path: v.numpy() for v in expected.weights}
        theirs = {v.path: v.numpy() for v in actual.weights}
        assert sorted(ours) == sorted(theirs)
        for path, value in ours.items():
            np.testing.assert_array_equal(theirs[path], value, err_msg=path)
        inputs = pretrainer_inputs(expected.config)
        out_a, out_b = expected(inputs), actual(inputs)
        for key in ("sequence_output", "pooled_output", "mlm_logits",
                    "sop_logits"):
            np.testing.assert_array_equal(np.asarray(out_a[key]),
                                          np.asarray(out_b[key]), err_msg=key)

    return check


@pytest.fixture
def make_inputs():
    """The `pretrainer_inputs(config, batch, length, predictions, seed)` helper."""
    return pretrainer_inputs


# --- Data prep (tests/test_{text,vocab,reader,schema,tfrecord,instances,pipeline,...}.py) ---
# A generated corpus (`corpus_*`) and a tiny SentencePiece model trained on it
# once per session (`spm_*`).

_CORPUS_SYLLABLES = ("ka", "to", "ri", "men", "sa", "lo", "pre", "di", "on",
                     "ta", "ver", "mi", "an", "el", "us", "qua", "ble", "ing",
                     "st", "ro")
_CORPUS_ACCENTED = ("café", "naïve", "Über", "façade", "rôle", "Ångström",
                    "東京", "ﬁnal", "coöp")


def corpus_text(num_documents, seed=0, min_sentences=2, max_sentences=12):
    """A corpus in the input format: one sentence a line, blank between docs.

    Made-up words of 1-4 syllables (so pieces split words), Zipf-like word
    choice, sentences of 3-30 words with some capitals, numbers, punctuation
    and a few accented/CJK words.
    """
    import random

    rng = random.Random(seed)
    words = set()
    while len(words) < 600:
        words.add("".join(rng.choice(_CORPUS_SYLLABLES)
                          for _ in range(rng.choice((1, 1, 2, 2, 3, 4)))))
    words = sorted(words)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(rng.randint(min_sentences, max_sentences)):
            length = rng.randint(3, 30)
            tokens = rng.choices(words, weights, k=length)
            if rng.random() < 0.1:
                tokens[rng.randrange(length)] = rng.choice(_CORPUS_ACCENTED)
            if rng.random() < 0.2:
                tokens[rng.randrange(length)] = str(rng.randint(0, 2000))
            if rng.random() < 0.3:
                tokens[rng.randrange(length)] += rng.choice((",", ";", ":"))
            sentence = " ".join(tokens)
            sentences.append(sentence[0].upper() + sentence[1:]
                             + rng.choice((".", ".", ".", "?", "!")))
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """A directory with a generated corpus in two files (a.txt, b.txt)."""
    directory = tmp_path_factory.mktemp("corpus")
    (directory / "a.txt").write_text(corpus_text(400, seed=1), encoding="utf-8")
    (directory / "b.txt").write_text(corpus_text(300, seed=2), encoding="utf-8")
    return directory


@pytest.fixture(scope="session")
def corpus_files(corpus_dir):
    """Comma-separated paths of the generated corpus files."""
    return ",".join(str(corpus_dir / name) for name in ("a.txt", "b.txt"))


@pytest.fixture(scope="session")
def corpus_cli_env():
    """Environment for `python -m data_prep....` subprocesses."""
    import os

    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="session")
def spm_model_path(tmp_path_factory, corpus_dir):
    """A tiny unigram model (<= 500 pieces) built by `data_prep.vocab`."""
    from data_prep import vocab

    prefix = str(tmp_path_factory.mktemp("spm") / "tiny")
    model_path, _ = vocab.train_vocab(
        str(corpus_dir / "a.txt"), prefix, vocab_size=500,
        hard_vocab_limit=False, num_threads=2)
    return model_path


@pytest.fixture(scope="session")
def spm_model(spm_model_path):
    """The tiny model, loaded (`sentencepiece.SentencePieceProcessor`)."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=spm_model_path)


@pytest.fixture(scope="session")
def spm_plain_model_path(tmp_path_factory, corpus_dir):
    """A SentencePiece model with the default special pieces (no [CLS]...)."""
    import sentencepiece as spm

    prefix = str(tmp_path_factory.mktemp("spm_plain") / "plain")
    spm.SentencePieceTrainer.train(
        input=str(corpus_dir / "b.txt"), model_prefix=prefix, vocab_size=300,
        hard_vocab_limit=False, minloglevel=2, num_threads=2)
    return prefix + ".model"


# --- Export (tests/test_{pretrained_export,keras_layer,graph_ops,rest_examples}.py) ---
# One tiny model, exported once per session through the CLI's `main`.

EXPORT_SEQ_LENGTH = 32
EXPORT_TOP_K = 3


@pytest.fixture(scope="session")
def exported_albert(tmp_path_factory, spm_model_path):
    """A tiny pretrainer with random weights, saved and exported.

    Returns:
        A `types.SimpleNamespace` with `pretrainer` (the in-process Keras
        model), `sp_model`, `model_dir`, `export_dir`, `paths` (what the
        exporter returned), `max_seq_length` and `top_k`.
    """
    import types

    import sentencepiece as spm
    from absl import flags

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.training import checkpoint
    from data_prep import flag_options as options_lib
    from export import export_saved_model
    from export import pretrained_export

    sp_model = spm.SentencePieceProcessor(model_file=spm_model_path)
    config = AlbertConfig.from_preset(
        "tiny", vocab_size=sp_model.get_piece_size(), num_hidden_layers=2,
        max_position_embeddings=64)
    pretrainer = AlbertPretrainer(config)
    rng = np.random.default_rng(5)
    for v in pretrainer.weights:
        v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
    root = tmp_path_factory.mktemp("export")
    model_dir = str(root / "model")
    checkpoint.save_model_dir(pretrainer, model_dir, spm_model_file=spm_model_path)
    export_dir = str(root / "serving")
    argv = ["export_saved_model", "--checkpoint=" + model_dir,
            "--albert_config_file=" + model_dir + "/albert_config.json",
            "--spm_model_file=" + model_dir + "/spm.model",
            "--export_dir=" + export_dir,
            "--max_seq_length=%d" % EXPORT_SEQ_LENGTH,
            "--top_k=%d" % EXPORT_TOP_K]
    # The program's own flags, parsed as `main` parses them, into a private
    # registry (the global one belongs to whichever program runs).
    flag_values = flags.FlagValues()
    options_lib.define_flags(pretrained_export.ExportOptions, flag_values,
                             module_name="export_saved_model")
    flag_values(argv)
    export_saved_model.export(
        options_lib.from_flags(pretrained_export.ExportOptions, flag_values))

    names = pretrained_export.model_names("albert")
    paths = {key: export_dir + "/%s/1" % name for key, name in names.items()}
    paths["keras"] = paths["encoder"] + "/" + pretrained_export.KERAS_FILE_NAME
    return types.SimpleNamespace(
        pretrainer=pretrainer, sp_model=sp_model, model_dir=model_dir,
        export_dir=export_dir, paths=paths, max_seq_length=EXPORT_SEQ_LENGTH,
        top_k=EXPORT_TOP_K)


@pytest.fixture(scope="session")
def loaded_serving_model(exported_albert):
    """The text-in SavedModel, loaded in this process."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    return tf.saved_model.load(exported_albert.paths["serving"])


@pytest.fixture(scope="session")
def reduced_precision_exports(exported_albert, tmp_path_factory):
    """`exported_albert`'s checkpoint exported again by the program's
    `export` with `--serving_dtype=<dtype>`, on first use of
    `exports[dtype]`; each value is the text-in model's version folder."""
    from absl import flags

    from data_prep import flag_options as options_lib
    from export import export_saved_model
    from export import pretrained_export

    root = tmp_path_factory.mktemp("precision")
    model_dir = exported_albert.model_dir

    def export(serving_dtype):
        flag_values = flags.FlagValues()
        options_lib.define_flags(pretrained_export.ExportOptions, flag_values,
                                 module_name="export_saved_model")
        flag_values([
            "export_saved_model", "--checkpoint=" + model_dir,
            "--albert_config_file=" + model_dir + "/albert_config.json",
            "--spm_model_file=" + model_dir + "/spm.model",
            "--export_dir=" + str(root / serving_dtype), "--save_keras=false",
            "--max_seq_length=%d" % exported_albert.max_seq_length,
            "--top_k=%d" % exported_albert.top_k,
            "--serving_dtype=" + serving_dtype])
        return export_saved_model.export(options_lib.from_flags(
            pretrained_export.ExportOptions, flag_values))["serving"]

    class Exports(dict):
        def __missing__(self, serving_dtype):
            self[serving_dtype] = export(serving_dtype)
            return self[serving_dtype]

    return Exports()


# --- Task exports (tests/test_{export_tasks,serving_compat}.py) ---
# A classifier and a span extractor, exported once per session in both
# serving shapes.

TASK_SEQ_LENGTH = 48
TASK_QUERY_LENGTH = 12
TASK_ANSWER_LENGTH = 5


@pytest.fixture(scope="session")
def exported_tasks(tmp_path_factory):
    """A classifier (3 labels) and a span extractor (with a no-answer head),
    every weight random, on a tiny encoder; each exported as the fine-tuning
    programs export it, with `serving_shape="dynamic"` under the programs'
    model names; `fixed_path(name)` exports `"fixed"` under `<name>_fixed`.

    Returns:
        A `types.SimpleNamespace` with `classifier`, `span_extractor` (the
        Keras models), `spm_path`, `export_dir`, `paths` (model name -> the
        version folder), `fixed_path` and `max_seq_length`.
    """
    import types

    from albert_tf import AlbertConfig
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models.task_models import AlbertClassifier
    from albert_tf.models.task_models import AlbertSpanExtractor
    from export import finetuned_exports
    from tests import tasks_testdata

    def randomized(model, seed):
        rng = np.random.default_rng(seed)
        for v in model.weights:
            v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
        return model

    def encoder():
        return AlbertEncoder(AlbertConfig.from_preset(
            "tiny", vocab_size=600, num_hidden_layers=2,
            max_position_embeddings=64))

    spm_path = tasks_testdata.spm_model_path()
    classifier = randomized(AlbertClassifier(encoder(), num_classes=3), 1)
    span_extractor = randomized(
        AlbertSpanExtractor(encoder(), with_no_answer=True), 3)
    export_dir = str(tmp_path_factory.mktemp("task_serving"))

    def export(name, shape):
        if name.startswith("albert_classifier"):
            return finetuned_exports.export_classifier(
                classifier, spm_path, export_dir, labels=["a", "b", "c"],
                max_seq_length=TASK_SEQ_LENGTH, model_name=name,
                serving_shape=shape)
        return finetuned_exports.export_span_extractor(
            span_extractor, spm_path, export_dir,
            max_seq_length=TASK_SEQ_LENGTH,
            max_query_length=TASK_QUERY_LENGTH,
            max_answer_length=TASK_ANSWER_LENGTH, model_name=name,
            serving_shape=shape)

    # An export takes about 30 s of CPU: the fixed-shape ones (only the slow
    # dynamic-equals-fixed tests use them) are made when first asked for.
    paths = {name: export(name, "dynamic")
             for name in ("albert_classifier", "albert_squad")}

    def fixed_path(name):
        """The version folder of `name` exported with the fixed shape."""
        if name + "_fixed" not in paths:
            paths[name + "_fixed"] = export(name + "_fixed", "fixed")
        return paths[name + "_fixed"]

    return types.SimpleNamespace(
        classifier=classifier, span_extractor=span_extractor,
        spm_path=spm_path, export_dir=export_dir, paths=paths,
        fixed_path=fixed_path, max_seq_length=TASK_SEQ_LENGTH)


# --- Beam (tests/test_{filesystems,beam_pipeline,beam_vocab}.py) ---

BEAM_TEST_SCHEME = "beamtest://"


@pytest.fixture(scope="session")
def beam_test_urls():
    """URLs that only Apache Beam's FileSystems can open (no network).

    Registers, once per session, a Beam file system for the scheme
    `beamtest://` that maps `beamtest://<absolute path>` to the local file, so
    the code that gs:// paths take (through `FileSystems`, never `os`) runs
    offline. Returns a function: local path -> its URL.
    """
    import os
    import shutil

    from apache_beam.io.filesystem import FileMetadata
    from apache_beam.io.localfilesystem import LocalFileSystem

    def local(url):
        return url[len(BEAM_TEST_SCHEME):] if url.startswith(
            BEAM_TEST_SCHEME) else url

    class _BeamTestFileSystem(LocalFileSystem):
        @classmethod
        def scheme(cls):
            return BEAM_TEST_SCHEME[:-3]

        def _list(self, dir_or_prefix):
            for meta in super()._list(local(dir_or_prefix)):
                yield FileMetadata(BEAM_TEST_SCHEME + meta.path,
                                   meta.size_in_bytes,
                                   meta.last_updated_in_seconds)

        def mkdirs(self, path):
            return super().mkdirs(local(path))

        def create(self, path, *args, **kwargs):
            return super().create(local(path), *args, **kwargs)

        def open(self, path, *args, **kwargs):
            return super().open(local(path), *args, **kwargs)

        def copy(self, sources, targets):
            return super().copy([local(p) for p in sources],
                                [local(p) for p in targets])

        def rename(self, sources, targets):
            return super().rename([local(p) for p in sources],
                                  [local(p) for p in targets])

        def exists(self, path):
            return super().exists(local(path))

        def size(self, path):
            return super().size(local(path))

        def last_updated(self, path):
            return super().last_updated(local(path))

        def checksum(self, path):
            return super().checksum(local(path))

        def metadata(self, path):
            meta = super().metadata(local(path))
            return FileMetadata(path, meta.size_in_bytes,
                                meta.last_updated_in_seconds)

        def delete(self, paths):
            # As object stores: "dir/" deletes everything under it.
            for path in map(local, paths):
                if os.path.isdir(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)

    def to_url(path):
        return BEAM_TEST_SCHEME + str(path)

    # Beam finds file systems among the live subclasses: keep this one alive.
    to_url.file_system = _BeamTestFileSystem
    return to_url
