"""The main job's options, and what it checks before any work.

`QuickstartOptions` holds the program's flags (the arguments of
`quickstart.run` a user sets most), each with its range. `check_corpus`
reads a user's corpus (`--input_file`) once, before TensorFlow loads and
before anything is written, and refuses, in one line naming the flag and
what the job needs, a corpus it could not use: missing, empty, not text (a
gzip file, an image), not UTF-8 (naming the line), a single line, too few
documents for the held-out split and the downstream tasks, or too many
characters for `--vocab_size`. `run_settings` is what makes an output
folder's run what it is (`foundation.run_record.RunRecord`): a rerun into the
folder with other settings is refused before anything in it changes.

This module imports no TensorFlow.
"""

import collections
import contextlib
import dataclasses
import hashlib
import json
import os
from typing import Optional

from albert_apps.quickstart import data
from albert_apps.quickstart import defaults
from albert_apps.quickstart import downstream
from data_prep import text as text_lib
from data_prep import vocab as vocab_lib
from foundation import flag_options as flag_options_lib
from foundation import output_lock
from foundation import run_record
from foundation import safe_io
from foundation.flag_options import option

# What the job needs of a corpus: a held-out document (one pretraining
# document in `data.EVAL_EVERY`), and `MIN_TASK_DOCUMENTS` downstream
# documents of two or more passages (`downstream.write_task`). With one
# document in `downstream.MIN_EVERY` going downstream, 15 documents give both.
MIN_TASK_DOCUMENTS = 4
MIN_DOCUMENTS = 15


@dataclasses.dataclass
class QuickstartOptions:
    """The program's flags (the arguments of `quickstart.run` a user sets
    most)."""

    output_dir: str = option("runs/quickstart", "Where every artifact goes.")
    input_file: Optional[str] = option(
        None, "Text corpus (UTF-8, one sentence a line, a blank line between "
        "documents; at least %d documents); default: the standard library's "
        "docstrings." % MIN_DOCUMENTS)
    max_corpus_chars: int = option(
        3_000_000, "Cap on the pretraining text (characters).",
        minimum=10_000)
    vocab_size: int = option(4000, "SentencePiece pieces (a soft limit).",
                             minimum=100)
    max_seq_length: int = option(64, "Tokens a record.", minimum=16)
    num_train_steps: int = option(defaults.NUM_TRAIN_STEPS,
                                  "Pretraining steps.", minimum=1)
    train_seconds: float = option(
        defaults.TRAIN_SECONDS, "Time budget of pretraining in this run "
        "(seconds; 0: none): "
        "training stops, saving a checkpoint, once it is spent, even before "
        "num_train_steps; running again continues from there.", minimum=0)
    train_batch_size: int = option(32, "Batch size.", minimum=1)
    dupe_factor: int = option(10, "Maskings of each training document.",
                              minimum=1)
    dtype: str = option(
        "auto", "Pretraining precision: bfloat16 (mixed, float32 variables), "
        "float32, or auto: bfloat16 where the CPU or accelerator has fast "
        "bfloat16 matmuls (AVX512_BF16, AMX, TPU, recent GPUs), else "
        "float32.", choices=("auto", "float32", "bfloat16"))


