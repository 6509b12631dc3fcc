"""Speed and memory of the data builder: docs/benchmarks.md#data-preparation.

`python -m benchmarks.data_prep` builds a docstring corpus and vocabulary
once, then times `data_prep.create_pretraining_data` with 1 and 2 local
workers, in both orders, and on Beam's DirectRunner (`--runner=dask`: on
Dask clusters instead), checks that every run writes the same bytes, and
prints medians of instances/s, instances per CPU second and peak memory.
"""

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not __package__:  # Run as a script: import the repo's data_prep package.
    sys.path[0] = _ROOT

from data_prep import builtin_corpus  # noqa: E402
from data_prep import output as output_lib  # noqa: E402
from data_prep import vocab  # noqa: E402


def _children(pid):
    """Pids of all descendants of `pid` (Linux /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents.setdefault(int(fields[1]), []).append(int(entry))
            except (OSError, IndexError):
                continue
    found, stack = [], [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(command, env):
    """Runs a command.

    Returns:
        `(wall s, CPU s, peak total RSS MB, peak main RSS MB)`; CPU time is
        user + system of the process and all its workers.
    """
    cpu_before = _children_cpu_s()
    start = time.time()
    process = subprocess.Popen(command, env=env, cwd=_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    peaks = {"total": 0.0, "main": 0.0}

    def sample():
        while process.poll() is None:
            main = _rss_mb(process.pid)
            total = main + sum(_rss_mb(c) for c in _children(process.pid))
            peaks["total"] = max(peaks["total"], total)
            peaks["main"] = max(peaks["main"], main)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    sampler.join()
    if process.returncode:
        raise RuntimeError("Command failed: %s\n%s" % (" ".join(command), stderr))
    wall = time.time() - start
    return wall, _children_cpu_s() - cpu_before, peaks["total"], peaks["main"]


def prepare(work_dir, corpus_mb, vocab_size):
    """Writes the corpus and trains the vocabulary (cached)."""
    os.makedirs(work_dir, exist_ok=True)
    corpus = os.path.join(work_dir, "corpus_%gmb.txt" % corpus_mb)
    if not os.path.exists(corpus):
        roots = builtin_corpus.source_roots(include_site_packages=True)
        builtin_corpus.write_corpus(corpus, max_chars=int(corpus_mb * 1e6),
                                    roots=roots)
    prefix = os.path.join(work_dir, "spm_%gmb_%d" % (corpus_mb, vocab_size))
    if not os.path.exists(prefix + ".model"):
        vocab.train_vocab(corpus, prefix, vocab_size=vocab_size,
                          hard_vocab_limit=False)
    return corpus, prefix + ".model"


def repeated_corpus(corpus, times):
    """The corpus concatenated `times` times (for the memory scaling rows)."""
    if times == 1:
        return corpus
    path = "%s.x%d" % (corpus, times)
    if not os.path.exists(path):
        with open(corpus, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            for _ in range(times):
                f.write(data)
    return path


OFFICIAL_INSTANCES_PER_CORE_S = 470.0


def _written(output):
    """The run's statistics and the SHA-256 of each shard it wrote."""
    with open(output_lib.stats_path(output)) as f:
        stats = json.load(f)
    shards = []
    for path in stats["output_files"]:
        with open(path, "rb") as f:
            shards.append(hashlib.sha256(f.read()).hexdigest())
    return stats, shards


def _builder_command(args, corpus, output, model):
    """`create_pretraining_data`'s command line with the benchmark's flags."""
    return [
        sys.executable, "-m", "data_prep.create_pretraining_data",
        "--input_file=%s" % corpus, "--output_file=%s" % output,
        "--spm_model_file=%s" % model,
        "--max_seq_length=%d" % args.max_seq_length,
        "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
        "--dupe_factor=%d" % args.dupe_factor,
        "--num_output_shards=%d" % args.num_output_shards,
        "--chunk_mb=%g" % args.chunk_mb,
        "--shuffle_memory_mb=%g" % args.shuffle_memory_mb,
    ]


def measure(corpus, model, out_dir, workers, args, env, beam=False,
            order="global"):
    """One CLI run; returns a dict of measurements."""
    name = "%s%d%s" % ("beam" if beam else "w", workers, order)
    output = os.path.join(out_dir, name, "t.tfrecord")
    command = _builder_command(args, corpus, output, model)
    if order == "chunk":
        command.append("--noglobal_shuffle")
    if beam:
        command += ["--runner=DirectRunner", "--direct_num_workers=%d" % workers,
                    "--direct_running_mode=multi_processing"]
    else:
        command.append("--num_workers=%d" % workers)
    wall, cpu, peak_total, peak_main = run_measured(command, env)
    stats, shards = _written(output)
    return dict(instances=stats["instances"], elapsed=stats["elapsed_s"],
                wall=wall, cpu=cpu, peak_total=peak_total, peak_main=peak_main,
                read_mb=stats["read"]["bytes"] / 1e6, shards=shards,
                mixing=stats["mixing"]["block_divergence_ratio"])


