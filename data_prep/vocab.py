"""SentencePiece vocabularies with the released ALBERT special pieces.

The released `30k-clean.model` is a unigram model whose first pieces are

    id:    0      1      2      3      4       5 6 7 8 9 10 11 12
    piece: <pad>  <unk>  [CLS]  [SEP]  [MASK]  ( ) " - . –  £  €

`train_vocab` builds a model with that layout from raw text (passed through
`data_prep.text.preprocess_text` first, so the vocabulary sees the same text
as training), and `check_special_pieces` verifies that a model, trained here or
released, has the special pieces at those ids; the pretraining-data builder,
the trainer and the exporters call it before relying on the ids.
"""

import heapq
import io
import os
import re
import shutil
import tempfile

import sentencepiece as spm
from absl import logging

from data_prep import output
from data_prep import reader
from data_prep import text as text_lib
from foundation import filesystems
from foundation import output_lock as output_lock_lib
from foundation import safe_io

PAD_ID = 0
UNK_ID = 1
CLS_ID = 2
SEP_ID = 3
MASK_ID = 4

# Piece -> id, as released.
SPECIAL_PIECES = {
    "<pad>": PAD_ID,
    "<unk>": UNK_ID,
    "[CLS]": CLS_ID,
    "[SEP]": SEP_ID,
    "[MASK]": MASK_ID,
}
# User-defined symbols of the released vocabulary (ids 5..12), always whole
# pieces.
USER_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


class SpecialPiecesError(ValueError):
    """A SentencePiece model lacks the special pieces at the expected ids."""


def load_model(model):
    """Loads a SentencePiece model from a path or serialized bytes.

    Args:
        model: a path (anything `tf.io.gfile` reads when it holds "://"),
            serialized model bytes, or an already loaded
            `SentencePieceProcessor` (returned as is).

    Returns:
        A `sentencepiece.SentencePieceProcessor`.

    Raises:
        SpecialPiecesError: the file is missing or not a SentencePiece model.
    """
    if isinstance(model, spm.SentencePieceProcessor):
        return model
    if isinstance(model, str):
        try:
            model = reader.read_bytes(model)
        except OSError as e:
            raise SpecialPiecesError(
                "Cannot read SentencePiece model %r: %s" % (model, e)) from None
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
    except (RuntimeError, OSError) as e:
        raise SpecialPiecesError(
            "Not a SentencePiece model (%s)." % e) from None
    return processor


def check_special_pieces(model):
    """Checks that a model holds the ALBERT special pieces at the right ids.

    `<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3, `[MASK]`=4, in both directions
    (piece -> id and id -> piece). The user symbols are not required.

    Args:
        model: a path, serialized bytes or a `SentencePieceProcessor`.

    Returns:
        The loaded `SentencePieceProcessor`.

    Raises:
        SpecialPiecesError: a special piece is missing or at another id; the
            message lists every mismatch.
    """
    processor = load_model(model)
    size = processor.get_piece_size()
    problems = []
    for piece, expected in SPECIAL_PIECES.items():
        found_id = processor.piece_to_id(piece)
        found_piece = processor.id_to_piece(expected) if expected < size else None
        if found_id != expected or found_piece != piece:
            problems.append(
                "%s should be id %d (found id %d; id %d is %r)"
                % (piece, expected, found_id, expected, found_piece))
    if problems:
        raise SpecialPiecesError(
            "SentencePiece model does not have the ALBERT special pieces "
            "(<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4); build one with "
            "`python -m data_prep.build_vocab`. Received: " + "; ".join(problems))
    return processor


_MASK64 = (1 << 64) - 1


