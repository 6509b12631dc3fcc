"""The pretraining-data builder: text files -> sharded TFRecords + statistics.

Data flow (memory stays bounded whatever the corpus size):

    files --(reader.iter_chunks: whole documents, ~chunk_bytes each)-->
    chunk --(worker: preprocess, SentencePiece once per line, pairs for every
             dupe, shuffle within the chunk, mask, encode, frame)--> records
    --(main: shuffle buffer --> round-robin over output shards)--> files

Reproducibility: chunk boundaries depend only on the input, each chunk draws
from generators seeded by `(random_seed, chunk index)`, results are consumed
in chunk order and the main process shuffles with its own seeded generator.
So the output is byte-identical for a given input and seed whatever
`num_workers` is.

What the bounded shuffle means for example order. The official script
shuffles all instances of the whole corpus (and needs them all in memory).
Here:
- the instances of one chunk (all `dupe_factor` copies of its documents)
  are shuffled together;
- a shuffle buffer of `shuffle_buffer_size` records then mixes neighbouring
  chunks: a record leaves the buffer at a random later time, so records of a
  chunk spread over roughly the next `shuffle_buffer_size` outputs;
- records are dealt round-robin to the output shards.
So the output is shuffled locally, not globally: corpus order survives at the
scale of many chunks (early files come out first, across all shards), and
the duplicates of a document (its different maskings) sit within about one
chunk plus one buffer of each other. Training should shuffle the shard files
and interleave them, with its own shuffle buffer, as the ALBERT input
pipeline does; shuffle the input files beforehand if the corpus is ordered
(by topic, source or date).

Memory: at most `2 * num_workers` chunks are in flight (their text and
records), plus the shuffle buffer.
"""

import collections
import dataclasses
import itertools
import json
import multiprocessing
import random
import sys
import time

import numpy as np
from absl import logging

from data_prep import instances as instances_lib
from data_prep import masking
from data_prep import reader
from data_prep import schema
from data_prep import text as text_lib
from data_prep import tfrecord
from data_prep import vocab

STATS_SUFFIX = ".stats.json"

_COUNTER_NAMES = (
    "chunks", "documents", "sentences", "empty_sentences",
    "one_sentence_documents", "long_sentences", "instances", "tokens",
    "maskable_tokens", "masked_tokens", "swapped_instances", "short_instances",
    "truncated_instances", "random_next_instances", "split_sentences",
    "unpairable_chunks",
)


@dataclasses.dataclass(frozen=True)
class ChunkSettings:
    """Everything a worker needs besides the chunk (picklable)."""

    model_proto: bytes
    options: instances_lib.InstanceOptions
    dupe_factor: int
    random_seed: int
    do_lower_case: bool


