"""The pretraining-data builder: text files -> sharded TFRecords + statistics.

Data flow (memory stays bounded whatever the corpus size):

    files --(reader.plan_units, reader.iter_chunks: whole documents,
             ~chunk_bytes each)-->
    chunk --(worker: preprocess, SentencePiece once per line, pairs for every
             dupe, shuffle within the chunk, mask, encode, frame)--> records
    --(main, pass 1: each record, with its shuffle key, to a temporary
       bucket file)--> buckets
    --(main, pass 2: bucket by bucket, sorted by key, dealt round-robin over
       the output shards)--> files

This is the local runner; `data_prep.beam_pipeline` runs the same chunk
work (`ChunkProcessor`) as Apache Beam transforms. Each chunk draws from
generators seeded by `(random_seed, chunk key)` and records go to the shards
by one rule (`data_prep.output`), so the output is byte-identical for a
given input and seed whatever `num_workers`, the bucket count, the memory
budget or the Beam runner. `global_shuffle=False` writes the chunk order in
one pass; `dynamic_masking` writes the records without masks. At most
`2 * num_workers` chunks are in flight, plus the 16 MB scatter buffers in
pass 1 and one bucket in pass 2.

The order, the modes and the statistics, for users: docs/pretraining_data.md.
"""

import collections
import dataclasses
import hashlib
import itertools
import json
import multiprocessing
import os
import random
import sys
import time

import numpy as np
from absl import logging

from data_prep import instances as instances_lib
from data_prep import mixing
from data_prep import ngram_masking
from data_prep import output as output_lib
from data_prep import reader
from data_prep import schema
from data_prep import sentence_order
from data_prep import shuffle
from data_prep import static_masking
from data_prep import statistics as statistics_lib
from data_prep import text as text_lib
from data_prep import tfrecord
from data_prep import vocab
from foundation import filesystems
from foundation import output_lock as output_lock_lib
from foundation import progress

# Records sorted in memory at a time by the global shuffle (one bucket).
DEFAULT_SHUFFLE_MEMORY_BYTES = 32 << 20
MIN_SHUFFLE_MEMORY_BYTES = 1 << 20

# Named through the pipeline by its callers.
output_paths = output_lib.output_paths
stats_path = output_lib.stats_path

@dataclasses.dataclass(frozen=True)
class ChunkSettings:
    """Everything a worker needs besides the chunk (picklable)."""

    model_proto: bytes
    options: instances_lib.InstanceOptions
    dupe_factor: int
    random_seed: int
    do_lower_case: bool
    dynamic_masking: bool = False


