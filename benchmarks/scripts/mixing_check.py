"""The block-divergence ratio of the builder's output on real text, every way
of running it, and whether all ways write the same bytes.

    python -m benchmarks.scripts.mixing_check [--corpus_mb=2] [--dupe_factor=5]

Real text: Python standard-library docstrings in corpus order (module after
module, `data_prep.builtin_corpus`), several 1 MB chunks. Records as the
quickstart builds them (`max_seq_length` 64, `chunk_mb` 1, a vocabulary of
4,000 pieces). Runs, one each: the chunk order (`--noglobal_shuffle`, the
order every earlier version wrote), and the global order locally with 1 and
2 workers and on Beam's DirectRunner in both running modes with 1 and 2
workers. Prints a table: the ratio (`data_prep.mixing`: 1 for a random
order), the instances, the seconds, and whether the shards are the bytes of
the local 1-worker run.
"""

import argparse
import hashlib
import os
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if not __package__:
    sys.path[0] = _ROOT

from data_prep import builtin_corpus  # noqa: E402
from data_prep import instances  # noqa: E402
from data_prep import pipeline  # noqa: E402
from data_prep import vocab  # noqa: E402

RUNS = (
    ("local, chunk order", dict(global_shuffle=False)),
    ("local", dict(num_workers=1)),
    ("local", dict(num_workers=2)),
    ("Beam in_memory", dict(beam="in_memory", workers=1)),
    ("Beam in_memory", dict(beam="in_memory", workers=2)),
    ("Beam multi_processing", dict(beam="multi_processing", workers=1)),
    ("Beam multi_processing", dict(beam="multi_processing", workers=2)),
)


def prepare(work_dir, corpus_mb, vocab_size):
    """The corpus and its vocabulary (cached in `work_dir`)."""
    os.makedirs(work_dir, exist_ok=True)
    corpus = os.path.join(work_dir, "corpus_%gmb.txt" % corpus_mb)
    if not os.path.exists(corpus):
        builtin_corpus.write_corpus(
            corpus, max_chars=int(corpus_mb * 1e6),
            roots=builtin_corpus.source_roots(include_site_packages=True))
    prefix = os.path.join(work_dir, "spm_%gmb_%d" % (corpus_mb, vocab_size))
    if not os.path.exists(prefix + ".model"):
        vocab.train_vocab(corpus, prefix, vocab_size=vocab_size,
                          hard_vocab_limit=False)
    return corpus, prefix + ".model"


def build(corpus, model, output, dupe_factor, num_output_shards, settings):
    """One run; returns its statistics."""
    settings = dict(settings)
    common = dict(
        options=instances.InstanceOptions(max_seq_length=64,
                                          max_predictions_per_seq=10),
        dupe_factor=dupe_factor, num_output_shards=num_output_shards,
        chunk_bytes=1 << 20)
    mode = settings.pop("beam", None)
    if mode is None:
        return pipeline.create_pretraining_data(corpus, output, model,
                                                **common, **settings)
    from data_prep import beam_pipeline

    return beam_pipeline.create_pretraining_data(
        corpus, output, model, runner="DirectRunner", pipeline_args=[
            "--direct_num_workers=%d" % settings["workers"],
            "--direct_running_mode=%s" % mode], **common)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus_mb", type=float, default=2.0)
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--num_output_shards", type=int, default=2)
    parser.add_argument("--work_dir", default=os.path.join(
        tempfile.gettempdir(), "albert_mixing_check"))
    args = parser.parse_args()
    corpus, model = prepare(args.work_dir, args.corpus_mb, args.vocab_size)
    out_dir = tempfile.mkdtemp(dir=args.work_dir)
    print("corpus: %s (%.2f MB), dupe_factor %d, max_seq_length 64, chunk 1 "
          "MB, %d shards" % (corpus, os.path.getsize(corpus) / 1e6,
                             args.dupe_factor, args.num_output_shards))
    print()
    print("| run | workers | instances | block-divergence ratio | s | "
          "same bytes as local 1 worker |")
    print("|---|---:|---:|---:|---:|---|")
    reference = None
    for index, (label, settings) in enumerate(RUNS):
        output = os.path.join(out_dir, str(index), "t.tfrecord")
        start = time.time()
        stats = build(corpus, model, output, args.dupe_factor,
                      args.num_output_shards, settings)
        seconds = time.time() - start
        digest = [hashlib.sha256(open(p, "rb").read()).hexdigest()
                  for p in stats["output_files"]]
        if label == "local" and reference is None:
            reference = digest
        same = "-" if reference is None or "chunk" in label else (
            "yes" if digest == reference else "NO")
        print("| %s | %d | %d | %.3f | %.1f | %s |" % (
            label, settings.get("num_workers", settings.get("workers", 1)),
            stats["instances"], stats["mixing"]["block_divergence_ratio"],
            seconds, same), flush=True)


if __name__ == "__main__":
    main()