def _mix64(value):
    """The splitmix64 finalizer: a 64-bit value to a well-mixed one."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def sentence_key(seed, place):
    """The sampling key of a sentence: a seeded hash of its place.

    Args:
        seed: the sampling seed (an int).
        place: a tuple of non-negative ints naming the sentence in the
            corpus, such as `(file index, line number)`.

    Returns:
        An int in `[0, 2**64)`.
    """
    key = _mix64(seed & _MASK64)
    for part in place:
        key = _mix64(key ^ part)
    return key


def numbered_sentences(path, file_index, counters, do_lower_case,
                       remote=filesystems.GFILE):
    """Yields `((file_index, line number), sentence)` for each non-blank line
    of one file, preprocessed as for pretraining (`text.preprocess_text`).

    Args:
        path: the file.
        file_index: its position among the inputs.
        counters: a `reader.ReadCounters`, updated in place.
        do_lower_case: whether the text is lowercased.
        remote: the backend of URLs (`foundation.filesystems`).
    """
    for number, raw in reader.iter_numbered_lines(path, counters,
                                                  remote=remote):
        sentence = text_lib.preprocess_text(raw, do_lower_case)
        if sentence:
            yield (file_index, number), sentence


def sample_sentences(sentences, sample_size, seed):
    """Uniformly samples at most `sample_size` sentences of a stream.

    Bottom-k sampling: each sentence's key is a seeded hash of its place
    (`sentence_key`) and the `sample_size` smallest keys are kept, so every
    subset of that size is equally likely, memory holds `sample_size`
    sentences whatever the stream length, and the sample does not depend on
    the order the sentences arrive in: a Beam pipeline that reads the files
    in parallel draws the same sample (`data_prep.beam_vocab`).

    Args:
        sentences: an iterable of `(place, sentence)`, places unique tuples
            of ints (see `numbered_sentences`).
        sample_size: the most sentences kept; <= 0 keeps all.
        seed: seed of the sampling.

    Returns:
        The sampled sentences, in corpus order (by place).
    """
    if sample_size <= 0:
        return [sentence for _, sentence in sorted(sentences)]
    heap = []  # (-key, place, sentence): the largest kept key on top.
    for place, sentence in sentences:
        key = sentence_key(seed, place)
        if len(heap) < sample_size:
            heapq.heappush(heap, (-key, place, sentence))
        elif key < -heap[0][0]:
            heapq.heapreplace(heap, (-key, place, sentence))
    return [sentence for _, place, sentence in
            sorted(heap, key=lambda entry: entry[1])]


def check_outputs(model_prefix):
    """Refuses a `--model_prefix` whose files cannot be written, before any
    work: a folder instead of a prefix, a read-only folder, a folder where
    `<prefix>.model` goes.

    Raises:
        safe_io.OutputError: naming `--model_prefix` and what is wrong.
    """
    if not os.path.basename(model_prefix.strip()):
        raise safe_io.OutputError(
            "--model_prefix=%s names a folder; give a file prefix, such as "
            "vocab/30k-clean (writes vocab/30k-clean.model and .vocab)"
            % model_prefix)
    if filesystems.is_remote(model_prefix):
        raise safe_io.OutputError(
            "--model_prefix=%s: SentencePiece writes local files only; give "
            "a local prefix and copy the files" % model_prefix)
    for path in output_paths(model_prefix):
        safe_io.check_output_path(path, "--model_prefix", kind="file")
        try:
            safe_io.check_replaceable(path)
        except safe_io.OutputError as error:
            raise safe_io.OutputError(f"--model_prefix: {error}") from None


def output_paths(model_prefix):
    """`(model_path, vocab_path)` of `--model_prefix`."""
    return model_prefix + ".model", model_prefix + ".vocab"


def output_lock(model_prefix):
    """The lock a vocabulary run holds on its `--model_prefix`."""
    return output.LockedOutput(output_lock_lib.OutputLock(
        model_prefix, "build_vocab", flag="--model_prefix", kind="file"))


def train_vocab(input_patterns, model_prefix, vocab_size=30000,
                do_lower_case=True, input_sentence_size=10_000_000,
                character_coverage=0.9995, hard_vocab_limit=True, seed=12345,
                num_threads=None, extra_trainer_options=None):
    """Trains a unigram SentencePiece model with the ALBERT special pieces.

    Every non-blank line of the input is one sentence; lines go through
    `preprocess_text` before training. At most `input_sentence_size` sentences
    (a uniform sample of the corpus, `sample_sentences`) are held in memory.
    One run at a time writes a `model_prefix` (`output_lock`); the files
    appear whole or not at all.

    Args:
        input_patterns: comma-separated paths or glob patterns (plain or gzip
            text; anything `tf.io.gfile` reads when a path holds "://").
            Matches that are not text are skipped (`reader.text_files`).
        model_prefix: output path prefix; writes `<prefix>.model` and
            `<prefix>.vocab`.
        vocab_size: number of pieces, special pieces included.
        do_lower_case: whether the text is lowercased.
        input_sentence_size: the most sentences sampled; <= 0 uses them all.
        character_coverage: fraction of characters the model must cover.
        hard_vocab_limit: if False, `vocab_size` is a soft limit (small
            corpora may not support a large vocabulary).
        seed: seed of the sentence sampling.
        num_threads: trainer threads (default: the CPU count).
        extra_trainer_options: more `SentencePieceTrainer` keyword options.

    Returns:
        The paths `(model_path, vocab_path)`.

    Raises:
        reader.InputError: an input is missing, unreadable or holds no text.
        SpecialPiecesError: the trained model lacks the special pieces (for
            example a user symbol clashing with them in extra options).
        ValueError: a bad value, a vocabulary size the corpus cannot give.
        safe_io.OutputError: the files cannot be written (a read-only
            folder, a full disk), or another run writes the same prefix.
    """
    check_outputs(model_prefix)
    paths = reader.text_files(reader.expand_input_patterns(input_patterns))
    check_not_inputs(paths, model_prefix)
    with output_lock(model_prefix):
        counters = reader.ReadCounters()
        sentences = (item for index, path in enumerate(paths)
                     for item in numbered_sentences(path, index, counters,
                                                    do_lower_case))
        sample = sample_sentences(sentences, input_sentence_size, seed)
        return train_from_sentences(
            sample, model_prefix, input_patterns, counters, len(paths),
            vocab_size=vocab_size, character_coverage=character_coverage,
            hard_vocab_limit=hard_vocab_limit, num_threads=num_threads,
            extra_trainer_options=extra_trainer_options)


def check_not_inputs(paths, model_prefix):
    """Refuses a run whose `.model` or `.vocab` is one of its inputs (a
    rerun over `vocab/*` would read its own `.vocab` as text).

    Raises:
        ValueError: naming the file.
    """
    inputs = {os.path.realpath(p) for p in paths
              if not filesystems.is_remote(p)}
    for path in output_paths(model_prefix):
        if os.path.realpath(path) in inputs:
            raise ValueError(
                "--model_prefix=%s would overwrite the input file %s; choose "
                "a --model_prefix that no --input_file pattern matches"
                % (model_prefix, path))


def _trainer_error(error, vocab_size, character_coverage):
    """SentencePiece's error as one line naming the flag to change."""
    message = str(error)
    too_small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)",
                          message)
    if too_small:
        needed = int(too_small.group(2))
        return ValueError(
            "--vocab_size=%d is too small for this corpus: its distinct "
            "characters (with --character_coverage=%g) and the %d special "
            "and user pieces need at least %d pieces; raise --vocab_size or "
            "lower --character_coverage"
            % (vocab_size, character_coverage,
               len(SPECIAL_PIECES) + len(USER_SYMBOLS), needed))
    too_high = re.search(r"Vocabulary size too high \((\d+)\)\. Please set "
                         r"it to a value <= (\d+)", message)
    if too_high:
        return ValueError(
            "--vocab_size=%d is more pieces than this corpus can give (at most "
            "%s); lower --vocab_size, add text, or pass --nohard_vocab_limit"
            % (vocab_size, too_high.group(2)))
    # "INTERNAL: src/x.cc(12) [check] what": keep what.
    return ValueError("SentencePiece training failed: %s" % re.sub(
        r"^\w+: \S+\(\d+\) \[.*?\] ", "", message.strip()).splitlines()[0])