class ChunkProcessor:
    """Turns one chunk of text into framed TFRecord records.

    Args:
        settings: `ChunkSettings`.
    """

    def __init__(self, settings):
        self.settings = settings
        self.sp_model = vocab.check_special_pieces(settings.model_proto)
        self.start_table = ngram_masking.start_piece_table(self.sp_model)
        self.vocab_size = self.sp_model.get_piece_size()
        # Rows per masking batch: about 256K token slots.
        self.batch_size = max(64, (1 << 18) // settings.options.max_seq_length)

    def __call__(self, chunk):
        """Processes a `reader.Chunk`.

        Returns:
            `(frames, counters)`: the framed records in their shuffled order
            and a dict of counts (see `statistics_lib.COUNTER_NAMES`, plus
            `ngram_counts`).
        """
        settings, options = self.settings, self.settings.options
        counters = dict.fromkeys(statistics_lib.COUNTER_NAMES, 0)
        counters["chunks"] = 1
        seeds = np.random.SeedSequence([settings.random_seed, *chunk.key])
        np_seed, py_seed = seeds.spawn(2)
        np_rng = np.random.Generator(np.random.PCG64(np_seed))
        py_rng = random.Random(int(py_seed.generate_state(1, np.uint64)[0]))

        lower = settings.do_lower_case
        lines = [text_lib.preprocess_text(line, lower) for line in chunk.lines]
        ids = text_lib.encode_preprocessed(self.sp_model, lines)
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
        pairs = sentence_order.build_pairs(
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
            if settings.dynamic_masking:
                features = instances_lib.assemble(
                    flat_ids, batch, options.max_seq_length, self.start_table)
                stats = static_masking.token_counts(features)
            else:
                features, stats = instances_lib.assemble_and_mask(
                    flat_ids, batch, options, self.start_table,
                    self.vocab_size, np_rng)
                ngram_counts = [a + b for a, b in
                                zip(ngram_counts, stats["ngram_counts"])]
            for key in ("tokens", "maskable_tokens", "masked_tokens"):
                counters[key] += stats.get(key, 0)
            frames.extend(tfrecord.frame_records(schema.encode_examples(features)))
        counters["ngram_counts"] = ngram_counts
        return frames, counters


_WORKER = None


def _init_worker(settings, inherited_fds=()):
    global _WORKER
    # A forked worker shares the output lock's open file: closing its copy
    # lets the lock go with the main process, even if a kill of the main
    # process leaves the worker finishing its chunk.
    for fd in inherited_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    _WORKER = ChunkProcessor(settings)


def _run_worker(chunk):
    return (chunk.key, *_WORKER(chunk))


def _process_serial(chunks, settings):
    """Yields `(chunk key, frames, counters)` in chunk order, working here."""
    processor = ChunkProcessor(settings)
    for chunk in chunks:
        yield (chunk.key, *processor(chunk))


def _process_parallel(chunks, settings, num_workers, inherited_fds=()):
    """Yields `(chunk key, frames, counters)` in chunk order, at most 2
    chunks per worker in flight."""
    # Workers never use TensorFlow. "fork" starts them at once; it is used
    # only where it is safe: on Linux, and before TensorFlow (with its
    # threads) is loaded in this process. Otherwise "spawn" starts them clean.
    safe_to_fork = (sys.platform.startswith("linux")
                    and "tensorflow" not in sys.modules)
    context = multiprocessing.get_context("fork" if safe_to_fork else "spawn")
    inherited_fds = tuple(inherited_fds) if safe_to_fork else ()
    with context.Pool(num_workers, initializer=_init_worker,
                      initargs=(settings, inherited_fds)) as pool:
        pending = collections.deque()
        for chunk in chunks:
            pending.append(pool.apply_async(_run_worker, (chunk,)))
            if len(pending) >= 2 * num_workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


@dataclasses.dataclass
class Plan:
    """What a run reads, writes and replaces (all checked before writing).

    Attributes:
        inputs: the text files, in corpus order.
        units: the reading units (`reader.plan_units`).
        input_bytes: the inputs' total size.
        model_proto: the SentencePiece model's bytes.
        shard_paths: the final shard paths.
        stats_path: the statistics file.
        earlier: files of an earlier run to remove once this one is done.
        output_name: the output's (first) path: what the lock and the
            temporary folders are named after.
    """

    inputs: list
    units: list
    input_bytes: int
    model_proto: bytes
    shard_paths: list
    stats_path: str
    earlier: list
    output_name: str = ""


def check_arguments(output_file, options, dupe_factor, num_output_shards,
                    chunk_bytes, dynamic_masking=False):
    """Checks the values and the outputs of a run, before any work.

    Raises:
        ValueError: a bad value (names the flag), or an output that cannot
            be written (`safe_io.OutputError`).
    """
    options.validate()
    if dupe_factor < 1:
        raise ValueError("--dupe_factor must be >= 1. Received: %d"
                         % dupe_factor)
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be >= 1. Received: %d" % chunk_bytes)
    masking = options.masking
    if not dynamic_masking and (masking.max_predictions_per_seq < 1
                                or masking.masked_lm_prob <= 0):
        raise ValueError(
            "--max_predictions_per_seq=%d with --masked_lm_prob=%g masks no "
            "token, and static masking needs masked tokens: set both above "
            "0, or pass --dynamic_masking to write unmasked records"
            % (masking.max_predictions_per_seq, masking.masked_lm_prob))
    output_lib.check_outputs(output_file, num_output_shards)


def plan_inputs(input_file, spm_model_file, remote=filesystems.GFILE):
    """Checks the inputs of a run (reads only).

    Returns:
        `(text files, their sizes, the SentencePiece model's bytes)`.

    Raises:
        reader.InputError, vocab.SpecialPiecesError: see
            `create_pretraining_data`.
    """
    inputs = reader.text_files(reader.expand_input_patterns(input_file, remote),
                               remote)
    sizes = reader.file_sizes(inputs, remote)
    try:
        model_proto = reader.read_bytes(spm_model_file, remote)
    except OSError as e:
        raise vocab.SpecialPiecesError(
            "Cannot read SentencePiece model %r: %s" % (spm_model_file, e)) from None
    vocab.check_special_pieces(model_proto)
    return inputs, sizes, model_proto


def plan_run(input_file, output_file, spm_model_file, options, dupe_factor,
             num_output_shards, chunk_bytes, remote=filesystems.GFILE,
             dynamic_masking=False, prepared=None):
    """Validates the arguments and resolves every path of a run.

    Args:
        input_file, output_file, spm_model_file, options, dupe_factor,
            num_output_shards, chunk_bytes, dynamic_masking: see
            `create_pretraining_data`.
        remote: the backend of URLs (`foundation.filesystems`).
        prepared: `plan_inputs`'s result, when already checked.

    Returns:
        A `Plan`.

    Raises:
        ValueError: bad options, or an output that is also an input.
        reader.InputError, vocab.SpecialPiecesError: see
            `create_pretraining_data`.
    """
    check_arguments(output_file, options, dupe_factor, num_output_shards,
                    chunk_bytes, dynamic_masking)
    inputs, sizes, model_proto = prepared or plan_inputs(
        input_file, spm_model_file, remote)
    shard_paths = output_lib.output_paths(output_file, num_output_shards)
    stats = output_lib.stats_path(output_file)
    written = shard_paths + [stats]
    earlier = output_lib.earlier_outputs(output_file, written, remote)
    output_lib.check_not_inputs(
        inputs, written + output_lib.temporary_paths(written) + earlier)
    return Plan(inputs, reader.plan_units(inputs, sizes, chunk_bytes),
                sum(sizes), model_proto, shard_paths, stats, earlier,
                output_lib.output_paths(output_file)[0])


def output_lock(output_file, program="create_pretraining_data"):
    """The lock a run holds on its output
    (`foundation.output_lock.OutputLock` on the output's first path): a
    second run into it fails at once, naming the holder's process id. A
    folder made for it and left empty by a failed run is removed again."""
    return output_lib.LockedOutput(output_lock_lib.OutputLock(
        output_lib.output_paths(output_file)[0], program,
        flag="--output_file", kind="file"))


def run_settings(options, dupe_factor, random_seed, do_lower_case,
                 num_output_shards, chunk_bytes, dynamic_masking,
                 global_shuffle=True):
    """The settings recorded in the statistics file (everything that shapes
    the bytes written)."""
    return dict(dataclasses.asdict(options), dupe_factor=dupe_factor,
                random_seed=random_seed, do_lower_case=do_lower_case,
                num_output_shards=num_output_shards, chunk_bytes=chunk_bytes,
                dynamic_masking=dynamic_masking, global_shuffle=global_shuffle)


def check_shuffle_memory(shuffle_memory_bytes):
    """Refuses a memory budget too small for one bucket.

    Raises:
        ValueError: naming the flag and the value.
    """
    if shuffle_memory_bytes < MIN_SHUFFLE_MEMORY_BYTES:
        raise ValueError(
            "shuffle_memory_mb must be at least %g (MB of records sorted in "
            "memory at a time). Received: %.4g" % (
                MIN_SHUFFLE_MEMORY_BYTES / (1 << 20),
                shuffle_memory_bytes / (1 << 20)))


def no_instances_error(read_counters, one_sentence_documents):
    """The error of a run that built no instance at all."""
    return reader.InputError(
        "No instances could be built from %d input files: every document was "
        "empty or had a single sentence (%d one-sentence documents, %d lines "
        "read)." % (read_counters.files, one_sentence_documents,
                    read_counters.lines))


class _Progress:
    """Reading progress: a bar on a terminal (bytes read, rate, ETA), else a
    log line at times."""

    def __init__(self, totals, read_counters, interval_s, total_bytes):
        self._totals = totals
        self._read = read_counters
        self._interval_s = interval_s
        self._start = self._last_log = time.time()
        self._interactive = progress.interactive()
        self._bar = progress.bar(total=total_bytes, description="read",
                                 unit="B", enabled=self._interactive)
        self._bar_bytes = 0

    def update(self):
        count = self._totals.counts
        self._bar.update(self._read.bytes - self._bar_bytes)
        self._bar_bytes = self._read.bytes
        self._bar.set_postfix_str("%d instances" % count["instances"])
        now = time.time()
        if now - self._last_log >= self._interval_s and not self._interactive:
            self._last_log = now
            logging.info(
                "Progress: %d chunks, %d documents, %.1f MB read, %d "
                "instances (%.0f instances/s).", count["chunks"],
                count["documents"], self._read.bytes / 1e6,
                count["instances"], count["instances"] / (now - self._start))

    def close(self):
        self._bar.close()


def _write_chunk_order(results, shards, totals, progress_):
    """One pass: each chunk's records as they come."""
    for _, frames, counters in results:
        totals.add(counters)
        progress_.update()
        for frame in frames:
            shards.write(frame)
    progress_.close()


def _write_global_order(results, shards, totals, progress_, random_seed,
                        temp_dir, bits, shuffle_memory_bytes, vocab_size):
    """Two passes (see `data_prep.shuffle`): scatter into buckets, then
    write them sorted.

    Returns:
        The mixing measure (`data_prep.mixing`) of the output order.
    """
    scatter = shuffle.BucketScatter(temp_dir, bits)
    for key, frames, counters in results:
        totals.add(counters)
        scatter.add(shuffle.record_keys(random_seed, key, len(frames)), frames)
        progress_.update()
    progress_.close()
    paths = scatter.close()
    logging.info("Sorting %d records (%.1f MB) in %d buckets of at most "
                 "%.0f MB.", totals.counts["instances"], scatter.bytes / 1e6,
                 len(paths), shuffle_memory_bytes / 1e6)
    meter = mixing.MixingMeter(totals.counts["instances"], vocab_size)
    for frame in shuffle.sorted_frames(paths, bits, shuffle_memory_bytes):
        shards.write(frame)
        meter.add_frame(frame)
    return meter.result()


def _log_start(plan, global_shuffle, num_workers):
    """Logs what a run reads and writes, in which order, with how many
    workers."""
    logging.info("Reading %d input files; writing %d shards (%s%s) in %s "
                 "order; %d workers.", len(plan.inputs), len(plan.shard_paths),
                 plan.shard_paths[0],
                 ", ..." if len(plan.shard_paths) > 1 else "",
                 "a global random" if global_shuffle else "chunk",
                 max(1, num_workers))


def _chunk_results(plan, settings, read_counters, num_workers, chunk_bytes,
                   max_line_bytes, inherited_fds=()):
    """The corpus read in chunks and worked here or in `num_workers`
    processes.

    Returns:
        A generator of `(chunk key, frames, counters)` in chunk order;
        closing it stops the worker pool, if any.
    """
    chunks = reader.iter_corpus_chunks(plan.units, read_counters, chunk_bytes,
                                       max_line_bytes)
    return (_process_parallel(chunks, settings, num_workers, inherited_fds)
            if num_workers > 1 else _process_serial(chunks, settings))


def _write_shards(plan, settings, results, totals, progress_, read_counters,
                  global_shuffle, shuffle_memory_bytes, vocab_size, lock):
    """Writes every record to the shards and finishes them under their
    temporary names (`finish_run` commits them); on an error the unfinished
    shards are deleted instead. The worker pool and the shuffle's
    temporary files are cleaned up either way.

    Returns:
        `(shards, mixed)`: the finished `output.ShardSet` and the mixing
        measure (`data_prep.mixing`) of the output order.

    Raises:
        reader.InputError: no instance was built.
        shuffle.BucketError: a temporary file was damaged during the run.
    """
    temp_dir = shuffle.make_temp_dir(plan.output_name, lock)
    shards = output_lib.ShardSet(plan.shard_paths)
    try:
        if global_shuffle:
            bits = shuffle.bucket_bits(
                shuffle.estimated_output_bytes(plan.input_bytes,
                                               settings.dupe_factor),
                shuffle_memory_bytes, shuffle.MAX_SCATTER_BUCKETS)
            mixed = _write_global_order(
                results, shards, totals, progress_, settings.random_seed,
                temp_dir, bits, shuffle_memory_bytes, vocab_size)
        else:
            _write_chunk_order(results, shards, totals, progress_)
        if not shards.written:
            raise no_instances_error(
                read_counters, totals.counts["one_sentence_documents"])
        shards.finish()  # Complete under their temporary names.
        if not global_shuffle:
            mixed = mixing.measure_files(shards.finished_paths,
                                         shards.written, vocab_size)
    except BaseException:
        shards.abort()
        raise
    finally:
        progress_.close()
        results.close()  # Stops the worker pool, if any.
        filesystems.remove_tree(temp_dir)
        lock.forget(temp_dir)
    return shards, mixed


def vocabulary_record(spm_model_file, model_proto):
    """The statistics file's record of the vocabulary the records were
    built with, by path and content (`sha256`): a training run on the
    records copies it into its model folders when the file there still
    has that content (`albert_tf.training.model_files`)."""
    path = (spm_model_file if "://" in spm_model_file
            else os.path.abspath(spm_model_file))
    return {"spm_model_file": path,
            "sha256": hashlib.sha256(model_proto).hexdigest()}


def _run_statistics(plan, settings, chunk_bytes, global_shuffle, totals,
                    read_counters, shards, mixed, start_time):
    """The statistics dict of a written run: the counts, the mixing measure,
    and the run's files, time since `start_time` and settings."""
    stats = statistics_lib.statistics(totals, read_counters, settings.options)
    stats["mixing"] = mixed
    statistics_lib.add_run(
        stats, plan.inputs, plan.shard_paths, shards.counts,
        time.time() - start_time,
        run_settings(settings.options, settings.dupe_factor,
                     settings.random_seed, settings.do_lower_case,
                     len(plan.shard_paths), chunk_bytes,
                     settings.dynamic_masking, global_shuffle))
    return stats


def _finish_run(stats, plan, output_file, read_counters, shards, lock):
    """Commits the shards and the statistics in place of the earlier run's
    files (`output.commit_run`), removes what a killed run's record in the
    lock lists, and logs the summary."""
    try:
        output_lib.commit_run(plan.shard_paths, plan.stats_path,
                              json.dumps(stats, indent=2) + "\n", plan.earlier,
                              output_file)
    except BaseException:
        shards.abort()
        raise
    lock.remove_previous_leftovers()
    statistics_lib.log_summary(stats, read_counters, plan.stats_path)


def create_pretraining_data(
        input_file, output_file, spm_model_file,
        options=instances_lib.InstanceOptions(), dupe_factor=40,
        random_seed=12345, do_lower_case=True, num_workers=1,
        num_output_shards=1, chunk_bytes=1 << 20,
        max_line_bytes=reader.DEFAULT_MAX_LINE_BYTES,
        progress_interval_s=30.0, dynamic_masking=False, global_shuffle=True,
        shuffle_memory_bytes=DEFAULT_SHUFFLE_MEMORY_BYTES):
    """Builds pretraining TFRecords (official schema) and a statistics file.

    Inputs that are not text (TFRecords, JSON, binary) are skipped and
    logged. The shards replace those of an earlier run of the same
    `output_file` only once all are complete (see `data_prep.output`).

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
        chunk_bytes: text per work unit (characters); the shuffle window
            without `global_shuffle`.
        max_line_bytes: longer lines are skipped (and counted).
        progress_interval_s: seconds between progress log lines.
        dynamic_masking: write records without masks (see the module
            docstring).
        global_shuffle: one random order of all records (two passes); False:
            the chunk order (one pass).
        shuffle_memory_bytes: records sorted in memory at a time (one
            bucket); does not change the output.

    Returns:
        The statistics dict (also written to `output.stats_path(output_file)`,
        `<directory>/stats.<name>.json`).

    Raises:
        reader.InputError: missing/unreadable inputs, or no usable text.
        vocab.SpecialPiecesError: the SentencePiece model is unusable.
        ValueError: bad options, or an output that is also an input or
            cannot be written (nothing is written then).
        output_lock_lib.OutputLockedError: another run writes the same output.
        safe_io.OutputError: a write failed (a full disk, a file-size
            limit); the earlier run's files are left whole.
        shuffle.BucketError: a temporary file was damaged during the run.
    """
    check_shuffle_memory(shuffle_memory_bytes)
    output_file = output_lib.resolve_output_file(output_file)
    check_arguments(output_file, options, dupe_factor, num_output_shards,
                    chunk_bytes, dynamic_masking)
    prepared = plan_inputs(input_file, spm_model_file)
    with output_lock(output_file) as locked:
        return _create_locked(
            input_file, output_file, spm_model_file, options, dupe_factor,
            random_seed, do_lower_case, num_workers, num_output_shards,
            chunk_bytes, max_line_bytes, progress_interval_s,
            dynamic_masking, global_shuffle, shuffle_memory_bytes, prepared,
            locked)


def _create_locked(input_file, output_file, spm_model_file, options,
                   dupe_factor, random_seed, do_lower_case, num_workers,
                   num_output_shards, chunk_bytes, max_line_bytes,
                   progress_interval_s, dynamic_masking, global_shuffle,
                   shuffle_memory_bytes, prepared, locked):
    """`create_pretraining_data`'s work, with the output's lock held
    (`locked`: the `output.LockedOutput`; its file descriptors are closed
    in forked workers, its record lists the run's temporary folder)."""
    plan = plan_run(input_file, output_file, spm_model_file, options,
                    dupe_factor, num_output_shards, chunk_bytes,
                    dynamic_masking=dynamic_masking, prepared=prepared)
    settings = ChunkSettings(plan.model_proto, options, dupe_factor,
                             random_seed, do_lower_case, dynamic_masking)
    vocab_size = vocab.load_model(plan.model_proto).get_piece_size()
    _log_start(plan, global_shuffle, num_workers)

    read_counters = reader.ReadCounters()
    results = _chunk_results(plan, settings, read_counters, num_workers,
                             chunk_bytes, max_line_bytes, locked.fds)
    totals = statistics_lib.Totals(options.ngram)
    progress_ = _Progress(totals, read_counters, progress_interval_s,
                          plan.input_bytes)
    start_time = time.time()
    shards, mixed = _write_shards(plan, settings, results, totals, progress_,
                                  read_counters, global_shuffle,
                                  shuffle_memory_bytes, vocab_size,
                                  locked.lock)
    stats = _run_statistics(plan, settings, chunk_bytes, global_shuffle,
                            totals, read_counters, shards, mixed, start_time)
    stats["vocabulary"] = vocabulary_record(spm_model_file, plan.model_proto)
    _finish_run(stats, plan, output_file, read_counters, shards, locked.lock)
    return stats
