"""The Beam builders on a Dask cluster (`--runner=DaskRunner`).

Beam's DaskRunner (`apache-beam[dask]`) turns a pipeline into one Dask task
graph and runs it on the cluster whose scheduler `--dask_client_address`
names (`tcp://HOST:PORT`; unset, a local cluster it starts itself). What
this module adds for the builders (`data_prep.beam_pipeline`,
`data_prep.beam_vocab`):

- the short name `--runner=DaskRunner` and its options: Beam knows them only
  once the runner's module is imported, so it is imported before the
  command line is parsed;
- the partitioning: every `Create` element becomes its own Dask partition
  (one task), chosen here, not left to `--dask_partition_size`;
- where workers find the paths: `worker_paths_problem` says which flag holds
  a path that a runner's workers cannot reach;
- counters: the runner collects no Beam metrics, so `count` also reports to
  the cluster's event log under the run's own topic, and `run` sums them;
- stopping: Ctrl-C (or any error) while the cluster works cancels the run's
  tasks and waits for the ones running to end before the launcher removes
  its temporary files.

Nothing here imports Dask until a Dask run needs it (an optional extra).
"""

import collections
import ipaddress
import os
import time
import urllib.parse

from absl import logging

RUNNER_PATH = "apache_beam.runners.dask.dask_runner.DaskRunner"
_INSTALL = "pip install 'apache-beam[dask]==2.77.0'"
# Beam's local runners: their workers are processes of this machine that
# start in this process's folder.
_LOCAL_RUNNERS = {"directrunner", "bundlebaseddirectrunner",
                  "switchingdirectrunner", "prismrunner", "fnapirunner",
                  "testdirectrunner", "interactiverunner"}
# Seconds a cancelled run's running tasks get to end.
_DRAIN_S = 60.0
_COUNTER_NAMESPACE = "data_prep"


def is_dask(runner):
    """Whether `runner` (a name or class path) is Beam's DaskRunner."""
    return runner.lower() in ("daskrunner", "dask", RUNNER_PATH.lower())


def runner_name(runner):
    """The runner Beam is given: the DaskRunner's class path for its short
    name (Beam knows the runner only by that), else `runner`."""
    return RUNNER_PATH if is_dask(runner) else runner


def register_options(runner):
    """Imports the DaskRunner's module for a Dask run, so that Beam knows
    its `--dask_*` options when the command line is parsed.

    Raises:
        ValueError: Dask is not installed, naming the package to install.
    """
    if not is_dask(runner):
        return
    try:
        import distributed  # noqa: F401
        from apache_beam.runners.dask import dask_runner  # noqa: F401
    except ImportError:
        raise ValueError("--runner=DaskRunner needs Dask: %s. Received: "
                         "--runner=%s" % (_INSTALL, runner)) from None


def client_address(options):
    """The scheduler address of a Dask run's options (None: Beam starts a
    local cluster)."""
    from apache_beam.runners.dask import dask_runner

    return options.view_as(dask_runner.DaskOptions).address


def cluster_threads(options, timeout_s=10):
    """The worker threads of the cluster a Dask run goes to (this machine's
    CPUs where Beam starts a local cluster).

    Args:
        options: the Beam `PipelineOptions`.
        timeout_s: how long to try to connect, unless
            `--dask_connection_timeout` says.

    Raises:
        ValueError: no scheduler answers at `--dask_client_address`.
    """
    address = client_address(options)
    if address is None:
        return os.cpu_count() or 1
    import distributed
    from apache_beam.runners.dask import dask_runner

    timeout = options.view_as(dask_runner.DaskOptions).timeout
    if not isinstance(timeout, int):  # Unset (Dask's "no default").
        timeout = timeout_s
    try:
        with distributed.Client(address, timeout=timeout) as client:
            return max(1, sum(client.nthreads().values()))
    except (OSError, TimeoutError) as e:
        raise ValueError("No Dask scheduler answers at %s (%s). Received: "
                         "--dask_client_address=%s"
                         % (address, str(e).splitlines()[0][:200], address)
                         ) from None