def _cut_short(path):
    """Why a file SentencePiece wrote is incomplete: it does not check its
    writes, so the cause is guessed from the place."""
    import resource  # Unix only; this runs on Unix.
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and os.path.getsize(path) >= limit:
        cause = "the file-size limit was reached (ulimit -f)"
    else:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
        cause = ("the disk is full" if stat.f_bavail * stat.f_frsize < (1 << 20)
                 else "the file is incomplete")
    return cause


def _move_into_place(temp_prefix, model_prefix, piece_size):
    """Checks the files SentencePiece wrote under `temp_prefix` and renames
    them to `model_prefix`'s: the `.vocab` first, the `.model` last, so a
    `.model` is there only beside its `.vocab`.

    Raises:
        safe_io.OutputError: a file was cut short (a full disk, a
            file-size limit), naming it; nothing is renamed then.
    """
    temps = output_paths(temp_prefix)
    finals = output_paths(model_prefix)
    try:
        load_model(temps[0])
    except SpecialPiecesError:
        raise safe_io.OutputError("could not write %s: %s" % (
            finals[0], _cut_short(temps[0]))) from None
    with open(temps[1], "rb") as f:
        lines = f.read().count(b"\n")
    if lines != piece_size:
        raise safe_io.OutputError("could not write %s: %s" % (
            finals[1], _cut_short(temps[1])))
    for temp, final in zip(temps[::-1], finals[::-1]):
        try:
            os.replace(temp, final)
        except OSError as e:
            raise safe_io.OutputError(safe_io.describe_os_error(e, final)) from None


