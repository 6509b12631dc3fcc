"""The pretraining-data builder as an Apache Beam pipeline (`--runner=...`).

The local builder's work (`data_prep.pipeline`) as Beam transforms:
ReadSlot (whole documents in chunks, `reader.iter_chunks`; a unit may be
read by several tasks, each keeping its share of the chunks:
`reading_slots`) -> BuildChunk (preprocess, SentencePiece, pairs, masks,
frames: `pipeline.ChunkProcessor`; each record keyed by its shuffle bucket)
-> GroupByKey -> SortBucket (a bucket's records sorted, one piece file per
bucket) -> WriteCounts (the pieces' record counts, once all are written) ->
WriteShard (once per output shard, joined with the shards' paths: its share
of every piece, in bucket order) -> Measure (the statistics, from the
counters and the shards). The launcher then commits (`output.commit_run`:
the shards and the statistics in place, the pieces removed). In the chunk
order (`global_shuffle=False`) BuildChunk writes one piece per chunk and
there is no GroupByKey.

Every step has one output and main inputs only, so that every runner
executes the pipeline alike (see `build_pipeline`); the steps count what
they do (`dask_runner.count`).

The shards are byte-identical to a local run's with the same input, seed
and flags; every write may run twice, so a retried bundle rewrites the same
bytes; workers never import TensorFlow and never change what the user sees.
The launcher holds the output's lock, commits, and removes a failed run's
temporary files. Commands, runners, retries,
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

from data_prep import dask_runner
from data_prep import instances as instances_lib
from data_prep import mixing
from data_prep import output as output_lib
from data_prep import pipeline
from data_prep import reader
from data_prep import shuffle
from data_prep import statistics as statistics_lib
from data_prep import tfrecord
from data_prep import vocab
from foundation import filesystems
from foundation import safe_io

_REMOTE = filesystems.BEAM
_COPY_BYTES = 1 << 20
_SIZE_BYTES = 8  # One uint64 group size in a piece's header.
# Buckets of the global shuffle, at most (a GroupByKey's keys).
_MAX_BUCKETS = 1 << 20
# Reading tasks aimed at (`reading_slots`): per worker thread of a Dask
# cluster, and in all where the runner's workers are not known in advance.
_TASKS_PER_THREAD = 4
_SPREAD = 32
# The kinds of the elements that travel together (`_ReadSlot`, ...).
_CHUNK, _READ, _BUILT = "chunk", "read", "built"
_BUCKET, _SHARD = "bucket", "shard"


def pipeline_options(runner, pipeline_args=()):
    """Beam `PipelineOptions` for `--runner` and the other arguments.

    Args:
        runner: a Beam runner name (`DirectRunner`, `PrismRunner`,
            `DaskRunner`, `DataflowRunner`, `FlinkRunner`, `SparkRunner`,
            ...) or class path.
        pipeline_args: the command line's other arguments (Beam options).

    Returns:
        A `PipelineOptions`.

    Raises:
        ValueError: an argument that is no Beam option (a mistyped flag), an
            unknown runner, or a PrismRunner that cannot get its binary.
    """
    dask_runner.register_options(runner)
    options = beam_options.PipelineOptions(
        ["--runner=%s" % dask_runner.runner_name(runner), *pipeline_args])
    known = options.get_all_options()
    unknown = sorted(set(options.get_all_options(retain_unknown_options=True))
                     - set(known))
    if unknown:
        raise ValueError(
            "Unknown flags: %s (neither flags of this program nor Beam "
            "pipeline options)" % ", ".join("--" + name for name in unknown))
    names = beam_options.StandardOptions.KNOWN_RUNNER_NAMES + ["DaskRunner"]
    if "." not in runner and runner.lower() not in {n.lower() for n in names}:
        raise ValueError("Unknown Beam runner %r; known runners: %s. Received: "
                         "--runner=%s" % (runner, ", ".join(names), runner))
    if runner.lower() == "prismrunner":
        _check_prism_reachable(options)
    if dask_runner.is_dask(runner):
        dask_runner.set_partitioning(options)
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


def reading_slots(units, sizes, chunk_bytes, spread=_SPREAD):
    """The reading tasks: `(unit, paths, slot, slots)`.

    A unit is read sequentially (its chunk boundaries depend on all of its
    text before them). When there are fewer units than `spread`, each unit
    is read by `slots` tasks at once (at most its estimated chunk count),
    task `slot` building the chunks whose index is `slot` modulo `slots`:
    the building, the costly part, spreads over `spread` tasks even for one
    large file, at the price of reading the unit `slots` times.

    Args:
        units: the reading units (lists of paths).
        sizes: `{path: size in bytes}`.
        chunk_bytes: the chunk size.
        spread: the number of tasks aimed at.
    """
    per_unit = -(-spread // max(1, len(units)))
    slots = []
    for unit, paths in enumerate(units):
        estimated = -(-sum(sizes[p] for p in paths) // chunk_bytes)
        count = max(1, min(per_unit, estimated))
        slots.extend((unit, paths, slot, count) for slot in range(count))
    return slots


class _ReadSlot(beam.DoFn):
    """A reading task -> `("chunk", chunk)` for its chunks and, from the
    unit's first task, `("read", counters)`: one output, since runners
    differ in how they hand a ParDo's tagged outputs to consumers."""

    def __init__(self, chunk_bytes, max_line_bytes, topic):
        self._chunk_bytes = chunk_bytes
        self._max_line_bytes = max_line_bytes
        self._topic = topic

    def process(self, element):
        unit, paths, slot, slots = element
        dask_runner.count(self._topic, "unit_reads")
        counters = reader.ReadCounters()
        for chunk in reader.iter_chunks(paths, counters, self._chunk_bytes,
                                        self._max_line_bytes, unit, _REMOTE):
            if chunk.index % slots == slot:
                yield _CHUNK, chunk
        if slot == 0:
            yield _READ, counters


