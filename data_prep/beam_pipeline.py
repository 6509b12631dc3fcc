"""The pretraining-data builder as an Apache Beam pipeline (`--runner=...`).

The local builder's work (`data_prep.pipeline`) as Beam transforms:
ReadUnit (whole documents in chunks, `reader.iter_chunks`) -> BuildChunk
(preprocess, SentencePiece, pairs, masks, frames: `pipeline.ChunkProcessor`;
each record keyed by its shuffle bucket) -> GroupByKey -> SortBucket (a
bucket's records sorted, one piece file per bucket) -> WriteShard (once per
output shard: its share of every piece, in bucket order) -> Commit
(`output.commit_run`: the shards and the statistics in place, the pieces
removed). In the chunk order (`global_shuffle=False`) BuildChunk writes one
piece per chunk and there is no GroupByKey.

The shards are byte-identical to a local run's with the same input, seed
and flags; every write may run twice, so a retried bundle rewrites the same
bytes; workers never import TensorFlow. The launcher holds the output's lock
and removes a failed run's temporary files. Commands, runners, retries,
memory and the piece files' format: docs/beam.md.
"""

import functools
import json
import os
import time
import urllib.request
import uuid

import apache_beam as beam
import numpy as np
from absl import logging
from apache_beam.options import pipeline_options as beam_options

from data_prep import filesystems
from data_prep import instances as instances_lib
from data_prep import mixing
from data_prep import output as output_lib
from data_prep import pipeline
from data_prep import reader
from data_prep import safe_io
from data_prep import shuffle
from data_prep import statistics as stats_lib
from data_prep import vocab

_REMOTE = filesystems.BEAM
_READ_COUNTERS = "read_counters"
_COPY_BYTES = 1 << 20
_SIZE_BYTES = 8  # One uint64 group size in a piece's header.
_KEYED = "keyed"
# Buckets of the global shuffle, at most (a GroupByKey's keys).
_MAX_BUCKETS = 1 << 20


def pipeline_options(runner, pipeline_args=()):
    """Beam `PipelineOptions` for `--runner` and the other arguments.

    Args:
        runner: a Beam runner name (`DirectRunner`, `PrismRunner`,
            `DataflowRunner`, `FlinkRunner`, `SparkRunner`, ...) or class path.
        pipeline_args: the command line's other arguments (Beam options).

    Returns:
        A `PipelineOptions`.

    Raises:
        ValueError: an argument that is no Beam option (a mistyped flag), an
            unknown runner, or a PrismRunner that cannot get its binary.
    """
    options = beam_options.PipelineOptions(["--runner=%s" % runner,
                                            *pipeline_args])
    known = options.get_all_options()
    unknown = sorted(set(options.get_all_options(retain_unknown_options=True))
                     - set(known))
    if unknown:
        raise ValueError(
            "Unknown flags: %s (neither flags of this program nor Beam "
            "pipeline options)" % ", ".join("--" + name for name in unknown))
    names = beam_options.StandardOptions.KNOWN_RUNNER_NAMES
    if "." not in runner and runner.lower() not in {n.lower() for n in names}:
        raise ValueError("Unknown Beam runner %r; known runners: %s. Received: "
                         "--runner=%s" % (runner, ", ".join(names), runner))
    if runner.lower() == "prismrunner":
        _check_prism_reachable(options)
    return options


def _check_prism_reachable(options):
    """Fails at once where the PrismRunner would try to download its binary
    and cannot (offline), instead of failing or hanging later."""
    from apache_beam.runners.portability import prism_runner

    if options.view_as(beam_options.PrismRunnerOptions).prism_location:
        return  # The user's binary: Beam reports its problems.
    server = prism_runner.PrismJobServer(options)
    url = server.path_to_binary()
    cached = os.path.join(server.BIN_CACHE, os.path.basename(url))
    if os.path.exists(cached) or not url.startswith("http"):
        return
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                               timeout=10).close()
    except Exception as e:  # URLError, a timeout, an HTTP error.
        raise ValueError(
            "--runner=PrismRunner needs the Prism binary, which Beam downloads "
            "on first use from %s, and that cannot be reached (%s). Offline, "
            "copy it here and pass --prism_location=PATH (the .zip or the "
            "binary), or use --runner=DirectRunner." % (url, e)) from None