# Files a corpus is often mistaken for: their first bytes, and what they are.
_NOT_TEXT = (
    (b"\x1f\x8b", "gzip-compressed data (decompress it first: gunzip)"),
    (b"BZh", "bzip2-compressed data (decompress it first: bunzip2)"),
    (b"\xfd7zXZ\x00", "xz-compressed data (decompress it first: unxz)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data (decompress it first)"),
    (b"PK\x03\x04", "a zip archive (extract the text first)"),
    (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"), (b"%PDF", "a PDF document"),
    (b"\x7fELF", "a program"))
_FORMAT = ("the job reads UTF-8 text, one sentence a line, a blank line "
           "between documents")
# SentencePiece's own pieces beside the characters: <pad>, <unk>, three
# control symbols and the user symbols of `data_prep.vocab`.
_META_PIECES = 5 + len(vocab_lib.USER_SYMBOLS)
_CHARACTER_COVERAGE = 0.9995  # `vocab.train_vocab`'s default.


def _refuse(path, problem, flag="--input_file"):
    return ValueError(f"{flag}={path} {problem}")


def _sniff(path, flag):
    """Refuses a path that is no readable file, or a binary format."""
    if not os.path.exists(path):
        raise _refuse(path, "does not exist", flag)
    if os.path.isdir(path):
        raise _refuse(path, "is a folder; name the corpus file", flag)
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError as error:
        raise _refuse(path, f"cannot be read: {error.strerror}", flag) from None
    for magic, what in _NOT_TEXT:
        if head.startswith(magic):
            raise _refuse(path, f"is not text: it is {what}; {_FORMAT}", flag)
    if b"\0" in head:
        raise _refuse(path, f"is not text (it holds NUL bytes: a binary "
                      f"file); {_FORMAT}", flag)


def read_corpus(path, flag="--input_file", max_chars=None):
    """Reads a corpus strictly: its documents, and its fingerprint.

    Every line is checked (and hashed); the documents are kept only up to
    about `max_chars` characters, what the job reads of them.

    Args:
        path: the corpus file.
        flag: the flag that named it, as the user typed it.
        max_chars: keep documents until they hold this many characters
            (None: all).

    Returns:
        `(documents, fingerprint)`: the documents kept (lists of
        sentences), and a dict `sha256`, `bytes`, `lines` (non-blank) and
        `documents` (all of them).

    Raises:
        ValueError: one line naming the file: missing, a folder, not text,
            not UTF-8 (with the line and the byte), empty or a single line.
    """
    _sniff(path, flag)
    digest, size, lines, kept = hashlib.sha256(), 0, 0, 0
    total, in_document = 0, False
    documents, document = [], []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            digest.update(raw)
            size += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _refuse(path, (
                    f"line {number} is not UTF-8 text (byte "
                    f"0x{raw[error.start]:02x} at byte {error.start + 1} of "
                    f"the line); {_FORMAT}: convert it first (iconv -t "
                    "UTF-8)"), flag) from None
            if "\0" in line:
                raise _refuse(path, f"line {number} holds a NUL byte: it is "
                              f"not text; {_FORMAT}", flag)
            line = line.lstrip("\ufeff").strip() if number == 1 else line.strip()
            if line:
                lines += 1
                total += not in_document
                in_document = True
                if max_chars is None or kept < max_chars:
                    document.append(line)
                    kept += len(line) + 1
            else:
                in_document = False
                if document:
                    documents.append(document)
                    document = []
    if document:
        documents.append(document)
    if not lines:
        raise _refuse(path, f"is empty; {_FORMAT}", flag)
    if lines == 1:
        raise _refuse(path, (
            f"holds a single line of text; {_FORMAT}, and the job needs at "
            f"least {MIN_DOCUMENTS} documents of several sentences"), flag)
    return documents, {"sha256": digest.hexdigest(), "bytes": size,
                       "lines": lines, "documents": total}


def required_pieces(documents):
    """Pieces SentencePiece needs at least for `documents`: the characters
    that cover `_CHARACTER_COVERAGE` of the text (as the vocabulary is
    trained: preprocessed, lowercased), and its own pieces."""
    counts = collections.Counter()
    for document in documents:
        for sentence in document:
            # SentencePiece starts each sentence and word with U+2581.
            counts.update("\u2581" + text_lib.preprocess_text(
                sentence).replace(" ", "\u2581"))
    total, covered, needed = sum(counts.values()), 0, 0
    for char, count in counts.most_common():
        if covered >= _CHARACTER_COVERAGE * total:
            break
        covered += count
        # A user symbol's character is one piece, already counted.
        needed += char not in vocab_lib.USER_SYMBOLS
    return needed + _META_PIECES


def check_corpus(input_file, max_corpus_chars=3_000_000, vocab_size=4000):
    """Refuses a corpus the job cannot use, before any work.

    Deals the documents as the corpus stage will (`data.deal`, with the
    downstream share of `downstream.choose_every`) and checks that each part
    is large enough.

    Args:
        input_file: the user's corpus (None: the built-in one, not checked).
        max_corpus_chars: `--max_corpus_chars`.
        vocab_size: `--vocab_size`.

    Returns:
        The corpus's fingerprint (see `read_corpus`) with `documents`,
        `held_out`, `downstream` (documents of two or more passages) and
        `every`; None for the built-in corpus.

    Raises:
        ValueError: one line naming the flag and what the job needs.
    """
    if input_file is None:
        return None
    # The job reads at most 1.5 times the cap (`downstream.choose_every`).
    documents, fingerprint = read_corpus(input_file,
                                         max_chars=2 * max_corpus_chars)
    every = downstream.choose_every(documents, max_corpus_chars)
    split = collections.defaultdict(list)
    for name, document in data.deal(documents, downstream_every=every,
                                    max_chars=max_corpus_chars):
        split[name].append(document)
    usable = sum(len(downstream.passages(d)) >= 2
                 for d in split["downstream"])
    dealt = sum(len(v) for v in split.values())
    if not split["eval"] or usable < MIN_TASK_DOCUMENTS:
        capped = (f" (read up to --max_corpus_chars={max_corpus_chars})"
                  if dealt < fingerprint["documents"] else "")
        raise _refuse(input_file, (
            f"is too small for the job: its {fingerprint['documents']} "
            "documents"
            f"{capped} give {len(split['eval'])} held-out and {usable} "
            f"downstream documents of over {downstream.PASSAGE_WORDS} words; "
            f"it needs at least 1 held-out document (one pretraining document "
            f"in {data.EVAL_EVERY}) and {MIN_TASK_DOCUMENTS} downstream ones "
            f"(one document in {every}): give it at least {MIN_DOCUMENTS} "
            "documents of several sentences, a blank line between "
            "documents"))
    needed = required_pieces(split["train"])
    if vocab_size < needed:
        raise ValueError(
            f"--vocab_size={vocab_size} is too small for the characters of "
            f"--input_file={input_file}: its vocabulary needs at least "
            f"{needed} pieces; raise --vocab_size")
    return dict(fingerprint, held_out=len(split["eval"]), downstream=usable,
                every=every)


def check_input_is_not_an_output(input_file, output_dir):
    """Refuses an `--input_file` that the job writes (it would be replaced
    while it is read, or change under a later rerun)."""
    if input_file is None:
        return
    path = os.path.realpath(input_file)
    root = os.path.realpath(output_dir)
    written = [os.path.join(root, name) for name in (
        "data", "pretrain", "export", "finetune", "report.txt",
        "report.json", "training_curves.png", "export.json")]
    if any(path == w or path.startswith(w + os.sep) for w in written):
        raise ValueError(
            f"--input_file={input_file} is a file the job writes under "
            f"--output_dir={output_dir}; copy it elsewhere first")


def run_settings(input_file, fingerprint, **settings):
    """What makes an output folder's run what it is, for
    `run_record.RunRecord`: the corpus (path and content), and the settings
    that change what was built.

    Args:
        input_file: `--input_file` (None: the built-in corpus).
        fingerprint: what `check_corpus` returned.
        **settings: `{flag or argument name: value}`.
    """
    if input_file is None:
        corpus = "the built-in corpus"
    else:
        corpus = "%s (sha256 %s, %d bytes)" % (
            os.path.abspath(input_file), fingerprint["sha256"][:16],
            fingerprint["bytes"])
    return dict(settings, **{"--input_file": corpus})


def check_arguments(**arguments):
    """Checks the flags' ranges (`QuickstartOptions`) of the arguments of
    `quickstart.run`, with the flags' names.

    Raises:
        ValueError: "--vocab_size must be a number >= 100. Received: 0".
    """
    names = {f.name for f in dataclasses.fields(QuickstartOptions)}
    flag_options_lib.check_values(QuickstartOptions(
        **{k: v for k, v in arguments.items() if k in names}))


def _check_library_arguments(learning_rate, max_predictions_per_seq,
                             save_checkpoints_steps, max_eval_steps,
                             num_threads, finetune_seeds, finetune_steps):
    """The ranges of the arguments of `quickstart.run` that are no flags."""
    positive = {"max_predictions_per_seq": max_predictions_per_seq,
                "save_checkpoints_steps": save_checkpoints_steps,
                "max_eval_steps": max_eval_steps, "num_threads": num_threads,
                "finetune_steps": finetune_steps}
    for name, value in positive.items():
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a whole number >= 1. "
                             f"Received: {value!r}")
    if not learning_rate > 0 or learning_rate == float("inf"):
        raise ValueError("learning_rate must be a finite number > 0. "
                         f"Received: {learning_rate!r}")
    if not finetune_seeds:
        raise ValueError("finetune_seeds must name at least one seed")