def _spill_path(temp_dir, key):
    """The file of a chunk's records, grouped by bucket (`write_spill`)."""
    return "%s/spill-%06d-%06d" % (temp_dir, key[0], key[1])


def write_spill(path, buckets, frames):
    """Writes a chunk's records grouped by bucket, each group in chunk
    order: a little-endian uint64 group count, `(bucket, byte size)` uint64
    pairs, then the groups in bucket order. Through a temporary name.

    Returns:
        The buckets reached, ascending.
    """
    order = np.argsort(buckets, kind="stable")
    reached, starts = np.unique(buckets[order], return_index=True)
    sizes = np.array([len(f) for f in frames], "<u8")[order]
    group_sizes = np.add.reduceat(sizes, starts) if len(order) else sizes
    header = np.empty((len(reached), 2), "<u8")
    header[:, 0], header[:, 1] = reached, group_sizes
    temp_path = _attempt_path(path)
    with filesystems.create(temp_path, _REMOTE) as f:
        f.write(np.array([len(reached)], "<u8").tobytes())
        f.write(header.tobytes())
        for index in order.tolist():
            f.write(frames[index])
    filesystems.rename(temp_path, path, _REMOTE)
    return reached.tolist()


def read_spill(path, bucket):
    """The framed records of `bucket` in a chunk's spill file, in order."""
    with filesystems.open_read(path, _REMOTE) as f:
        count = int(np.frombuffer(f.read(_SIZE_BYTES), "<u8")[0])
        header = np.frombuffer(f.read(count * 2 * _SIZE_BYTES),
                               "<u8").reshape(count, 2)
        index = int(np.searchsorted(header[:, 0], bucket))
        if index == count or header[index, 0] != bucket:
            raise OSError("Spill file %s holds no bucket %d." % (path, bucket))
        f.seek(_SIZE_BYTES * (1 + 2 * count) + int(header[:index, 1].sum()))
        data = f.read(int(header[index, 1]))
    if len(data) != int(header[index, 1]):
        raise OSError("Spill file %s is truncated." % path)
    frames, position = [], 0
    while position < len(data):
        length = int.from_bytes(data[position:position + 8], "little")
        frames.append(data[position:position + length + 16])
        position += length + 16
    return frames


