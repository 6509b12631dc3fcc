"""The statistics of a pretraining-data run: counters, totals, the file.

Workers count what they see per chunk (`COUNTER_NAMES`, plus an n-gram
histogram); the main process sums them (`Totals`; a Beam pipeline combines
partial sums with `merge`) and writes one JSON file
beside the shards (its name: `data_prep.output.stats_path`) with the counts,
the fractions that show the masking and pairing worked as intended, what was
skipped, how well the output order is mixed (`mixing`, added by the
builders: `data_prep.mixing`) and the run's settings.
"""

from absl import logging

# Per-chunk counts kept by the workers, summed by the main process.
COUNTER_NAMES = (
    "chunks", "documents", "sentences", "empty_sentences",
    "one_sentence_documents", "long_sentences", "instances", "tokens",
    "maskable_tokens", "masked_tokens", "swapped_instances", "short_instances",
    "truncated_instances", "random_next_instances", "split_sentences",
    "unpairable_chunks",
)


class Totals:
    """Sums the per-chunk counters of the workers."""

    def __init__(self, ngram):
        self.counts = dict.fromkeys(COUNTER_NAMES, 0)
        self.ngram_counts = [0] * (ngram + 1)

    def add(self, counters):
        """Adds one chunk's counters (a worker's result)."""
        for key in COUNTER_NAMES:
            self.counts[key] += counters[key]
        self.ngram_counts = [a + b for a, b in
                             zip(self.ngram_counts, counters["ngram_counts"])]

    def merge(self, other):
        """Adds another `Totals` (sums made apart, as by a Beam combine)."""
        self.add(dict(other.counts, ngram_counts=other.ngram_counts))
        return self


def add_run(stats, input_files, output_files, records_per_shard, elapsed,
            settings):
    """Adds the run's files, speed and settings to `stats` (in place)."""
    stats.update(
        input_files=input_files, output_files=output_files,
        records_per_shard=records_per_shard,
        elapsed_s=round(elapsed, 3),
        instances_per_s=round(stats["instances"] / max(elapsed, 1e-9), 1),
        settings=settings)


def _fraction(part, whole):
    return round(part / whole, 6) if whole else 0.0


def statistics(totals, read_counters, options):
    """The statistics file's content (plain JSON types)."""
    ngram_counts = totals.ngram_counts
    totals = totals.counts
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


def log_summary(stats, read_counters, stats_path):
    """Logs the run in one line, then one line per kind of skip."""
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
