"""Tests for data_prep.dask_runner: the Beam builders on a Dask cluster.

The slow tests start a cluster of separate processes (`dask scheduler`, and
`dask worker` with 2 single-thread workers under nannies) on 127.0.0.1 and
stop it by process id; the fast ones need no cluster, or an in-process one.
"""

import glob
import json
import os
import signal
import socket
import subprocess
import time

import psutil
import pytest

from data_prep import beam_pipeline
from data_prep import dask_runner
from data_prep import instances
from data_prep import pipeline
from data_prep import reader
from tests.conftest import corpus_text
from tests.hostile.common import assert_one_line_error
from tests.hostile.common import environment
from tests.hostile.common import run_program
from tests.hostile.common import start_program

OPTIONS = instances.InstanceOptions(max_seq_length=64,
                                    max_predictions_per_seq=10)
CHUNK_BYTES = int(0.015 * (1 << 20))  # --chunk_mb=0.015
# What differs between two runs that wrote the same bytes.
_TIMING = ("elapsed_s", "instances_per_s", "output_files", "input_files")
PROGRAM = "data_prep.create_pretraining_data"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Five files of uneven sizes: 3 reading units, 34 chunks."""
    directory = tmp_path_factory.mktemp("dask_corpus")
    for i, documents in enumerate([60, 20, 300, 80, 150]):
        (directory / ("%d.txt" % i)).write_text(
            corpus_text(documents, seed=i), encoding="utf-8")
    return str(directory / "*.txt")


def _chunk_count(inputs):
    paths = reader.text_files(reader.expand_input_patterns(inputs))
    units = reader.plan_units(paths, reader.file_sizes(paths), CHUNK_BYTES)
    return sum(1 for _ in reader.iter_corpus_chunks(
        units, reader.ReadCounters(), CHUNK_BYTES))


def _local(inputs, out, model, **kwargs):
    return pipeline.create_pretraining_data(
        inputs, out, model, options=OPTIONS, dupe_factor=2,
        chunk_bytes=CHUNK_BYTES, **kwargs)


def _on_dask(inputs, out, model, address, counters, **kwargs):
    return beam_pipeline.create_pretraining_data(
        inputs, out, model, runner="DaskRunner",
        pipeline_args=["--dask_client_address=" + address], options=OPTIONS,
        dupe_factor=2, chunk_bytes=CHUNK_BYTES, counters_out=counters,
        **kwargs)


def _assert_same_run(local, other):
    """The same shard bytes and the same statistics (but timing)."""
    assert [open(p, "rb").read() for p in local["output_files"]] == [
        open(p, "rb").read() for p in other["output_files"]]
    assert ({k: v for k, v in local.items() if k not in _TIMING}
            == {k: v for k, v in other.items() if k not in _TIMING})


def _visible(directory):
    """`{name: bytes}` of the files a user sees in `directory`."""
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory))
            if not name.startswith(".")}


def _assert_same_files(expected, actual):
    """The same visible files, with the same bytes but the statistics'
    timing and paths."""
    expected, actual = _visible(expected), _visible(actual)
    assert sorted(expected) == sorted(actual)
    for name in expected:
        if name.startswith("stats."):
            expected[name], actual[name] = (
                {k: v for k, v in json.loads(stats).items()
                 if k not in _TIMING} for stats in (expected[name],
                                                    actual[name]))
        assert expected[name] == actual[name], name


def test_the_short_name_takes_the_dask_options():
    options = beam_pipeline.pipeline_options(
        "DaskRunner", ["--dask_client_address=tcp://127.0.0.1:8786"])
    assert options.get_all_options()["runner"] == dask_runner.RUNNER_PATH
    assert dask_runner.client_address(options) == "tcp://127.0.0.1:8786"
    # The builder's partitioning: one task per Create element...
    assert options.get_all_options()["partition_size"] == 1
    # ...unless the user chose one.
    options = beam_pipeline.pipeline_options(
        dask_runner.RUNNER_PATH, ["--dask_npartitions=4"])
    assert options.get_all_options()["npartitions"] == 4
    assert not options.get_all_options()["partition_size"]
    with pytest.raises(ValueError, match="--dask_client_adress"):
        beam_pipeline.pipeline_options(
            "DaskRunner", ["--dask_client_adress=tcp://127.0.0.1:8786"])


def test_no_scheduler_at_the_address_is_one_line(tmp_path, spm_model_path):
    with socket.socket() as unused:  # A port nothing listens on.
        unused.bind(("127.0.0.1", 0))
        address = "tcp://127.0.0.1:%d" % unused.getsockname()[1]
    with pytest.raises(ValueError, match="^No Dask scheduler answers at %s "
                       r".*Received: --dask_client_address=%s$"
                       % (address, address)):
        beam_pipeline.create_pretraining_data(
            str(tmp_path / "*.txt"), str(tmp_path / "t.tfrecord"),
            spm_model_path, runner="DaskRunner", pipeline_args=[
                "--dask_client_address=" + address,
                "--dask_connection_timeout=1"])
    assert os.listdir(tmp_path) == []


def test_paths_workers_cannot_reach_are_refused_naming_the_flag():
    remote = beam_pipeline.pipeline_options(
        "DaskRunner", ["--dask_client_address=tcp://10.1.2.3:8786"])
    with pytest.raises(ValueError, match="^--output_file=data/t.tfrecord is "
                       "relative: the workers of DaskRunner"):
        beam_pipeline.worker_paths("DaskRunner", remote,
                                   input_file="/shared/corpus/*.txt",
                                   output_file="data/t.tfrecord")
    # Absolute paths may be a shared file system's; URLs go as they are.
    assert beam_pipeline.worker_paths(
        "DaskRunner", remote, input_file="/shared/a.txt, gs://b/c.txt") == [
            "/shared/a.txt,gs://b/c.txt"]
    dataflow = beam_pipeline.pipeline_options("DataflowRunner")
    with pytest.raises(ValueError, match="^--input_file=/data/a.txt is a "
                       "local path, which the workers of DataflowRunner"):
        beam_pipeline.worker_paths("DataflowRunner", dataflow,
                                   input_file="/data/a.txt")
    # Workers on this machine get this machine's absolute paths.
    local = beam_pipeline.pipeline_options(
        "DaskRunner", ["--dask_client_address=tcp://127.0.0.1:8786"])
    assert beam_pipeline.worker_paths(
        "DaskRunner", local, output_file="d/t.tfrecord") == [
            os.path.join(os.getcwd(), "d/t.tfrecord")]


def test_an_in_process_cluster_writes_the_local_bytes(tmp_path, corpus,
                                                      spm_model_path):
    """distributed.LocalCluster with thread workers: the graph, once."""
    import distributed

    local = _local(corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=3)
    counters = {}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                  processes=False, dashboard_address=None,
                                  protocol="tcp", host="127.0.0.1") as cluster:
        dask = _on_dask(corpus, str(tmp_path / "d" / "t.tfrecord"),
                        spm_model_path, cluster.scheduler_address, counters,
                        num_output_shards=3)
    _assert_same_run(local, dask)
    assert counters["chunks_built"] == _chunk_count(corpus)
    assert counters["shards_written"] == 3 and counters["measures"] == 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """2 single-thread worker processes and a scheduler, as docs/beam.md
    starts them; stopped by process id."""
    with dask_runner.ProcessCluster(
            2, str(tmp_path_factory.mktemp("cluster"))) as started:
        yield started


def _cpu_seconds(pids):
    return {address: sum(psutil.Process(pid).cpu_times()[:4])
            for address, pid in pids.items()}


@pytest.mark.slow
@pytest.mark.parametrize("shards,global_shuffle",
                         [(1, True), (3, True), (1, False), (3, False)])
def test_a_process_cluster_writes_the_local_bytes(
        tmp_path, corpus, spm_model_path, cluster, shards, global_shuffle,
        monkeypatch):
    local = _local(corpus, str(tmp_path / "l" / "t.tfrecord"),
                   spm_model_path, num_output_shards=shards,
                   global_shuffle=global_shuffle)
    pids = cluster.worker_pids()
    before = _cpu_seconds(pids)
    counters = {}
    # A relative output: made absolute before the workers see it.
    monkeypatch.chdir(tmp_path)
    dask = _on_dask(corpus, "d/t.tfrecord", spm_model_path, cluster.address,
                    counters, num_output_shards=shards,
                    global_shuffle=global_shuffle)
    used = {address: seconds - before[address]
            for address, seconds in _cpu_seconds(pids).items()}
    _assert_same_run(local, dask)
    assert sorted(os.listdir(tmp_path / "d")) == sorted(
        os.path.basename(p) for p in dask["output_files"] + [
            pipeline.stats_path(str(tmp_path / "d" / "t.tfrecord"))])
    # Every costly step ran once per chunk, bucket, shard.
    assert counters["chunks_built"] == _chunk_count(corpus)
    assert counters["shards_written"] == shards
    assert counters["measures"] == 1
    assert counters.get("buckets_sorted", 0) == (1 if global_shuffle else 0)
    # Each worker did a fair share.
    assert len(used) == 2
    assert min(used.values()) >= 0.35 * sum(used.values()), used


@pytest.fixture()
def fault_corpus(tmp_path):
    """A corpus that takes the cluster several seconds (10 files)."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    for i in range(10):
        (directory / ("%d.txt" % i)).write_text(
            corpus_text(150, seed=10 + i), encoding="utf-8")
    return str(directory / "*.txt")


