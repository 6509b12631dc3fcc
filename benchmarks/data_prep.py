r"""Benchmark of `data_prep.create_pretraining_data`: speed and peak memory.

    python -m benchmarks.data_prep [--corpus_mb=3] [--repeats=3]

Builds (once, cached in --work_dir) an English corpus from the Python standard
library's docstrings (`data_prep.builtin_corpus`) and a unigram SentencePiece
model on it, then runs the CLI in fresh subprocesses with 1 and 2 local
workers and as an Apache Beam pipeline on the DirectRunner with 2 worker
processes (`--runner=DirectRunner --direct_num_workers=2
--direct_running_mode=multi_processing`), all on the same corpus in one
invocation (`max_seq_length` 128, `dupe_factor` 2: the setting of the
official figure of about 470 instances/s and 670 MB on one core), and prints
a table of medians:

- instances/s: instances over the builder's own elapsed time (reading,
  tokenizing, masking, encoding, writing; worker start-up included; Python
  start-up excluded; for Beam, from the launch to the commit);
- per core: instances/s divided by the cores the run can use;
- instances per CPU s: instances over the CPU time (user + system) of the
  whole process tree, Python start-up included: the per-core throughput,
  unaffected by other load on a shared machine;
- peak memory: the largest sum of resident memory (VmRSS) over the process
  and its workers (Beam's worker processes included), sampled every 20 ms;
- vs local: instances/s over that of the local run with as many workers.
Every run's shards are compared with the first local run's: the Beam row
must write the same bytes.

A second table (one run each) repeats the corpus 1x, 4x, 16x: longer runs
amortize the start-up, and the local builder's peak memory does not grow with
corpus size (the DirectRunner's does: it keeps each step's output in memory).
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


def measure(corpus, model, out_dir, workers, args, env, beam=False):
    """One CLI run; returns a dict of measurements."""
    name = "%s%d" % ("beam" if beam else "w", workers)
    output = os.path.join(out_dir, name, "t.tfrecord")
    command = [
        sys.executable, "-m", "data_prep.create_pretraining_data",
        "--input_file=%s" % corpus, "--output_file=%s" % output,
        "--spm_model_file=%s" % model,
        "--max_seq_length=%d" % args.max_seq_length,
        "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
        "--dupe_factor=%d" % args.dupe_factor,
        "--num_output_shards=%d" % args.num_output_shards,
        "--chunk_mb=%g" % args.chunk_mb,
    ]
    if beam:
        command += ["--runner=DirectRunner", "--direct_num_workers=%d" % workers,
                    "--direct_running_mode=multi_processing"]
    else:
        command.append("--num_workers=%d" % workers)
    wall, cpu, peak_total, peak_main = run_measured(command, env)
    with open(output_lib.stats_path(output)) as f:
        stats = json.load(f)
    shards = []
    for path in stats["output_files"]:
        with open(path, "rb") as f:
            shards.append(hashlib.sha256(f.read()).hexdigest())
    return dict(instances=stats["instances"], elapsed=stats["elapsed_s"],
                wall=wall, cpu=cpu, peak_total=peak_total, peak_main=peak_main,
                read_mb=stats["read"]["bytes"] / 1e6, shards=shards)


def _runs(args):
    """`(label, workers, beam)` of each row, locals first."""
    rows = [("local", int(w), False) for w in args.workers.split(",") if w]
    rows += [("Beam DirectRunner", int(w), True)
             for w in args.beam_workers.split(",") if w]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus_mb", type=float, default=3.0)
    parser.add_argument("--vocab_size", type=int, default=30000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--dupe_factor", type=int, default=2)
    parser.add_argument("--chunk_mb", type=float, default=0.25)
    parser.add_argument("--num_output_shards", type=int, default=2)
    parser.add_argument("--workers", default="1,2",
                        help="Local worker counts ('' to skip).")
    parser.add_argument("--beam_workers", default="2",
                        help="DirectRunner worker processes ('' to skip).")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", default="1,4,16",
                        help="Corpus repetitions for the memory rows ('' to skip).")
    parser.add_argument("--work_dir",
                        default=os.path.join(tempfile.gettempdir(),
                                             "albert_data_prep_bench"))
    args = parser.parse_args()

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
    header = ("| runner | workers | instances | builder s | instances/s | "
              "per core | CPU s | instances per CPU s | peak RSS MB (all) | "
              "peak RSS MB (main) | vs local | same bytes |")
    print(header)
    print("|---|" + "---:|" * (header.count("|") - 3) + "---|")
    local_rates, reference = {}, None
    for label, workers, beam in _runs(args):
        runs = [measure(corpus, model, out_dir, workers, args, env, beam)
                for _ in range(args.repeats)]
        reference = reference or runs[0]["shards"]
        same = all(r["shards"] == reference for r in runs)
        med = {k: statistics.median(r[k] for r in runs)
               for k in runs[0] if k != "shards"}
        rate = med["instances"] / med["elapsed"]
        if not beam:
            local_rates[workers] = rate
        versus = (rate / local_rates[workers] if workers in local_rates
                  else float("nan"))
        used_cores = min(max(1, workers), cores)
        print("| %s | %d | %d | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f "
              "| %.2f | %s |" % (
                  label, workers, med["instances"], med["elapsed"], rate,
                  rate / used_cores, med["cpu"], med["instances"] / med["cpu"],
                  med["peak_total"], med["peak_main"], versus,
                  "yes" if same else "NO"), flush=True)

    scaling = [int(s) for s in args.scaling.split(",") if s]
    if scaling:
        print()
        print("| corpus | MB read | runner | workers | instances | instances/s "
              "| per core | instances per CPU s | peak RSS MB (all) |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
        for times in scaling:
            for label, workers, beam in _runs(args):
                run = measure(repeated_corpus(corpus, times), model, out_dir,
                              workers, args, env, beam)
                rate = run["instances"] / run["elapsed"]
                print("| %dx | %.1f | %s | %d | %d | %.0f | %.0f | %.0f | %.0f |"
                      % (times, run["read_mb"], label, workers,
                         run["instances"], rate,
                         rate / min(max(1, workers), cores),
                         run["instances"] / run["cpu"], run["peak_total"]),
                      flush=True)


if __name__ == "__main__":
    main()
