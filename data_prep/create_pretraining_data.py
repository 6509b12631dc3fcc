"""Builds ALBERT pretraining TFRecords (MLM + SOP) from text.

With the official script's flags and defaults, plus `--num_workers`,
`--num_output_shards` and a few memory knobs, it writes the shards in the
official schema, in one global random order, and a statistics file beside
them; the same inputs and seed give the same bytes for any worker count,
and `--runner` runs the same work as an Apache Beam pipeline. Guide:
docs/pretraining_data.md#examples (Beam: docs/beam.md).
"""

import dataclasses
from typing import Optional

from data_prep import instances
from data_prep import pipeline
from data_prep import reader
from foundation import filesystems
from foundation import flag_options as flag_options_lib
from foundation.flag_options import option


@dataclasses.dataclass
class Options:
    """The program's options (one flag each, official names and defaults)."""

    input_file: str = option(
        None,
        "Input raw text: comma-separated paths or glob patterns (plain or "
        "gzip; gs:// works, through tf.io.gfile, or Beam's FileSystems with "
        "--runner). One sentence per "
        "line, a blank line between documents. Files that are not text "
        "(TFRecords, JSON, binary) are skipped.", required=True)
    output_file: str = option(
        None,
        "Output TFRecord path, or comma-separated list of shard paths. The "
        "statistics go to <directory>/stats.<name>.json (the first path's "
        "name). One run at a time writes an output.", required=True)
    spm_model_file: str = option(
        None, "The SentencePiece model (.model).", required=True)
    do_lower_case: bool = option(
        True, "Lowercase the text (must match the vocabulary).")
    do_whole_word_mask: bool = option(
        True, "Mask whole words rather than single pieces.")
    favor_shorter_ngram: bool = option(
        True, "p(n) proportional to 1/n (else reversed).")
    random_next_sentence: bool = option(
        False,
        "Take segment B from another document half of the time (NSP-style) "
        "instead of swapping A and B (SOP).")
    max_seq_length: int = option(512, "Maximum sequence length.", minimum=5,
                                 maximum=65536)
    ngram: int = option(3, "Longest masked n-gram, in words.", minimum=1,
                        maximum=1000)
    max_predictions_per_seq: int = option(
        20,
        "Maximum number of masked LM predictions per sequence (0 only with "
        "--dynamic_masking).", minimum=0, maximum=65536)
    random_seed: int = option(
        12345, "Random seed for data generation.", minimum=0)
    dupe_factor: int = option(
        40,
        "Number of times to duplicate the input data (with different masks).",
        minimum=1)
    masked_lm_prob: float = option(
        0.15, "Masked LM probability.", above=0, maximum=1)
    short_seq_prob: float = option(
        0.1,
        "Probability of creating sequences shorter than the maximum length.",
        minimum=0, maximum=1)
    num_workers: int = option(
        1,
        "Worker processes of the local builder (1: work in the main "
        "process). Does not change the output.", minimum=1, maximum=1024)
    num_output_shards: int = option(
        1,
        "Output shards when --output_file is a single path: "
        "<output_file>-00000-of-0000N, ... A rerun removes the earlier run's "
        "shards of the same --output_file once the new ones are complete.",
        minimum=1, maximum=99999)
    chunk_mb: float = option(
        1.0,
        "Text per work unit, in MB (and the shuffle window with "
        "--noglobal_shuffle). Memory grows with chunk_mb * dupe_factor * "
        "num_workers.", above=0, maximum=4096)
    global_shuffle: bool = option(
        True,
        "Write all records in one global random order (two passes through "
        "temporary files beside the output). --noglobal_shuffle: the chunk "
        "order, each chunk's records shuffled among themselves (one pass).")
    shuffle_memory_mb: float = option(
        32.0,
        "Records sorted in memory at a time by the global shuffle, in MB (one "
        "bucket of the temporary files). Does not change the output.",
        minimum=1)
    dynamic_masking: bool = option(
        False,
        "Write the records without masks (no masked_lm_* features), for "
        "run_pretraining --dynamic_masking, which masks them afresh each "
        "epoch.")
    runner: Optional[str] = option(
        None,
        "Run as an Apache Beam pipeline on this runner (DaskRunner with "
        "--dask_client_address=tcp://HOST:PORT, DirectRunner, PrismRunner, "
        "DataflowRunner, FlinkRunner, SparkRunner, ...); Beam's other "
        "pipeline options follow on the command line. Local paths are made "
        "absolute; one the runner's workers cannot reach is refused. Unset: "
        "the local builder. Both write the same bytes.")
    max_line_bytes: int = option(
        reader.DEFAULT_MAX_LINE_BYTES,
        "Longer input lines are skipped (and counted).", minimum=1,
        maximum=1 << 40)
    progress_interval_s: float = option(
        30.0, "Seconds between progress log lines.", above=0)


def main(options, pipeline_args=()):
    """Runs the builder with the program's options: locally, or on a Beam
    runner with `--runner` (`pipeline_args`: Beam's pipeline options).

    Returns:
        The statistics dict.
    """
    # The flags of the same names.
    instance_options = instances.InstanceOptions(**{
        field.name: getattr(options, field.name)
        for field in dataclasses.fields(instances.InstanceOptions)})
    common = dict(
        options=instance_options,
        dupe_factor=options.dupe_factor,
        random_seed=options.random_seed,
        do_lower_case=options.do_lower_case,
        num_output_shards=options.num_output_shards,
        chunk_bytes=max(1, int(options.chunk_mb * (1 << 20))),
        max_line_bytes=options.max_line_bytes,
        dynamic_masking=options.dynamic_masking,
        global_shuffle=options.global_shuffle,
        shuffle_memory_bytes=int(options.shuffle_memory_mb * (1 << 20)))
    if options.runner:
        filesystems.require_beam()
        from data_prep import beam_pipeline  # Imports Apache Beam.
        return beam_pipeline.create_pretraining_data(
            options.input_file, options.output_file, options.spm_model_file,
            runner=options.runner, pipeline_args=pipeline_args, **common)
    return pipeline.create_pretraining_data(
        options.input_file, options.output_file, options.spm_model_file,
        num_workers=options.num_workers,
        progress_interval_s=options.progress_interval_s, **common)


if __name__ == "__main__":
    flag_options_lib.run_program(Options, main, doc=__doc__, pass_through="runner",
                                 tensorflow=False)