def set_partitioning(options):
    """One Dask partition (task) per `Create` element, unless the user chose
    the partitioning with `--dask_npartitions`/`--dask_partition_size`: the
    builders put in a `Create` exactly the units of work to spread."""
    from apache_beam.runners.dask import dask_runner

    dask_options = options.view_as(dask_runner.DaskOptions)
    if not dask_options.npartitions and not dask_options.partition_size:
        dask_options.partition_size = 1


def _is_loopback(address):
    """Whether a scheduler address names this machine."""
    if address is None:
        return True
    host = urllib.parse.urlsplit(
        address if "://" in address else "tcp://" + address).hostname
    if host in (None, "", "localhost"):
        return host is not None
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def workers_are_local(runner, options):
    """Whether the runner's workers are processes of this machine that can
    be given this machine's absolute paths (None: cannot be known)."""
    name = runner.rsplit(".", 1)[-1].lower()
    if name in _LOCAL_RUNNERS:
        return True
    if is_dask(runner):
        return True if _is_loopback(client_address(options)) else None
    if name in ("dataflowrunner", "testdataflowrunner"):
        return False
    return None  # Flink, Spark, a portable job server: maybe shared mounts.


def worker_paths_problem(runner, options, paths):
    """The first path flag whose local path the runner's workers cannot
    reach, as an error message; None when all can be reached.

    Args:
        runner: the `--runner` value.
        options: the Beam `PipelineOptions`.
        paths: `(flag, value)` pairs: comma-separated paths or patterns.
    """
    local = workers_are_local(runner, options)
    if local:
        return None
    for flag, value in paths:
        for path in (p.strip() for p in value.split(",")):
            if not path or "://" in path:
                continue
            if local is False:
                return ("%s=%s is a local path, which the workers of %s "
                        "cannot reach; pass a URL they read (gs://...)"
                        % (flag, value, runner))
            if not os.path.isabs(path):
                return ("%s=%s is relative: the workers of %s would resolve "
                        "it in their own folders; pass an absolute path on "
                        "a file system they share, or a URL"
                        % (flag, value, runner))
    return None


def absolute_paths(value):
    """Comma-separated local paths or patterns made absolute (URLs kept)."""
    return ",".join(p if "://" in p else os.path.abspath(p)
                    for p in (p.strip() for p in value.split(",")) if p)


def cluster_error(error, runner):
    """A Dask cluster's failure (no scheduler at the address, the scheduler
    lost, a task whose workers died too often) as one `OSError` line; None
    for any other error (a transform's own)."""
    if not is_dask(runner):
        return None
    import asyncio
    import concurrent.futures

    kind = type(error)
    from_dask = kind.__module__.split(".")[0] in ("distributed", "tornado")
    cancelled = isinstance(error, (asyncio.CancelledError,
                                   concurrent.futures.CancelledError))
    timed_out = isinstance(error, (OSError, TimeoutError)) and (
        "connect" in str(error).lower())
    if not (from_dask or cancelled or timed_out):
        return None
    detail = (str(error).strip().splitlines() or [""])[0][:300]
    return OSError("the Dask cluster failed (%s%s); nothing of this run was "
                   "kept, the earlier output is as it was"
                   % (kind.__name__, ": " + detail if detail else ""))


def count(topic, name, value=1):
    """Adds to the Beam counter `name` of the `data_prep` namespace and, on
    a Dask worker (where the runner collects no Beam metrics), reports the
    same to the cluster's event log under `topic` (the run's own)."""
    from apache_beam.metrics import Metrics

    Metrics.counter(_COUNTER_NAMESPACE, name).inc(value)
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):  # Not on a Dask worker.
        return
    worker.log_event(topic, {"name": name, "value": value})


def _beam_counters(result):
    """The `data_prep` counters a runner's result holds (empty when it
    collects none)."""
    from apache_beam.metrics.metric import MetricsFilter

    try:
        query = result.metrics().query(
            MetricsFilter().with_namespace(_COUNTER_NAMESPACE))
    except NotImplementedError:
        return {}
    totals = collections.Counter()
    for counter in query["counters"]:
        totals[counter.key.metric.name] += counter.committed or 0
    return dict(totals)


def _dask_counters(client, topic):
    """The counters the run's tasks reported to the cluster's event log."""
    totals = collections.Counter()
    for _, message in client.get_events(topic):
        totals[message["name"]] += message["value"]
    return dict(totals)