class _BuildChunk(beam.DoFn):
    """`("chunk", chunk)` -> its records; `("read", counters)` passes.

    Emits `("built", key, record count, counters)` per chunk. Global
    shuffle (`bits` set): also one `("bucket", bucket, value)` per bucket
    the chunk reaches, where `value` is the chunk's records of that bucket,
    `[(shuffle key, frame), ...]` (through the engine's shuffle), or with
    `spill` the chunk's `(key, record count)`, its records written to its
    spill file (`write_spill`). Chunk order (`bits` None): the records go
    to the chunk's piece file.
    """

    def __init__(self, settings, temp_dir, num_shards, topic, bits=None,
                 spill=False):
        self._settings = settings
        self._temp_dir = temp_dir
        self._num_shards = num_shards
        self._topic = topic
        self._bits = bits
        self._spill = spill
        self._processor = None

    def setup(self):
        self._processor = pipeline.ChunkProcessor(self._settings)

    def process(self, element):
        kind, chunk = element
        if kind != _CHUNK:
            yield element
            return
        frames, counters = self._processor(chunk)
        dask_runner.count(self._topic, "chunks_built")
        if self._bits is None:
            write_piece(_piece_path(self._temp_dir, chunk.key), frames,
                        self._num_shards)
        elif self._spill:
            keys = shuffle.record_keys(self._settings.random_seed, chunk.key,
                                       len(frames))
            for bucket in write_spill(
                    _spill_path(self._temp_dir, chunk.key),
                    shuffle.bucket_of(keys, self._bits), frames):
                yield _BUCKET, bucket, (chunk.key, len(frames))
        else:
            keys = shuffle.record_keys(self._settings.random_seed, chunk.key,
                                       len(frames))
            groups = {}
            for bucket, key, frame in zip(
                    shuffle.bucket_of(keys, self._bits).tolist(),
                    keys.tolist(), frames):
                groups.setdefault(bucket, []).append((key, frame))
            for bucket, records in groups.items():
                yield _BUCKET, bucket, records
        yield _BUILT, chunk.key, len(frames), counters


class _SortBucket(beam.DoFn):
    """`(bucket, values)` -> the bucket's piece, sorted by `(key, bytes)` as
    the local builder sorts; emits `((bucket,), count)`. With `spill` (the
    random seed) each value names a chunk whose spill file holds records of
    the bucket; their keys are computed again from the seed."""

    def __init__(self, temp_dir, num_shards, topic, bits=None, spill=None):
        self._temp_dir = temp_dir
        self._num_shards = num_shards
        self._topic = topic
        self._bits = bits
        self._seed = spill

    def _spilled(self, bucket, chunks):
        for key, count in chunks:
            keys = shuffle.record_keys(self._seed, key, count)
            mine = keys[shuffle.bucket_of(keys, self._bits) == bucket]
            frames = read_spill(_spill_path(self._temp_dir, key), bucket)
            if len(frames) != len(mine):
                raise OSError("Spill file %s holds %d records of bucket %d, "
                              "not %d." % (_spill_path(self._temp_dir, key),
                                           len(frames), bucket, len(mine)))
            yield from zip(mine.tolist(), frames)

    def process(self, element):
        bucket, values = element
        if self._seed is None:
            records = sorted(record for records in values
                             for record in records)
        else:
            records = sorted(self._spilled(bucket, sorted(values)))
        write_piece(_piece_path(self._temp_dir, (bucket,)),
                    [frame for _, frame in records], self._num_shards)
        dask_runner.count(self._topic, "buckets_sorted")
        yield (bucket,), len(records)