def train_from_sentences(sample, model_prefix, input_patterns, counters,
                         num_files, vocab_size=30000, character_coverage=0.9995,
                         hard_vocab_limit=True, num_threads=None,
                         extra_trainer_options=None):
    """Trains the model on sampled, preprocessed sentences (the second half
    of `train_vocab`; `data_prep.beam_vocab` samples with Beam instead).

    SentencePiece writes under a hidden temporary prefix
    (a fresh private folder `.<name>.incomplete-*` beside them); the
    files are checked and renamed into place only when both are whole.

    Args:
        sample: the sentences (a list).
        model_prefix: output path prefix.
        input_patterns: the inputs, for the error message.
        counters: the `reader.ReadCounters` of the sampling, for the log.
        num_files: how many files were read, for the log.
        vocab_size, character_coverage, hard_vocab_limit, num_threads,
            extra_trainer_options: see `train_vocab`.

    Returns:
        The paths `(model_path, vocab_path)`.

    Raises:
        reader.InputError: the sample is empty.
        SpecialPiecesError: the trained model lacks the special pieces.
        ValueError: the trainer refused the values (names the flag).
        safe_io.OutputError: a file could not be written.
    """
    logging.info("Read %d lines from %d files; training on %d sentences.",
                 counters.lines, num_files, len(sample))
    counters.log_skips()
    if not sample:
        raise reader.InputError(
            "No text to train a vocabulary on in %r." % (input_patterns,))
    directory = os.path.dirname(model_prefix)
    if directory:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise safe_io.OutputError(
                safe_io.describe_os_error(e, directory)) from None
    # SentencePiece opens its files by name and follows links: it writes
    # only inside a fresh private folder (mkdtemp), where nothing can have
    # been planted.
    try:
        temp_folder = tempfile.mkdtemp(
            prefix="." + os.path.basename(model_prefix) + ".incomplete-",
            dir=directory or ".")
    except OSError as e:
        raise safe_io.OutputError(
            safe_io.describe_os_error(e, directory or ".")) from None
    temp_prefix = os.path.join(temp_folder, os.path.basename(model_prefix))
    options = _trainer_options(vocab_size, character_coverage,
                               hard_vocab_limit, num_threads)
    options.update(model_prefix=temp_prefix, **(extra_trainer_options or {}))
    try:
        try:
            spm.SentencePieceTrainer.train(sentence_iterator=iter(sample),
                                           **options)
        except RuntimeError as e:
            raise _trainer_error(e, vocab_size, character_coverage) from None
        temp_model = output_paths(temp_prefix)[0]
        piece_size = check_special_pieces(temp_model).get_piece_size() if (
            _loads(temp_model)) else -1
        _move_into_place(temp_prefix, model_prefix, piece_size)
    finally:
        shutil.rmtree(temp_folder, ignore_errors=True)
    return output_paths(model_prefix)


def _trainer_options(vocab_size, character_coverage, hard_vocab_limit,
                     num_threads):
    """The `SentencePieceTrainer` options of an ALBERT vocabulary."""
    return dict(
        model_type="unigram",
        vocab_size=vocab_size,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=list(USER_SYMBOLS),
        character_coverage=character_coverage,
        hard_vocab_limit=hard_vocab_limit,
        input_sentence_size=0,  # the callers sample
        num_threads=num_threads or os.cpu_count() or 1,
        minloglevel=1,
    )


def model_from_texts(texts, vocab_size, do_lower_case=True,
                     hard_vocab_limit=False):
    """Trains a vocabulary in memory on a few texts (examples, small tests).

    The same model as `train_vocab` (unigram, the ALBERT special pieces),
    without files: every text is one sentence.

    Args:
        texts: an iterable of strings.
        vocab_size: number of pieces, special pieces included.
        do_lower_case: whether the text is lowercased.
        hard_vocab_limit: if False, `vocab_size` is a soft limit.

    Returns:
        The serialized model: what `spm_model=` and `load_model` take.

    Raises:
        ValueError: no text, or a vocabulary size the texts cannot give.
    """
    sentences = [text_lib.preprocess_text(text, do_lower_case)
                 for text in texts]
    sentences = [sentence for sentence in sentences if sentence]
    if not sentences:
        raise ValueError("No text to train a vocabulary on. Received: "
                         "texts=%r" % (texts,))
    writer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=writer,
            **_trainer_options(vocab_size, 1.0, hard_vocab_limit, 1))
    except RuntimeError as e:
        raise _trainer_error(e, vocab_size, 1.0) from None
    check_special_pieces(writer.getvalue())
    return writer.getvalue()


def _loads(path):
    try:
        load_model(path)
        return True
    except SpecialPiecesError:
        return False