def _runs(args):
    """`(label, workers, beam, order)` of each row, locals first."""
    workers = [int(w) for w in args.workers.split(",") if w]
    rows = [("local", w, False, "chunk") for w in workers]
    rows += [("local", w, False, "global") for w in workers]
    rows += [("Beam DirectRunner", int(w), True, "global")
             for w in args.beam_workers.split(",") if w]
    return rows


def _parse_args():
    """The command line's settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus_mb", type=float, default=3.0)
    parser.add_argument("--vocab_size", type=int, default=30000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--dupe_factor", type=int, default=2)
    parser.add_argument("--chunk_mb", type=float, default=0.25)
    parser.add_argument("--num_output_shards", type=int, default=2)
    parser.add_argument("--shuffle_memory_mb", type=float, default=32.0)
    parser.add_argument("--workers", default="1,2",
                        help="Local worker counts ('' to skip).")
    parser.add_argument("--beam_workers", default="2",
                        help="DirectRunner worker processes ('' to skip).")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runner", choices=("local", "dask"),
                        default="local",
                        help="dask: the builder on Dask clusters of "
                        "--workers single-thread workers against the local "
                        "builder, at each --scaling corpus size.")
    parser.add_argument("--scaling", default="1,4,16",
                        help="Corpus repetitions for the memory rows ('' to skip).")
    parser.add_argument("--work_dir",
                        default=os.path.join(tempfile.gettempdir(),
                                             "albert_data_prep_bench"))
    return parser.parse_args()


def _measure_in_turn(rows, corpus, model, out_dir, args, env):
    """`args.repeats` measurements of each row, by row."""
    runs = {row: [] for row in rows}
    for _ in range(args.repeats):  # In turn: load changes hit every row.
        for row in rows:
            label, workers, beam, order = row
            runs[row].append(measure(corpus, model, out_dir, workers, args,
                                     env, beam, order))
    return runs


def _print_speed_table(corpus, model, out_dir, args, env):
    """The first table: the medians of every runner, order and worker
    count, and whether each wrote the same bytes as the first of its
    order."""
    header = ("| runner | order | workers | instances | builder s | "
              "instances/s | CPU s | instances per CPU s | x official | "
              "vs chunk order | peak RSS MB (all) | peak RSS MB (main) | "
              "vs local | mixing ratio | same bytes |")
    print(header)
    print("|---|---|" + "---:|" * (header.count("|") - 4) + "---|")
    rows = _runs(args)
    runs = _measure_in_turn(rows, corpus, model, out_dir, args, env)
    local_rates, chunk_per_cpu, references = {}, {}, {}
    for row in rows:
        label, workers, beam, order = row
        reference = references.setdefault(order, runs[row][0]["shards"])
        same = all(r["shards"] == reference for r in runs[row])
        med = {k: statistics.median(r[k] for r in runs[row])
               for k in runs[row][0] if k != "shards"}
        rate = med["instances"] / med["elapsed"]
        per_cpu = med["instances"] / med["cpu"]
        if not beam and order == "global":
            local_rates[workers] = rate
        if order == "chunk":
            chunk_per_cpu[workers] = per_cpu
        versus = (rate / local_rates[workers]
                  if beam and workers in local_rates else float("nan"))
        versus_chunk = (per_cpu / chunk_per_cpu[workers]
                        if order == "global" and not beam
                        and workers in chunk_per_cpu else float("nan"))
        print("| %s | %s | %d | %d | %.2f | %.0f | %.2f | %.0f | %.1f | %.2f "
              "| %.0f | %.0f | %.2f | %.3f | %s |" % (
                  label, order, workers, med["instances"], med["elapsed"], rate,
                  med["cpu"], per_cpu, per_cpu / OFFICIAL_INSTANCES_PER_CORE_S,
                  versus_chunk, med["peak_total"], med["peak_main"], versus,
                  med["mixing"], "yes" if same else "NO"), flush=True)


def _print_scaling_table(corpus, model, out_dir, args, env):
    """The second table, unless `--scaling` is empty: one local run in the
    global order per corpus repetition."""
    scaling = [int(s) for s in args.scaling.split(",") if s]
    if scaling:
        print()
        print("| corpus | MB read | runner | workers | instances | instances/s "
              "| instances per CPU s | x official | peak RSS MB (all) | "
              "peak RSS MB (main) |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        workers = [int(w) for w in args.workers.split(",") if w][:1] or [1]
        for times in scaling:
            run = measure(repeated_corpus(corpus, times), model, out_dir,
                          workers[0], args, env)
            rate = run["instances"] / run["elapsed"]
            per_cpu = run["instances"] / run["cpu"]
            print("| %dx | %.1f | local | %d | %d | %.0f | %.0f | %.1f | %.0f "
                  "| %.0f |" % (times, run["read_mb"], workers[0],
                                run["instances"], rate, per_cpu,
                                per_cpu / OFFICIAL_INSTANCES_PER_CORE_S,
                                run["peak_total"], run["peak_main"]),
                  flush=True)


def _worker_usage(pids):
    """`{pid: (CPU s, peak RSS MB)}` of worker processes: user + system
    time, and VmHWM (the process's peak resident memory)."""
    usage = {}
    for pid in pids:
        cpu = 0.0
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf(
                "SC_CLK_TCK")
        peak = 0.0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024.0
        usage[pid] = (cpu, peak)
    return usage


def measure_dask(corpus, model, out_dir, workers, args, env):
    """One CLI run on a fresh Dask cluster of `workers` single-thread
    worker processes (`dask_runner.ProcessCluster`); returns `measure`'s
    dict plus `workers`: `[(CPU share, peak RSS MB)]`, one per worker."""
    from data_prep import dask_runner

    name = "dask%d-%s" % (workers, os.path.basename(corpus))
    output = os.path.join(out_dir, name, "t.tfrecord")
    cluster_dir = tempfile.mkdtemp(dir=out_dir)
    with dask_runner.ProcessCluster(workers, cluster_dir) as cluster:
        pids = list(cluster.worker_pids().values())
        before = _worker_usage(pids)
        command = _builder_command(args, corpus, output, model) + [
            "--runner=DaskRunner",
            "--dask_client_address=%s" % cluster.address]
        wall, cpu, peak_total, peak_main = run_measured(command, env)
        after = _worker_usage(pids)
    used = {pid: after[pid][0] - before[pid][0] for pid in pids}
    total = sum(used.values()) or 1.0
    stats, shards = _written(output)
    return dict(instances=stats["instances"], elapsed=stats["elapsed_s"],
                wall=wall, cpu=cpu + total, shards=shards,
                read_mb=stats["read"]["bytes"] / 1e6,
                workers=[(used[pid] / total, after[pid][1]) for pid in pids])


def _print_dask_table(corpus, model, out_dir, args, env):
    """`--runner=dask`: for each corpus repetition (`--scaling`) and worker
    count (`--workers`), the local builder and a Dask cluster of as many
    single-thread worker processes, one run each, in turn."""
    print("| corpus | MB read | workers | local instances/s | Dask "
          "instances/s | vs local | Dask instances per CPU s | each worker: "
          "CPU share, peak RSS MB | same bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    workers = [int(w) for w in args.workers.split(",") if w]
    for times in [int(s) for s in args.scaling.split(",") if s]:
        inputs = repeated_corpus(corpus, times)
        for count in workers:
            local = measure(inputs, model, out_dir, count, args, env)
            dask = measure_dask(inputs, model, out_dir, count, args, env)
            local_rate = local["instances"] / local["elapsed"]
            rate = dask["instances"] / dask["elapsed"]
            print("| %dx | %.1f | %d | %.0f | %.0f | %.2f | %.0f | %s | %s |" % (
                times, dask["read_mb"], count, local_rate, rate,
                rate / local_rate, dask["instances"] / dask["cpu"],
                "; ".join("%.0f%%, %.0f" % (100 * share, peak)
                          for share, peak in dask["workers"]),
                "yes" if dask["shards"] == local["shards"] else "NO"),
                  flush=True)


def main():
    """Runs the benchmark and prints its two tables (`--runner=dask`: the
    Dask table)."""
    args = _parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    corpus, model = prepare(args.work_dir, args.corpus_mb, args.vocab_size)
    pieces = vocab.load_model(model).get_piece_size()
    cores = os.cpu_count() or 1
    out_dir = tempfile.mkdtemp(dir=args.work_dir)
    print("corpus: %s (%.2f MB), vocabulary: %d pieces, max_seq_length %d, "
          "dupe_factor %d, chunk %g MB, %d shards, %d CPU cores, medians of "
          "%d runs" % (corpus, os.path.getsize(corpus) / 1e6, pieces,
                       args.max_seq_length, args.dupe_factor, args.chunk_mb,
                       args.num_output_shards, cores, args.repeats))
    print()
    if args.runner == "dask":
        _print_dask_table(corpus, model, out_dir, args, env)
        return
    _print_speed_table(corpus, model, out_dir, args, env)
    _print_scaling_table(corpus, model, out_dir, args, env)

if __name__ == "__main__":
    main()