class _WriteCounts(beam.DoFn):
    """`(None, piece counts)` -> the counts file; emits `(shard, True)` for
    every shard, once the pieces are all written."""

    def __init__(self, temp_dir, num_shards):
        self._temp_dir = temp_dir
        self._num_shards = num_shards

    def process(self, element):
        _, counts = element
        tfrecord.write_text_atomically(
            _counts_path(self._temp_dir),
            json.dumps(sorted([list(key), count] for key, count in counts)),
            _REMOTE)
        for shard in range(self._num_shards):
            yield shard, True


def _counts_path(temp_dir):
    return temp_dir + "/piece-counts.json"


class _WriteShard(beam.DoFn):
    """`(shard, {"path": [path], "ready": [True]})` -> the shard, written;
    emits `("shard", shard, count)`. A shard without pieces (no records at
    all) is left to the commit's error."""

    def __init__(self, temp_dir, num_shards, topic):
        self._temp_dir = temp_dir
        self._num_shards = num_shards
        self._topic = topic

    def process(self, element):
        shard, joined = element
        if not joined["ready"]:
            return
        counts = json.loads(reader.read_bytes(_counts_path(self._temp_dir),
                                              _REMOTE))
        written = write_shard(shard, joined["path"][0], self._temp_dir,
                              [(tuple(key), n) for key, n in counts],
                              self._num_shards)
        dask_runner.count(self._topic, "shards_written")
        yield _SHARD, shard, written


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


class _Measure(beam.DoFn):
    """`(None, results)` (the totals, the read counters, each shard's
    count) -> the statistics, written to the temporary folder (the shards
    read under their hidden temporary names); emits the instance count.
    The launcher commits: a cluster never changes what the user sees."""

    def __init__(self, plan, temp_dir, instance_options, settings,
                 start_time, vocab_size, topic, vocabulary):
        self._plan = plan
        self._vocab_size = vocab_size
        self._temp_dir = temp_dir
        self._options = instance_options
        self._settings = settings
        self._start_time = start_time
        self._topic = topic
        self._vocabulary = vocabulary

    def process(self, element):
        plan = self._plan
        results = {"totals": statistics_lib.Totals(self._options.ngram),
                   _READ: reader.ReadCounters()}
        shard_counts = []
        for result in element[1]:
            if result[0] == _SHARD:
                shard_counts.append(result[1:])
            else:
                results[result[0]] = result[1]
        totals, read_counters = results["totals"], results[_READ]
        records_per_shard = [count for _, count in sorted(shard_counts)]
        if len(records_per_shard) != len(plan.shard_paths) or not sum(
                records_per_shard):
            raise pipeline.no_instances_error(
                read_counters, totals.counts["one_sentence_documents"])
        stats = statistics_lib.statistics(totals, read_counters, self._options)
        # The shards under their temporary names (`output.finished_path`).
        stats["mixing"] = mixing.measure_files(
            [output_lib.finished_path(p, _REMOTE) for p in plan.shard_paths],
            sum(records_per_shard), self._vocab_size, _REMOTE)
        statistics_lib.add_run(stats, plan.inputs, plan.shard_paths,
                               records_per_shard, time.time() - self._start_time,
                               self._settings)
        stats["vocabulary"] = self._vocabulary
        tfrecord.write_text_atomically(_stats_path(self._temp_dir),
                                       json.dumps(stats, indent=2) + "\n",
                                       _REMOTE)
        dask_runner.count(self._topic, "measures")
        yield stats["instances"]


def _stats_path(temp_dir):
    return temp_dir + "/stats.json"


def _commit(plan, output_file, temp_dir):
    """The shards renamed into place, the statistics written, what is
    replaced removed (`output.commit_run`), then the pieces."""
    stats_text = reader.read_bytes(_stats_path(temp_dir), _REMOTE).decode()
    output_lib.commit_run(plan.shard_paths, plan.stats_path, stats_text,
                          plan.earlier, output_file, _REMOTE)
    filesystems.remove_tree(temp_dir, _REMOTE)


_TEMP_INFIX = ".beam-temp-"