def _piece_path(temp_dir, key):
    """The piece of a chunk `(unit, index)`, or of a bucket `(bucket,)`."""
    if len(key) == 1:
        return "%s/bucket-%08d" % (temp_dir, key[0])
    return "%s/piece-%06d-%06d" % (temp_dir, key[0], key[1])


def _attempt_path(path):
    """A name of this attempt's own: two attempts of one bundle (a retry
    beside a straggler) never write into the same file."""
    return "%s.attempt-%s" % (path, uuid.uuid4().hex[:12])


def write_piece(path, frames, num_shards):
    """Writes a chunk's framed records as a piece file (see the module
    docstring), through a temporary name: a rerun replaces it whole."""
    groups = [frames[r::num_shards] for r in range(num_shards)]
    sizes = np.array([sum(len(f) for f in group) for group in groups], "<u8")
    temp_path = _attempt_path(path)
    with filesystems.create(temp_path, _REMOTE) as f:
        f.write(sizes.tobytes())
        for group in groups:
            for frame in group:
                f.write(frame)
    filesystems.rename(temp_path, path, _REMOTE)


def _copy_group(piece_path, group, num_shards, out):
    """Copies group `group` of a piece file to the stream `out`."""
    with filesystems.open_read(piece_path, _REMOTE) as piece:
        sizes = np.frombuffer(piece.read(num_shards * _SIZE_BYTES), "<u8")
        piece.seek(num_shards * _SIZE_BYTES + int(sizes[:group].sum()))
        left = int(sizes[group])
        while left:
            data = piece.read(min(left, _COPY_BYTES))
            if not data:
                raise OSError("Piece file %s is truncated." % piece_path)
            out.write(data)
            left -= len(data)