def _check_earlier_version(output_dir, input_file, max_corpus_chars,
                           vocab_size):
    """Refuses a folder of an earlier version of the job (no run record)
    whose data was built from other inputs: the stages would rebuild it
    before training refused its checkpoints."""
    data_dir = os.path.join(output_dir, "data")
    try:
        with open(os.path.join(data_dir, "corpus.json"), encoding="utf-8") as f:
            built = json.load(f).get("settings", {})
    except (OSError, ValueError, AttributeError):
        return
    now = {"--input_file": input_file and os.path.abspath(input_file),
           "--max_corpus_chars": max_corpus_chars}
    then = {"--input_file": built.get("input_file"),
            "--max_corpus_chars": built.get("max_corpus_chars")}
    try:
        with open(os.path.join(data_dir, "vocab.json"), encoding="utf-8") as f:
            then["--vocab_size"] = json.load(f).get("requested_size")
        now["--vocab_size"] = vocab_size
    except (OSError, ValueError, AttributeError):
        pass
    changed = [f"{flag}={then[flag]!r} there, {now[flag]!r} now"
               for flag in now if then[flag] != now[flag]]
    if changed:
        raise safe_io.OutputError(
            f"--output_dir={output_dir} holds an earlier run made from other "
            f"inputs ({'; '.join(changed)}); choose another --output_dir, or "
            "remove the folder to start over")