def _flags(inputs, out, model, address, *extra):
    return ["--input_file=" + inputs, "--output_file=" + out,
            "--spm_model_file=" + model, "--max_seq_length=64",
            "--max_predictions_per_seq=10", "--dupe_factor=6",
            "--chunk_mb=0.015", "--num_output_shards=2", "--runner=DaskRunner",
            "--dask_client_address=" + address, *extra]


def _when(condition, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _pieces(out_dir):
    return glob.glob(os.path.join(out_dir, ".t.tfrecord.beam-temp-*",
                                  "piece-*"))


def _finish(process, timeout=300):
    output, _ = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode,
                                       output, output)


@pytest.mark.slow
def test_a_worker_killed_mid_run_leaves_the_same_bytes(
        tmp_path, fault_corpus, spm_model_path, cluster):
    expected = tmp_path / "l"
    pipeline.create_pretraining_data(
        fault_corpus, str(expected / "t.tfrecord"), spm_model_path,
        options=OPTIONS, dupe_factor=6, chunk_bytes=CHUNK_BYTES,
        num_output_shards=2, global_shuffle=False)
    out = tmp_path / "d"
    process = start_program(PROGRAM, *_flags(
        fault_corpus, str(out / "t.tfrecord"), spm_model_path,
        cluster.address, "--noglobal_shuffle"))
    try:
        _when(lambda: len(_pieces(str(out))) >= 3)
        victim = sorted(cluster.worker_pids().values())[0]
        os.kill(victim, signal.SIGKILL)
        assert process.poll() is None, "the run ended before the kill"
        result = _finish(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert result.returncode == 0, result.stdout[-3000:]
    _assert_same_files(str(expected), str(out))
    cluster.wait_for_workers(2)  # Its nanny started it again.
    assert victim not in cluster.worker_pids().values()


@pytest.mark.slow
def test_ctrl_c_cancels_the_run_and_a_second_run_is_refused(
        tmp_path, fault_corpus, spm_model_path, cluster):
    out = tmp_path / "d"
    out.mkdir()
    (out / "t.tfrecord").write_bytes(b"an earlier run's shard")
    earlier = _visible(str(out))
    # Five times the other cases' maskings: the run must outlast the second
    # program's start on a machine with nothing else running.
    flags = _flags(fault_corpus, str(out / "t.tfrecord"), spm_model_path,
                   cluster.address, "--num_output_shards=1",
                   "--noglobal_shuffle", "--dupe_factor=30")
    process = start_program(PROGRAM, *flags)
    try:
        _when(lambda: len(_pieces(str(out))) >= 2)
        second = run_program(PROGRAM, *flags, timeout=120)
        assert_one_line_error(second, "t.tfrecord")
        assert process.poll() is None, "the run ended before Ctrl-C"
        process.send_signal(signal.SIGINT)
        result = _finish(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert result.returncode == 130, result.stdout[-3000:]
    assert _visible(str(out)) == earlier
    assert not [n for n in os.listdir(out) if n.startswith(".t.tfrecord.")]
    # The cluster runs nothing of it any more.
    with cluster.client() as client:
        assert not any(client.processing().values())
        assert not any(client.run(dask_runner._executing).values())


@pytest.mark.slow
def test_a_lost_scheduler_is_one_line_and_keeps_the_earlier_output(
        tmp_path, fault_corpus, spm_model_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "t.tfrecord").write_bytes(b"an earlier run's shard")
    earlier = _visible(str(out))
    (tmp_path / "c").mkdir()
    with dask_runner.ProcessCluster(1, str(tmp_path / "c")) as lost:
        # The client gives up reconnecting after Dask's connect timeout
        # (30 s by default).
        process = start_program(PROGRAM, *_flags(
            fault_corpus, str(out / "t.tfrecord"), spm_model_path,
            lost.address, "--num_output_shards=1", "--noglobal_shuffle"),
            env=environment(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="5s"))
        try:
            _when(lambda: len(_pieces(str(out))) >= 1)
            os.kill(lost.scheduler_pid, signal.SIGKILL)
            assert process.poll() is None, "the run ended before the kill"
            result = _finish(process)
        finally:
            if process.poll() is None:
                process.kill()
    line = assert_one_line_error(result, "Dask cluster failed")
    print(line)
    assert "earlier output is as it was" in line
    assert _visible(str(out)) == earlier
