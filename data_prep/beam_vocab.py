r"""The vocabulary's sentence sample drawn by an Apache Beam pipeline.

    python -m data_prep.build_vocab --runner=DataflowRunner \
        --input_file='gs://bucket/corpus/*.txt.gz' --model_prefix=vocab/30k-clean \
        --input_sentence_size=10000000 --temp_location=gs://bucket/tmp [...]

The files are read in parallel (one element per file); every non-blank line
is preprocessed and keyed by a seeded hash of its place (`vocab.sentence_key`)
and `Top.Smallest` keeps the `--input_sentence_size` smallest keys: the same
uniform sample as the local `vocab.sample_sentences`, whatever order the
workers read in. The sample is written to `--temp_location` (beside the
model prefix when it is not set, which only suits local runners) and read
back here, where SentencePiece trains on it: training stays on one machine.
"""

import json
import os
import uuid

import apache_beam as beam
from apache_beam.options import pipeline_options as beam_options

from data_prep import beam_pipeline
from data_prep import filesystems
from data_prep import reader
from data_prep import tfrecord
from data_prep import vocab

_REMOTE = filesystems.BEAM
_READ_COUNTERS = "read_counters"


class _KeyedSentences(beam.DoFn):
    """`(file index, path)` -> `(key, place, sentence)` for its sentences;
    the file's read counters go to a side output."""

    def __init__(self, seed, do_lower_case):
        self._seed = seed
        self._do_lower_case = do_lower_case

    def process(self, element):
        index, path = element
        counters = reader.ReadCounters()
        for place, sentence in vocab.numbered_sentences(
                path, index, counters, self._do_lower_case, _REMOTE):
            yield vocab.sentence_key(self._seed, place), place, sentence
        yield beam.pvalue.TaggedOutput(_READ_COUNTERS, counters)


def _write_sample(keyed, counters, work_dir):
    """Writes the sample (one sentence a line, corpus order) and the read
    counts; both through a temporary name, so a retry rewrites them."""
    ordered = sorted(keyed, key=lambda entry: entry[1])
    text = "".join(sentence + "\n" for _, _, sentence in ordered)
    tfrecord.write_text_atomically(work_dir + "/sample.txt", text, _REMOTE)
    tfrecord.write_text_atomically(work_dir + "/read.json",
                                   json.dumps(counters.as_dict()), _REMOTE)


def _work_dir(options, model_prefix):
    """Where workers leave the sample for this process to read."""
    temp = options.view_as(beam_options.GoogleCloudOptions).temp_location
    base = temp or os.path.dirname(os.path.abspath(model_prefix))
    # Hidden: no glob of the user's files matches it.
    return "%s/.vocab-sample-%s" % (base.rstrip("/"), uuid.uuid4().hex[:12])


def sample_sentences(paths, sample_size, seed, do_lower_case, options,
                     work_dir):
    """Draws `vocab.sample_sentences`'s sample with a Beam pipeline.

    Args:
        paths: the text files.
        sample_size: the most sentences kept; <= 0 keeps all.
        seed: seed of the sampling.
        do_lower_case: whether the text is lowercased.
        options: Beam `PipelineOptions`.
        work_dir: a new directory that the workers and this process reach.

    Returns:
        `(sentences, read counters)`: the sample in corpus order, and a
        `reader.ReadCounters` of the whole corpus.
    """
    with beam.Pipeline(options=options) as root:
        read = (root
                | "Files" >> beam.Create(list(enumerate(paths)))
                | "SpreadFiles" >> beam.Reshuffle()
                | "KeyedSentences" >> beam.ParDo(
                    _KeyedSentences(seed, do_lower_case)).with_outputs(
                        _READ_COUNTERS, main="sentences"))
        if sample_size > 0:
            sample = read.sentences | "Smallest" >> beam.combiners.Top.Smallest(
                sample_size)
        else:
            sample = read.sentences | "All" >> beam.combiners.ToList()
        counters = (read[_READ_COUNTERS]
                    | "ReadTotals" >> beam.CombineGlobally(
                        beam_pipeline.SumFn(reader.ReadCounters)))
        _ = (sample
             | "WriteSample" >> beam.Map(
                 _write_sample, beam.pvalue.AsSingleton(counters), work_dir))
    text = reader.read_bytes(work_dir + "/sample.txt", _REMOTE).decode("utf-8")
    counts = json.loads(reader.read_bytes(work_dir + "/read.json", _REMOTE))
    # Preprocessed sentences hold no newline; split on nothing else.
    return text.split("\n")[:-1], reader.ReadCounters(**counts)


def train_vocab(input_patterns, model_prefix, runner, pipeline_args=(),
                vocab_size=30000, do_lower_case=True,
                input_sentence_size=10_000_000, character_coverage=0.9995,
                hard_vocab_limit=True, seed=12345, num_threads=None,
                extra_trainer_options=None):
    """`vocab.train_vocab` with the sample drawn on a Beam runner.

    The arguments not listed are those of `vocab.train_vocab`; the model
    equals the local one's (the same sample, in the same order).

    Args:
        runner: the Beam runner (see `beam_pipeline.pipeline_options`).
        pipeline_args: other Beam pipeline options, as command-line strings.

    Returns:
        The paths `(model_path, vocab_path)`.

    Raises:
        reader.InputError: an input is missing, unreadable or holds no text.
        ValueError: bad Beam arguments.
    """
    options = beam_pipeline.pipeline_options(runner, pipeline_args)
    vocab.check_outputs(model_prefix)
    paths = reader.text_files(
        reader.expand_input_patterns(input_patterns, _REMOTE), _REMOTE)
    vocab.check_not_inputs(paths, model_prefix)
    with vocab.output_lock(model_prefix):
        work_dir = _work_dir(options, model_prefix)
        try:
            sample, counters = sample_sentences(
                paths, input_sentence_size, seed, do_lower_case, options,
                work_dir)
        except Exception as e:  # The runner wraps the transform's error.
            raise beam_pipeline.as_one_line(e) from None
        finally:
            filesystems.remove_tree(work_dir, _REMOTE)
        return vocab.train_from_sentences(
            sample, model_prefix, input_patterns, counters, len(paths),
            vocab_size=vocab_size, character_coverage=character_coverage,
            hard_vocab_limit=hard_vocab_limit, num_threads=num_threads,
            extra_trainer_options=extra_trainer_options)