def _executing(dask_worker):
    """The tasks a worker's threads run now, cancelled ones included."""
    return len(dask_worker.state.executing)


def _drain(result):
    """Cancels a Dask run's tasks and waits (a bounded time) until no worker
    runs a task: Dask cannot stop a running task, and one could write a
    piece after the launcher removed the run's temporary folder."""
    client = result.client
    try:
        client.cancel(result.futures, force=True)
        deadline = time.monotonic() + _DRAIN_S
        while any(client.run(_executing).values()):
            if time.monotonic() > deadline:
                logging.warning("Workers still ran tasks %d s after the run "
                                "was cancelled.", _DRAIN_S)
                return
            time.sleep(0.2)
    except Exception as e:  # The scheduler is gone: nothing is scheduled.
        logging.warning("Could not cancel the run's tasks: %s", e)


def run(root, topic):
    """Runs the pipeline `root` to its end and returns its `data_prep`
    counters (`{name: total}`).

    On a Dask cluster, an error or Ctrl-C while it runs cancels the run's
    tasks (see `_drain`) before it propagates; the client is closed.
    """
    result = root.run()
    client = getattr(result, "client", None)
    if client is None:
        result.wait_until_finish()
        return _beam_counters(result)
    try:
        result.wait_until_finish()
        return _dask_counters(client, topic)
    except BaseException:
        _drain(result)
        raise
    finally:
        try:
            client.close(timeout=10)
        except Exception:  # A lost scheduler: nothing left to close.
            pass


class ProcessCluster:
    """A Dask cluster of separate processes on this machine, as
    `docs/beam.md` starts one: `dask scheduler` on 127.0.0.1 and `dask
    worker` with single-thread worker processes (each under a nanny that
    restarts it if it dies). For the tests and the benchmark; `stop` ends
    every process it started, by process id.

    Args:
        workers: worker processes.
        directory: where the scheduler file and the workers' scratch space
            go.
        memory_limit: each worker's memory limit (Dask's syntax), past
            which it spills to disk.
    """

    def __init__(self, workers, directory, memory_limit="2GB"):
        self.directory = directory
        self._processes = []
        scheduler_file = os.path.join(directory, "scheduler.json")
        self._start(["scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--no-dashboard", "--scheduler-file", scheduler_file],
                    "scheduler")
        self.address = self._read_address(scheduler_file)
        try:
            self._start(["worker", self.address, "--nworkers", str(workers),
                         "--nthreads", "1", "--host", "127.0.0.1",
                         "--no-dashboard", "--memory-limit", memory_limit,
                         "--local-directory",
                         os.path.join(directory, "work")], "workers")
            self.wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    @property
    def scheduler_pid(self):
        return self._processes[0].pid

    def _start(self, args, name):
        import subprocess
        import sys

        log = open(os.path.join(self.directory, name + ".log"), "ab")
        with log:
            self._processes.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_" + args[0],
                 *args[1:]], stdout=log, stderr=log,
                start_new_session=True))

    def _read_address(self, scheduler_file, timeout_s=60):
        import json

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with open(scheduler_file) as f:
                    return json.load(f)["address"]
            except (OSError, ValueError, KeyError):
                if self._processes[0].poll() is not None:
                    break
                time.sleep(0.1)
        self.stop()
        raise OSError("The Dask scheduler did not start (see %s)."
                      % os.path.join(self.directory, "scheduler.log"))

    def client(self):
        """A Dask client of this cluster (the caller closes it)."""
        import distributed

        return distributed.Client(self.address, timeout=30)

    def wait_for_workers(self, workers, timeout_s=120):
        """Waits until `workers` workers have joined."""
        with self.client() as client:
            client.wait_for_workers(workers, timeout=timeout_s)

    def worker_pids(self):
        """`{worker address: process id}` of the workers now running."""
        with self.client() as client:
            return client.run(os.getpid)

    def stop(self):
        """Ends the workers, then the scheduler, by process id: SIGTERM,
        and SIGKILL for any left after a few seconds (with what each
        started, in its own process group)."""
        import signal
        import subprocess

        for process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:  # The nannies' worker processes, if any outlived them.
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        self._processes = []

    def __enter__(self):
        return self

    def __exit__(self, *unused_exc):
        self.stop()