def _of_kind(kind, *fields):
    """A FlatMap function keeping the elements `(kind, ...)`, as their
    `fields` (indices; one field: the bare value)."""
    def select(element):
        if element[0] != kind:
            return []
        values = tuple(element[i] for i in fields)
        return [values[0] if len(values) == 1 else values]
    return select


def build_pipeline(root, plan, settings, chunk_bytes,
                   max_line_bytes, temp_dir, run_settings, start_time,
                   bits=None, vocab_size=None, topic="data_prep",
                   spread=_SPREAD, vocabulary=None):
    """Adds the builder's transforms to the pipeline `root` (see the module
    docstring); `bits`: the global shuffle's bucket bits, None for the chunk
    order; `topic`: the run's counter topic (`dask_runner.count`);
    `spread`: the reading tasks aimed at (`reading_slots`); `vocabulary`:
    the statistics' record of it (`pipeline.vocabulary_record`).

    Every step has main inputs only, and one output: runners differ in how
    they compute side inputs (the DaskRunner recomputes their whole graph)
    and hand tagged outputs to consumers (it hands all of them to each).
    """
    num_shards = len(plan.shard_paths)
    options = settings.options
    # On a file system (local, or mounted by every worker) the records go
    # through spill files and only their names through the GroupByKey:
    # runners that hold a GroupByKey's data in memory (Dask, the
    # DirectRunner) then hold one chunk or one bucket per task. An object
    # store (a URL) takes the engine's own shuffle instead of the many small
    # reads of spill files.
    spill = not filesystems.is_remote(temp_dir)
    sizes = dict(zip(plan.inputs, reader.file_sizes(plan.inputs, _REMOTE)))
    built = (root
             | "Slots" >> beam.Create(reading_slots(plan.units, sizes,
                                                    chunk_bytes, spread))
             | "SpreadSlots" >> beam.Reshuffle()
             | "ReadSlot" >> beam.ParDo(
                 _ReadSlot(chunk_bytes, max_line_bytes, topic))
             | "SpreadChunks" >> beam.Reshuffle()
             | "BuildChunk" >> beam.ParDo(
                 _BuildChunk(settings, temp_dir, num_shards, topic, bits,
                             spill)))
    if bits is None:
        piece_counts = built | "ChunkCounts" >> beam.FlatMap(
            _of_kind(_BUILT, 1, 2))
    else:
        piece_counts = (built
                        | "BucketRecords" >> beam.FlatMap(
                            _of_kind(_BUCKET, 1, 2))
                        | "Buckets" >> beam.GroupByKey()
                        | "SortBucket" >> beam.ParDo(
                            _SortBucket(temp_dir, num_shards, topic, bits,
                                        settings.random_seed if spill
                                        else None)))
    ready = (piece_counts
             | "KeyPieces" >> beam.Map(lambda count: (None, count))
             | "AllPieces" >> beam.GroupByKey()
             | "WriteCounts" >> beam.ParDo(_WriteCounts(temp_dir, num_shards)))
    # A join with one element per shard: each shard's task may run on any
    # worker (the shards' paths are spread as a Create's elements are).
    shards = root | "Shards" >> beam.Create(
        [(shard, path) for shard, path in enumerate(plan.shard_paths)])
    shard_counts = ({"path": shards, "ready": ready}
                    | "JoinShards" >> beam.CoGroupByKey()
                    | "WriteShard" >> beam.ParDo(
                        _WriteShard(temp_dir, num_shards, topic)))
    totals = (built
              | "ChunkCounters" >> beam.FlatMap(_of_kind(_BUILT, 3))
              | "Totals" >> beam.CombineGlobally(SumFn(
                  functools.partial(statistics_lib.Totals, options.ngram),
                  "add")).without_defaults()
              | "TagTotals" >> beam.Map(lambda total: ("totals", total)))
    read_counters = (built
                     | "ReadCounters" >> beam.FlatMap(_of_kind(_READ, 1))
                     | "ReadTotals" >> beam.CombineGlobally(
                         SumFn(reader.ReadCounters)).without_defaults()
                     | "TagRead" >> beam.Map(lambda total: (_READ, total)))
    return ((totals, read_counters, shard_counts)
            | "Results" >> beam.Flatten()
            | "KeyResults" >> beam.Map(lambda result: (None, result))
            | "AllResults" >> beam.GroupByKey()
            | "Measure" >> beam.ParDo(
                _Measure(plan, temp_dir, options, run_settings, start_time,
                         vocab_size, topic, vocabulary)))


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


