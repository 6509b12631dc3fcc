r"""Trains an ALBERT SentencePiece vocabulary.

    python -m data_prep.build_vocab --input_file=corpus/*.txt \
        --model_prefix=vocab/30k-clean --vocab_size=30000 --do_lower_case

Writes `<model_prefix>.model` and `<model_prefix>.vocab`: a unigram model with
`<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3, `[MASK]`=4 and the released user
symbols, trained on text preprocessed as for pretraining. Input files that are
not text (TFRecords, JSON, binary) are skipped and named in the log. The two
files appear whole or not at all (written under hidden temporary names and
checked), one run at a time writes a prefix (a second fails at once, naming
the first's process id), and a `--vocab_size` the corpus cannot give is one
line naming the flag. See `data_prep.vocab.train_vocab`.

With `--runner=DaskRunner --dask_client_address=tcp://HOST:PORT` (or
DataflowRunner, any Beam runner) the sentence sample is
drawn by an Apache Beam pipeline reading the files in parallel, the same
sample as the local read (`data_prep.beam_vocab`); SentencePiece then trains
here. Beam's other pipeline options follow on the command line
(`--temp_location` is where the sample travels back).
"""

import dataclasses
from typing import Optional

from absl import logging

from data_prep import vocab
from foundation import filesystems
from foundation import flag_options as flag_options_lib
from foundation.flag_options import option


@dataclasses.dataclass
class Options:
    """The program's options (one flag each)."""

    input_file: str = option(
        None,
        "Text files: comma-separated paths or glob patterns, one sentence per "
        "line (plain or gzip; gs:// works, through tf.io.gfile, or Beam's "
        "FileSystems with --runner).",
        required=True)
    model_prefix: str = option(
        None,
        "Output prefix: writes <prefix>.model and .vocab (whole or not at "
        "all; one run at a time).", required=True)
    vocab_size: int = option(
        30000,
        "Number of pieces, special pieces included (more than the corpus's "
        "distinct characters plus 13).", minimum=14, maximum=1_000_000)
    do_lower_case: bool = option(
        True,
        "Lowercase the text (use the same value for create_pretraining_data).")
    input_sentence_size: int = option(
        10_000_000,
        "Most sentences held in memory: a uniform sample of the corpus "
        "(<= 0: all).")
    character_coverage: float = option(
        0.9995, "Fraction of characters the model covers.", above=0,
        maximum=1)
    hard_vocab_limit: bool = option(
        True, "If false, vocab_size is a soft limit (for small corpora).")
    random_seed: int = option(12345, "Seed of the sentence sampling.")
    num_threads: Optional[int] = option(
        None, "Trainer threads (default: the CPU count).", minimum=1,
        maximum=1024)
    runner: Optional[str] = option(
        None,
        "Draw the sentence sample with an Apache Beam pipeline on this runner "
        "(DaskRunner with --dask_client_address=tcp://HOST:PORT, "
        "DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, ...); "
        "Beam's other pipeline options follow on the command line. Unset: "
        "read the corpus here. The sample is the same.")


def main(options, pipeline_args=()):
    """Runs `vocab.train_vocab` with the program's options (the sample drawn
    on a Beam runner with `--runner`; `pipeline_args`: Beam's options).

    Raises:
        ValueError: bad input, or the SentencePiece trainer failed (its
            message, which names the problem).
    """
    common = dict(
        vocab_size=options.vocab_size,
        do_lower_case=options.do_lower_case,
        input_sentence_size=options.input_sentence_size,
        character_coverage=options.character_coverage,
        hard_vocab_limit=options.hard_vocab_limit,
        seed=options.random_seed,
        num_threads=options.num_threads)
    try:
        if options.runner:
            filesystems.require_beam()
            from data_prep import beam_vocab  # Imports Apache Beam.
            model_path, vocab_path = beam_vocab.train_vocab(
                options.input_file, options.model_prefix, options.runner,
                pipeline_args, **common)
        else:
            model_path, vocab_path = vocab.train_vocab(
                options.input_file, options.model_prefix, **common)
    except RuntimeError as e:  # The trainer's, if `vocab` did not say it.
        raise ValueError("SentencePiece training failed: %s"
                         % str(e).splitlines()[0]) from e
    logging.info("Wrote %s and %s.", model_path, vocab_path)


if __name__ == "__main__":
    flag_options_lib.run_program(Options, main, doc=__doc__, pass_through="runner",
                                 tensorflow=False)