class ChunkProcessor:
    """Turns one chunk of text into framed TFRecord records.

    Args:
        settings: `ChunkSettings`.
    """

    def __init__(self, settings):
        self.settings = settings
        self.sp_model = vocab.check_special_pieces(settings.model_proto)
        self.start_table = masking.start_piece_table(self.sp_model)
        self.vocab_size = self.sp_model.get_piece_size()
        # Rows per masking batch: about 256K token slots.
        self.batch_size = max(64, (1 << 18) // settings.options.max_seq_length)

    def __call__(self, chunk):
        """Processes a `reader.Chunk`.

        Returns:
            `(frames, counters)`: the framed records in their shuffled order
            and a dict of counts (see `_COUNTER_NAMES`, plus `ngram_counts`).
        """
        settings, options = self.settings, self.settings.options
        counters = dict.fromkeys(_COUNTER_NAMES, 0)
        counters["chunks"] = 1
        seeds = np.random.SeedSequence([settings.random_seed, chunk.index])
        np_seed, py_seed = seeds.spawn(2)
        np_rng = np.random.Generator(np.random.PCG64(np_seed))
        py_rng = random.Random(int(py_seed.generate_state(1, np.uint64)[0]))

        lower = settings.do_lower_case
        lines = [text_lib.preprocess_text(line, lower) for line in chunk.lines]
        ids = self.sp_model.encode(lines, out_type=int, num_threads=1)
        lengths = [len(x) for x in ids]
        flat_ids = np.fromiter(itertools.chain.from_iterable(ids), np.int32,
                               sum(lengths))
        del lines, ids

        max_num_tokens = options.max_seq_length - 3
        offsets = [0]
        documents = []
        bounds = chunk.doc_starts + [len(chunk.lines)]
        for doc in range(len(chunk.doc_starts)):
            first = len(offsets) - 1
            for line in range(bounds[doc], bounds[doc + 1]):
                length = lengths[line]
                if not length:
                    counters["empty_sentences"] += 1
                    continue
                if length > max_num_tokens:
                    counters["long_sentences"] += 1
                offsets.append(offsets[-1] + length)
            sentences = len(offsets) - 1 - first
            if sentences >= 2:
                documents.append((first, first + sentences))
            elif sentences == 1:
                counters["one_sentence_documents"] += 1
        counters["documents"] = len(documents)
        counters["sentences"] = len(offsets) - 1

        word_starts = self.start_table[flat_ids]
        pairs = instances_lib.build_pairs(
            offsets, documents, word_starts, options, settings.dupe_factor,
            py_rng, counters)
        pairs = pairs.take(np_rng.permutation(len(pairs)))
        counters["instances"] = len(pairs)
        counters["swapped_instances"] = int(pairs.label.sum())
        counters["short_instances"] = int(pairs.short.sum())
        ngram_counts = [0] * (options.ngram + 1)
        frames = []
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs.take(slice(start, start + self.batch_size))
            features, stats = instances_lib.assemble_and_mask(
                flat_ids, batch, options, self.start_table, self.vocab_size,
                np_rng)
            for key in ("tokens", "maskable_tokens", "masked_tokens"):
                counters[key] += stats[key]
            ngram_counts = [a + b for a, b in zip(ngram_counts, stats["ngram_counts"])]
            frames.extend(tfrecord.frame_records(schema.encode_examples(features)))
        counters["ngram_counts"] = ngram_counts
        return frames, counters


_WORKER = None


def _init_worker(settings):
    global _WORKER
    _WORKER = ChunkProcessor(settings)


def _run_worker(chunk):
    return _WORKER(chunk)


def _process_parallel(chunks, settings, num_workers):
    """Yields chunk results in chunk order, at most 2 per worker in flight."""
    # Workers never use TensorFlow. "fork" starts them at once; it is used
    # only where it is safe: on Linux, and before TensorFlow (with its
    # threads) is loaded in this process. Otherwise "spawn" starts them clean.
    safe_to_fork = (sys.platform.startswith("linux")
                    and "tensorflow" not in sys.modules)
    context = multiprocessing.get_context("fork" if safe_to_fork else "spawn")
    with context.Pool(num_workers, initializer=_init_worker,
                      initargs=(settings,)) as pool:
        pending = collections.deque()
        for chunk in chunks:
            pending.append(pool.apply_async(_run_worker, (chunk,)))
            if len(pending) >= 2 * num_workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def output_paths(output_file, num_output_shards=1):
    """Returns the shard paths for `--output_file` / `--num_output_shards`.

    A comma-separated list names the shards itself; a single path with
    `num_output_shards > 1` becomes `<path>-00000-of-0000N`, ...

    Raises:
        ValueError: a list whose length disagrees with `num_output_shards`.
    """
    paths = [p.strip() for p in output_file.split(",") if p.strip()]
    if not paths:
        raise ValueError("No output file given. Received: %r" % output_file)
    if num_output_shards < 1:
        raise ValueError("num_output_shards must be >= 1. Received: %d"
                         % num_output_shards)
    if len(paths) > 1:
        if num_output_shards not in (1, len(paths)):
            raise ValueError(
                "--output_file lists %d files but --num_output_shards is %d."
                % (len(paths), num_output_shards))
        return paths
    if num_output_shards == 1:
        return paths
    return ["%s-%05d-of-%05d" % (paths[0], i, num_output_shards)
            for i in range(num_output_shards)]


class _ShuffleBuffer:
    """A seeded streaming shuffle of at most `size` items."""

    def __init__(self, size, seed):
        self._size = size
        self._items = []
        self._rng = random.Random(seed)

    def push(self, item):
        """Adds an item; returns one that leaves the buffer, or None."""
        if self._size <= 0:
            return item
        if len(self._items) < self._size:
            self._items.append(item)
            return None
        slot = self._rng.randrange(self._size)
        out, self._items[slot] = self._items[slot], item
        return out

    def drain(self):
        """Returns the remaining items in random order."""
        items, self._items = self._items, []
        self._rng.shuffle(items)
        return items


def create_pretraining_data(
        input_file, output_file, spm_model_file,
        options=instances_lib.InstanceOptions(), dupe_factor=40,
        random_seed=12345, do_lower_case=True, num_workers=1,
        num_output_shards=1, chunk_bytes=1 << 20, shuffle_buffer_size=10000,
        max_line_bytes=reader.DEFAULT_MAX_LINE_BYTES,
        progress_interval_s=30.0):
    """Builds pretraining TFRecords (official schema) and a statistics file.

    Args:
        input_file: comma-separated paths or glob patterns.
        output_file: output path, or comma-separated shard paths.
        spm_model_file: the SentencePiece model (with the ALBERT special
            pieces, see `vocab.check_special_pieces`).
        options: `instances.InstanceOptions`.
        dupe_factor: maskings of each document.
        random_seed: seed of every random choice.
        do_lower_case: lowercase the text (must match the vocabulary).
        num_workers: worker processes; <= 1 works in this process. Does not
            change the output.
        num_output_shards: shards when `output_file` is a single path.
        chunk_bytes: text per work unit and shuffle window (characters).
        shuffle_buffer_size: records in the cross-chunk shuffle buffer.
        max_line_bytes: longer lines are skipped (and counted).
        progress_interval_s: seconds between progress log lines.

    Returns:
        The statistics dict (also written to `<first output>.stats.json`).

    Raises:
        reader.InputError: missing/unreadable inputs, or no usable text.
        vocab.SpecialPiecesError: the SentencePiece model is unusable.
        ValueError: bad options.
    """
    options.validate()
    if dupe_factor < 1:
        raise ValueError("dupe_factor must be >= 1. Received: %d" % dupe_factor)
    paths = reader.expand_input_patterns(input_file)
    try:
        model_proto = reader.read_bytes(spm_model_file)
    except OSError as e:
        raise vocab.SpecialPiecesError(
            "Cannot read SentencePiece model %r: %s" % (spm_model_file, e)) from None
    vocab.check_special_pieces(model_proto)
    shard_paths = output_paths(output_file, num_output_shards)
    if "," in output_file:
        stats_path = shard_paths[0] + STATS_SUFFIX
    else:
        stats_path = output_file.strip() + STATS_SUFFIX
    settings = ChunkSettings(model_proto, options, dupe_factor, random_seed,
                             do_lower_case)
    logging.info("Reading %d input files; writing %d shards (%s%s); %d workers.",
                 len(paths), len(shard_paths), shard_paths[0],
                 ", ..." if len(shard_paths) > 1 else "", max(1, num_workers))

    read_counters = reader.ReadCounters()
    chunks = reader.iter_chunks(paths, read_counters, chunk_bytes, max_line_bytes)
    if num_workers > 1:
        results = _process_parallel(chunks, settings, num_workers)
    else:
        processor = ChunkProcessor(settings)
        results = map(processor, chunks)

    totals = dict.fromkeys(_COUNTER_NAMES, 0)
    ngram_counts = [0] * (options.ngram + 1)
    buffer = _ShuffleBuffer(shuffle_buffer_size, "%d-shuffle" % random_seed)
    writers = []
    written = 0
    start_time = last_log = time.time()
    try:
        writers = [tfrecord.ShardWriter(path) for path in shard_paths]

        def emit(frame):
            nonlocal written
            writers[written % len(writers)].write(frame)
            written += 1

        for frames, counters in results:
            for key in _COUNTER_NAMES:
                totals[key] += counters[key]
            ngram_counts = [a + b for a, b in
                            zip(ngram_counts, counters["ngram_counts"])]
            for frame in frames:
                frame = buffer.push(frame)
                if frame is not None:
                    emit(frame)
            now = time.time()
            if now - last_log >= progress_interval_s:
                last_log = now
                logging.info(
                    "Progress: %d chunks, %d documents, %.1f MB read, %d "
                    "instances (%.0f instances/s).", totals["chunks"],
                    totals["documents"], read_counters.bytes / 1e6,
                    totals["instances"], totals["instances"] / (now - start_time))
        for frame in buffer.drain():
            emit(frame)
        if not written:
            raise reader.InputError(
                "No instances could be built from %r: every document was "
                "empty or had a single sentence (%d one-sentence documents, "
                "%d lines read)." % (input_file,
                                     totals["one_sentence_documents"],
                                     read_counters.lines))
        for writer in writers:
            writer.commit()
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    finally:
        if hasattr(results, "close"):
            results.close()  # Stops the worker pool, if any.
    elapsed = time.time() - start_time

    stats = _statistics(totals, ngram_counts, read_counters, options)
    stats.update(
        input_files=paths, output_files=shard_paths,
        records_per_shard=[w.count for w in writers],
        elapsed_s=round(elapsed, 3),
        instances_per_s=round(totals["instances"] / max(elapsed, 1e-9), 1),
        settings=dict(dataclasses.asdict(options), dupe_factor=dupe_factor,
                      random_seed=random_seed, do_lower_case=do_lower_case,
                      num_output_shards=len(shard_paths),
                      chunk_bytes=chunk_bytes,
                      shuffle_buffer_size=shuffle_buffer_size))
    tfrecord.write_text_atomically(stats_path, json.dumps(stats, indent=2) + "\n")
    _log_summary(stats, read_counters, stats_path)
    return stats


def _fraction(part, whole):
    return round(part / whole, 6) if whole else 0.0


def _statistics(totals, ngram_counts, read_counters, options):
    """The statistics file's content (plain JSON types)."""
    instances = totals["instances"]
    return {
        "instances": instances,
        "documents": totals["documents"],
        "sentences": totals["sentences"],
        "tokens": totals["tokens"],
        "maskable_tokens": totals["maskable_tokens"],
        "masked_tokens": totals["masked_tokens"],
        "masked_fraction": _fraction(totals["masked_tokens"],
                                     totals["maskable_tokens"]),
        "mean_tokens_per_instance": _fraction(totals["tokens"], instances),
        "ngram_histogram": {str(n): ngram_counts[n]
                            for n in range(1, options.ngram + 1)},
        "sop_label_counts": {"0": instances - totals["swapped_instances"],
                             "1": totals["swapped_instances"]},
        "sop_swapped_fraction": _fraction(totals["swapped_instances"], instances),
        "short_seq_fraction": _fraction(totals["short_instances"], instances),
        "truncated_instances": totals["truncated_instances"],
        "random_next_instances": totals["random_next_instances"],
        "split_sentences": totals["split_sentences"],
        "read": read_counters.as_dict(),
        "skipped": {
            "non_utf8_lines": read_counters.non_utf8_lines,
            "overlong_lines": read_counters.overlong_lines,
            "empty_files": read_counters.empty_files,
            "empty_sentences": totals["empty_sentences"],
            "one_sentence_documents": totals["one_sentence_documents"],
            "unpairable_chunks": totals["unpairable_chunks"],
        },
        "long_sentences_truncated": totals["long_sentences"],
    }


def _log_summary(stats, read_counters, stats_path):
    logging.info(
        "Wrote %d instances (%d documents, %.1f MB read) in %.1f s "
        "(%.0f instances/s); masked fraction %.4f, SOP swapped %.4f, short "
        "%.4f. Statistics: %s", stats["instances"], stats["documents"],
        read_counters.bytes / 1e6, stats["elapsed_s"], stats["instances_per_s"],
        stats["masked_fraction"], stats["sop_swapped_fraction"],
        stats["short_seq_fraction"], stats_path)
    read_counters.log_skips()
    skipped = stats["skipped"]
    for kind in ("empty_sentences", "one_sentence_documents",
                 "unpairable_chunks"):
        if skipped[kind]:
            logging.warning("Skipped %d %s.", skipped[kind], kind.replace("_", " "))
    if stats["long_sentences_truncated"]:
        logging.warning(
            "%d sentences were longer than max_seq_length - 3 tokens; their "
            "instances were truncated.", stats["long_sentences_truncated"])