def as_one_line(error, runner=""):
    """The error a runner raised, as the local builder says it: the
    runner may wrap a transform's error and add where it ran; a cluster
    that failed (its scheduler gone, a task's workers killed too often) is
    an `OSError` naming it."""
    cluster_error = dask_runner.cluster_error(error, runner)
    if cluster_error:
        return cluster_error
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
        shuffle_memory_bytes=pipeline.DEFAULT_SHUFFLE_MEMORY_BYTES,
        counters_out=None):
    """Builds the local builder's TFRecords and statistics on a Beam runner.

    The arguments not listed are those of
    `pipeline.create_pretraining_data`, with the same meaning and the same
    output bytes.

    Args:
        runner: the Beam runner (see `pipeline_options`).
        pipeline_args: other Beam pipeline options, as command-line strings
            (`["--project=p", "--temp_location=gs://b/tmp"]`).
        counters_out: a dict that receives the run's `data_prep` counters
            (`dask_runner.count`: steps run, such as `chunks_built`).

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
    spread = _SPREAD
    if dask_runner.is_dask(runner):
        spread = _TASKS_PER_THREAD * dask_runner.cluster_threads(
            beam_pipeline_options)
    # The launcher alone reads the SentencePiece model.
    spm_model_file = dask_runner.absolute_paths(spm_model_file)
    input_file, output_file = worker_paths(
        runner, beam_pipeline_options, input_file=input_file,
        output_file=output_file)
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
            prepared, locked.lock, counters_out, spread)


def worker_paths(runner, options, **paths):
    """The path flags' values as the workers must see them: local paths
    made absolute (workers may start in other folders), in the order given.

    Raises:
        ValueError: a local path that the runner's workers cannot reach
            (`dask_runner.worker_paths_problem`), naming its flag.
    """
    flags = [("--" + name, value) for name, value in paths.items()]
    problem = dask_runner.worker_paths_problem(runner, options, flags)
    if problem:
        raise ValueError(problem)
    return [dask_runner.absolute_paths(value) for value in paths.values()]


def _create_locked(input_file, output_file, spm_model_file, runner,
                   beam_pipeline_options, options, dupe_factor, random_seed,
                   do_lower_case, num_output_shards, chunk_bytes,
                   max_line_bytes, dynamic_masking, global_shuffle,
                   shuffle_memory_bytes, start_time, prepared, lock,
                   counters_out, spread):
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
    topic = "data_prep-%s" % uuid.uuid4().hex
    try:
        root = beam.Pipeline(options=beam_pipeline_options)
        build_pipeline(root, plan, settings, chunk_bytes,
                       max_line_bytes, temp_dir, run_settings, start_time,
                       bits, vocab_size, topic, spread,
                       pipeline.vocabulary_record(spm_model_file,
                                                  plan.model_proto))
        counters = dask_runner.run(root, topic)
        _commit(plan, output_file, temp_dir)
    except BaseException as e:
        _clean_up(plan, temp_dir)
        lock.forget(temp_dir)
        raise as_one_line(e, runner) from None
    lock.forget(temp_dir)  # Removed by the commit.
    logging.info("Beam counters: %s.", ", ".join(
        "%s=%d" % item for item in sorted(counters.items())) or "none")
    if counters_out is not None:
        counters_out.update(counters)
    lock.remove_previous_leftovers()
    stats = json.loads(reader.read_bytes(plan.stats_path, _REMOTE))
    statistics_lib.log_summary(stats, reader.ReadCounters(**stats["read"]),
                               plan.stats_path)
    return stats