def write_shard(shard, shard_path, temp_dir, chunk_counts, num_shards):
    """Writes one shard from the pieces, under its temporary name.

    Args:
        shard: the shard's index.
        shard_path: its final path (written in `temp_dir`, then renamed to
            its hidden temporary name, `safe_io.temporary_path`).
        temp_dir: the pieces' directory.
        chunk_counts: `(piece key, record count)` of every piece (chunk or
            bucket), any order.
        num_shards: the number of shards.

    Returns:
        The number of records written.
    """
    position = written = 0
    attempt = _attempt_path("%s/shard-%05d" % (temp_dir, shard))
    with filesystems.create(attempt, _REMOTE) as out:
        for key, count in sorted(dict(chunk_counts).items()):
            # This chunk's record j sits at output position `position + j`.
            group = (shard - position) % num_shards
            position += count
            if group < count:
                _copy_group(_piece_path(temp_dir, key), group, num_shards, out)
                written += -(-(count - group) // num_shards)
    filesystems.rename(attempt, safe_io.temporary_path(shard_path), _REMOTE)
    return written


class _ReadUnit(beam.DoFn):
    """A reading unit -> its chunks, and its read counters (side output)."""

    def __init__(self, chunk_bytes, max_line_bytes):
        self._chunk_bytes = chunk_bytes
        self._max_line_bytes = max_line_bytes

    def process(self, element):
        unit, paths = element
        counters = reader.ReadCounters()
        yield from reader.iter_chunks(paths, counters, self._chunk_bytes,
                                      self._max_line_bytes, unit, _REMOTE)
        yield beam.pvalue.TaggedOutput(_READ_COUNTERS, counters)


class _BuildChunk(beam.DoFn):
    """A chunk -> its records; emits `(key, record count, counters)`.

    Global shuffle (`bits` set): the records go, keyed, to the `keyed`
    output as `(bucket, [(shuffle key, frame), ...])`, one element per
    bucket the chunk reaches. Chunk order (`bits` None): to the chunk's
    piece file.
    """

    def __init__(self, settings, temp_dir, num_shards, bits=None):
        self._settings = settings
        self._temp_dir = temp_dir
        self._num_shards = num_shards
        self._bits = bits
        self._processor = None

    def setup(self):
        self._processor = pipeline.ChunkProcessor(self._settings)

    def process(self, chunk):
        frames, counters = self._processor(chunk)
        if self._bits is None:
            write_piece(_piece_path(self._temp_dir, chunk.key), frames,
                        self._num_shards)
        else:
            keys = shuffle.record_keys(self._settings.random_seed, chunk.key,
                                       len(frames))
            groups = {}
            for bucket, key, frame in zip(
                    shuffle.bucket_of(keys, self._bits).tolist(),
                    keys.tolist(), frames):
                groups.setdefault(bucket, []).append((key, frame))
            for bucket, records in groups.items():
                yield beam.pvalue.TaggedOutput(_KEYED, (bucket, records))
        yield chunk.key, len(frames), counters


class _SortBucket(beam.DoFn):
    """`(bucket, record lists)` -> the bucket's piece, sorted by
    `(key, bytes)` as the local builder sorts; emits `((bucket,), count)`."""

    def __init__(self, temp_dir, num_shards):
        self._temp_dir = temp_dir
        self._num_shards = num_shards

    def process(self, element):
        bucket, lists = element
        records = sorted(record for records in lists for record in records)
        write_piece(_piece_path(self._temp_dir, (bucket,)),
                    [frame for _, frame in records], self._num_shards)
        yield (bucket,), len(records)


class _WriteShard(beam.DoFn):
    """`(shard, path)` -> the shard, written; emits `(shard, count)`."""

    def __init__(self, temp_dir, num_shards):
        self._temp_dir = temp_dir
        self._num_shards = num_shards

    def process(self, element, chunk_counts):
        shard, path = element
        yield shard, write_shard(shard, path, self._temp_dir, chunk_counts,
                                 self._num_shards)


class SumFn(beam.CombineFn):
    """Sums inputs into an accumulator that can `merge` another (a
    `statistics.Totals` of chunk counters, a `reader.ReadCounters`).

    Args:
        make: makes an empty accumulator (picklable).
        add: the accumulator's method that adds one input, by name.
    """

    def __init__(self, make, add="merge"):
        self._make = make
        self._add = add

    def create_accumulator(self):
        return self._make()

    def add_input(self, accumulator, value):
        getattr(accumulator, self._add)(value)
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        total = next(accumulators)
        for other in accumulators:
            total.merge(other)
        return total

    def extract_output(self, accumulator):
        return accumulator


class _Commit(beam.DoFn):
    """Renames the shards, writes the statistics, removes what is replaced."""

    def __init__(self, plan, output_file, temp_dir, instance_options,
                 settings, start_time, vocab_size):
        self._plan = plan
        self._vocab_size = vocab_size
        self._output_file = output_file
        self._temp_dir = temp_dir
        self._options = instance_options
        self._settings = settings
        self._start_time = start_time

    def process(self, unused_element, shard_counts, totals, read_counters):
        plan = self._plan
        records_per_shard = [count for _, count in sorted(shard_counts)]
        if not sum(records_per_shard):
            raise pipeline.no_instances_error(
                read_counters, totals.counts["one_sentence_documents"])
        stats = stats_lib.statistics(totals, read_counters, self._options)
        # A retried commit finds some shards already renamed into place.
        stats["mixing"] = mixing.measure_files(
            [output_lib.finished_path(p, _REMOTE) for p in plan.shard_paths],
            sum(records_per_shard), self._vocab_size, _REMOTE)
        stats_lib.add_run(stats, plan.inputs, plan.shard_paths,
                          records_per_shard, time.time() - self._start_time,
                          self._settings)
        output_lib.commit_run(plan.shard_paths, plan.stats_path,
                              json.dumps(stats, indent=2) + "\n", plan.earlier,
                              self._output_file, _REMOTE)
        filesystems.remove_tree(self._temp_dir, _REMOTE)
        yield stats["instances"]


_TEMP_INFIX = ".beam-temp-"


def build_pipeline(root, plan, settings, output_file, chunk_bytes,
                   max_line_bytes, temp_dir, run_settings, start_time,
                   bits=None, vocab_size=None):
    """Adds the builder's transforms to the pipeline `root` (see the module
    docstring); `bits`: the global shuffle's bucket bits, None for the chunk
    order."""
    num_shards = len(plan.shard_paths)
    options = settings.options
    read = (root
            | "Units" >> beam.Create(list(enumerate(plan.units)))
            | "SpreadUnits" >> beam.Reshuffle()
            | "ReadUnit" >> beam.ParDo(
                _ReadUnit(chunk_bytes, max_line_bytes)).with_outputs(
                    _READ_COUNTERS, main="chunks"))
    built = (read.chunks
             | "SpreadChunks" >> beam.Reshuffle()
             | "BuildChunk" >> beam.ParDo(
                 _BuildChunk(settings, temp_dir, num_shards, bits)).with_outputs(
                     _KEYED, main="chunks"))
    if bits is None:
        piece_counts = built.chunks | "ChunkCounts" >> beam.MapTuple(
            lambda key, count, unused_counters: (key, count))
    else:
        piece_counts = (built[_KEYED]
                        | "Buckets" >> beam.GroupByKey()
                        | "SortBucket" >> beam.ParDo(
                            _SortBucket(temp_dir, num_shards)))
    totals = (built.chunks
              | "ChunkCounters" >> beam.MapTuple(
                  lambda unused_key, unused_count, counters: counters)
              | "Totals" >> beam.CombineGlobally(SumFn(
                  functools.partial(stats_lib.Totals, options.ngram), "add")))
    read_counters = (read[_READ_COUNTERS]
                     | "ReadTotals" >> beam.CombineGlobally(
                         SumFn(reader.ReadCounters)))
    shard_counts = (
        root
        | "Shards" >> beam.Create(list(enumerate(plan.shard_paths)))
        | "SpreadShards" >> beam.Reshuffle()
        | "WriteShard" >> beam.ParDo(_WriteShard(temp_dir, num_shards),
                                     beam.pvalue.AsList(piece_counts)))
    return (root
            | "Start" >> beam.Create([None])
            | "Commit" >> beam.ParDo(
                _Commit(plan, output_file, temp_dir, options, run_settings,
                        start_time, vocab_size),
                shard_counts=beam.pvalue.AsList(shard_counts),
                totals=beam.pvalue.AsSingleton(totals),
                read_counters=beam.pvalue.AsSingleton(read_counters)))


def _clean_up(plan, temp_dir):
    """Removes a failed run's temporary files (best effort)."""
    temporaries = output_lib.temporary_paths(
        plan.shard_paths + [plan.stats_path])
    for path in [temp_dir] + temporaries:
        try:
            if path == temp_dir:
                filesystems.remove_tree(path, _REMOTE)
            elif filesystems.exists(path, _REMOTE):
                filesystems.remove(path, _REMOTE)
        except Exception as e:  # Cleanup must not hide the original error.
            logging.warning("Could not remove %s: %s", path, e)


def as_one_line(error):
    """The error a runner raised, as the local builder says it: the
    runner may wrap a transform's error and add where it ran."""
    message = str(error).split(" [while running")[0]
    if isinstance(error, reader.InputError) or "No instances could be" in message:
        return reader.InputError(message)
    if isinstance(error, safe_io.OutputError):
        return safe_io.OutputError(message)
    if isinstance(error, OSError) and error.errno:  # A full disk, ...
        return safe_io.OutputError(safe_io.describe_os_error(
            error, error.filename or "a temporary file"))
    return error


def create_pretraining_data(
        input_file, output_file, spm_model_file, runner="DirectRunner",
        pipeline_args=(), options=instances_lib.InstanceOptions(),
        dupe_factor=40, random_seed=12345, do_lower_case=True,
        num_output_shards=1, chunk_bytes=1 << 20,
        max_line_bytes=reader.DEFAULT_MAX_LINE_BYTES, dynamic_masking=False,
        global_shuffle=True,
        shuffle_memory_bytes=pipeline.DEFAULT_SHUFFLE_MEMORY_BYTES):
    """Builds the local builder's TFRecords and statistics on a Beam runner.

    The arguments not listed are those of
    `pipeline.create_pretraining_data`, with the same meaning and the same
    output bytes.

    Args:
        runner: the Beam runner (see `pipeline_options`).
        pipeline_args: other Beam pipeline options, as command-line strings
            (`["--project=p", "--temp_location=gs://b/tmp"]`).

    Returns:
        The statistics dict (also written beside the shards).

    Raises:
        reader.InputError: missing/unreadable inputs, or no usable text.
        vocab.SpecialPiecesError: the SentencePiece model is unusable.
        ValueError: bad options or Beam arguments, or an output that is also
            an input (nothing is written then).
    """
    start_time = time.time()
    pipeline.check_shuffle_memory(shuffle_memory_bytes)
    beam_pipeline_options = pipeline_options(runner, pipeline_args)
    output_file = output_lib.resolve_output_file(output_file)
    pipeline.check_arguments(output_file, options, dupe_factor,
                             num_output_shards, chunk_bytes, dynamic_masking)
    prepared = pipeline.plan_inputs(input_file, spm_model_file, _REMOTE)
    with pipeline.output_lock(output_file) as locked:
        return _create_locked(
            input_file, output_file, spm_model_file, runner,
            beam_pipeline_options, options, dupe_factor, random_seed,
            do_lower_case, num_output_shards, chunk_bytes, max_line_bytes,
            dynamic_masking, global_shuffle, shuffle_memory_bytes, start_time,
            prepared, locked.lock)


def _create_locked(input_file, output_file, spm_model_file, runner,
                   beam_pipeline_options, options, dupe_factor, random_seed,
                   do_lower_case, num_output_shards, chunk_bytes,
                   max_line_bytes, dynamic_masking, global_shuffle,
                   shuffle_memory_bytes, start_time, prepared, lock):
    """`create_pretraining_data`'s work, with the output's lock held (its
    record lists the run's temporary folder)."""
    plan = pipeline.plan_run(input_file, output_file, spm_model_file, options,
                             dupe_factor, num_output_shards, chunk_bytes,
                             _REMOTE, dynamic_masking, prepared)
    settings = pipeline.ChunkSettings(plan.model_proto, options, dupe_factor,
                                      random_seed, do_lower_case,
                                      dynamic_masking)
    run_settings = pipeline.run_settings(
        options, dupe_factor, random_seed, do_lower_case,
        len(plan.shard_paths), chunk_bytes, dynamic_masking, global_shuffle)
    vocab_size = vocab.load_model(plan.model_proto).get_piece_size()
    bits = None
    if global_shuffle:
        bits = shuffle.bucket_bits(
            shuffle.estimated_output_bytes(plan.input_bytes, dupe_factor),
            shuffle_memory_bytes, _MAX_BUCKETS)
    temp_dir = shuffle.make_temp_dir(plan.output_name, lock, _TEMP_INFIX)
    logging.info("Beam pipeline on %s: %d input files in %d reading units; "
                 "writing %d shards (%s%s); pieces in %s.", runner,
                 len(plan.inputs), len(plan.units), len(plan.shard_paths),
                 plan.shard_paths[0],
                 ", ..." if len(plan.shard_paths) > 1 else "", temp_dir)
    try:
        with beam.Pipeline(options=beam_pipeline_options) as root:
            build_pipeline(root, plan, settings, output_file, chunk_bytes,
                           max_line_bytes, temp_dir, run_settings, start_time,
                           bits, vocab_size)
    except BaseException as e:
        _clean_up(plan, temp_dir)
        lock.forget(temp_dir)
        raise as_one_line(e) from None
    lock.forget(temp_dir)  # Removed by the commit.
    lock.remove_previous_leftovers()
    stats = json.loads(reader.read_bytes(plan.stats_path, _REMOTE))
    stats_lib.log_summary(stats, reader.ReadCounters(**stats["read"]),
                          plan.stats_path)
    return stats