@contextlib.contextmanager
def claim_output(output_dir, input_file=None, max_corpus_chars=3_000_000,
                 vocab_size=4000, max_seq_length=64, train_batch_size=32,
                 dupe_factor=10, max_predictions_per_seq=None,
                 learning_rate=5e-3, num_threads=2,
                 finetune_seeds=defaults.FINETUNE_SEEDS,
                 finetune_steps=defaults.FINETUNE_STEPS,
                 save_checkpoints_steps=None,
                 max_eval_steps=None, **other_flags):
    """Checks everything, then holds `output_dir` for one run of the job.

    In order, before anything is written: every argument's range, the
    output folder (a file, a read-only place), the corpus
    (`check_corpus`); then the folder's lock (`output_lock.OutputLock`: a
    second job into it fails at once, naming the holder's process; a killed
    job's lock is taken over) and its run record (`run_record.RunRecord`: a
    rerun with other inputs or settings is refused before anything in the
    folder changes).

    Args:
        output_dir: `--output_dir`.
        the others: the arguments of `quickstart.run` (`other_flags`: the
            remaining flags, range-checked only).

    Yields:
        The corpus's fingerprint (`check_corpus`; None: built-in corpus).

    Raises:
        ValueError: one line naming the flag at fault (`safe_io.OutputError`
            for the folder, `OutputLockedError` when another job holds it).
    """
    check_arguments(output_dir=output_dir, input_file=input_file,
                    max_corpus_chars=max_corpus_chars, vocab_size=vocab_size,
                    max_seq_length=max_seq_length, dupe_factor=dupe_factor,
                    train_batch_size=train_batch_size, **other_flags)
    _check_library_arguments(learning_rate, max_predictions_per_seq,
                             save_checkpoints_steps, max_eval_steps,
                             num_threads, finetune_seeds, finetune_steps)
    safe_io.check_output_path(output_dir, "--output_dir")
    check_input_is_not_an_output(input_file, output_dir)
    fingerprint = check_corpus(input_file, max_corpus_chars, vocab_size)
    settings = run_settings(
        input_file, fingerprint, **{
            "--max_corpus_chars": max_corpus_chars,
            "--vocab_size": vocab_size, "--max_seq_length": max_seq_length,
            "--dupe_factor": dupe_factor,
            "--train_batch_size": train_batch_size,
            "max_predictions_per_seq": max_predictions_per_seq,
            "learning_rate": learning_rate})
    with output_lock.OutputLock(output_dir, "quickstart", flag="--output_dir"):
        record = run_record.RunRecord(output_dir, "quickstart", settings)
        if record.read() is None:
            _check_earlier_version(output_dir, input_file, max_corpus_chars,
                                   vocab_size)
        record.claim("--output_dir")
        yield fingerprint
