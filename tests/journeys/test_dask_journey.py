"""docs/beam.md's Dask block, run as written: a cluster started with `dask
scheduler` and `dask worker`, the vocabulary and the pretraining data built
on it (tiny sizes), the cluster stopped with `kill %2 %1`.

The block's scheduler port is replaced by a free one (tests may run side by
side); the job numbers of `kill` are the processes this test started.
"""

import os
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from tests.conftest import corpus_text
from tests.journeys import common
from tests.journeys import documented

pytestmark = pytest.mark.slow

SCHEDULER = "dask scheduler --host 127.0.0.1"
WORKER = "dask worker tcp://127.0.0.1:8786"
VOCAB = "build_vocab --runner=DaskRunner"
DATA = "create_pretraining_data --runner=DaskRunner"
STOP = "kill %2 %1"
_SIZES = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2,
              chunk_mb=0.02, num_output_shards=2)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _on_port(command, port):
    return command.replace("8786", str(port))


def _start(command, cwd, log):
    """Starts a documented background command (`... &`) from this
    environment's `bin` folder."""
    argv = shlex.split(command)
    assert argv[-1] == "&", command
    argv = [os.path.join(os.path.dirname(sys.executable), argv[0])] + argv[1:-1]
    return subprocess.Popen(argv, cwd=cwd, env=common.ENV, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def test_the_dask_block_builds_the_local_bytes(tmp_path):
    (tmp_path / "corpus").mkdir()
    for i in range(3):
        (tmp_path / "corpus" / ("%d.txt" % i)).write_text(
            corpus_text(120, seed=30 + i), encoding="utf-8")
    port = _free_port()
    jobs = []
    with open(tmp_path / "cluster.log", "wb") as log:
        try:
            jobs.append(_start(_on_port(documented.command(SCHEDULER), port),
                               tmp_path, log))
            jobs.append(_start(_on_port(documented.command(WORKER), port),
                               tmp_path, log))
            common.run(_on_port(documented.command(
                VOCAB, set=dict(vocab_size=300, hard_vocab_limit="false")),
                port), tmp_path)
            assert sorted(os.listdir(tmp_path / "vocab")) == [
                "30k-clean.model", "30k-clean.vocab"]
            common.run(_on_port(documented.command(DATA, set=_SIZES), port),
                       tmp_path)
            # The local builder, same flags, into another folder.
            common.run(documented.command(
                DATA, set=dict(_SIZES, output_file="local/train.tfrecord"),
                drop=("runner", "dask_client_address")), tmp_path)
            for name in ("train.tfrecord-00000-of-00002",
                         "train.tfrecord-00001-of-00002"):
                assert (tmp_path / "data" / name).read_bytes() == (
                    tmp_path / "local" / name).read_bytes(), name
            # `kill %2 %1`: job 2 is the workers, job 1 the scheduler.
            stop = shlex.split(documented.command(STOP))
            pids = [str(jobs[int(job[1:]) - 1].pid) for job in stop[1:]]
            subprocess.run(["kill", *pids], check=True)
            for job in jobs:
                assert job.wait(timeout=60) is not None
        finally:
            for job in jobs:
                if job.poll() is None:
                    os.killpg(job.pid, signal.SIGKILL)
                    job.wait()
