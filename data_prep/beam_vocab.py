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
from data_prep import dask_runner
from data_prep import reader
from data_prep import tfrecord
from data_prep import vocab
from foundation import filesystems

_REMOTE = filesystems.BEAM
_SENTENCE, _READ, _SAMPLE = "sentence", "read", "sample"


class _KeyedSentences(beam.DoFn):
    """`(file index, path)` -> `("sentence", (key, place, sentence))` for
    its sentences, then `("read", counters)`: one output, since runners
    differ in how they hand a ParDo's tagged outputs to consumers."""

    def __init__(self, seed, do_lower_case):
        self._seed = seed
        self._do_lower_case = do_lower_case

    def process(self, element):
        index, path = element
        counters = reader.ReadCounters()
        for place, sentence in vocab.numbered_sentences(
                path, index, counters, self._do_lower_case, _REMOTE):
            yield _SENTENCE, (vocab.sentence_key(self._seed, place), place,
                              sentence)
        yield _READ, counters


def _of_kind(kind):
    """A FlatMap function keeping the values of the elements `(kind, v)`."""
    return lambda element: [element[1]] if element[0] == kind else []


def _write_sample(element, work_dir):
    """`(None, [("sample", sentences), ("read", counters)])` -> the sample
    (one sentence a line, corpus order) and the read counts; both through a
    temporary name, so a retry rewrites them."""
    parts = dict(element[1])
    ordered = sorted(parts.get(_SAMPLE, []), key=lambda entry: entry[1])
    text = "".join(sentence + "\n" for _, _, sentence in ordered)
    counters = parts.get(_READ, reader.ReadCounters())
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
    # Main inputs only: a side input is computed again by some runners
    # (the DaskRunner recomputes its whole graph for each task).
    root = beam.Pipeline(options=options)
    read = (root
            | "Files" >> beam.Create(list(enumerate(paths)))
            | "SpreadFiles" >> beam.Reshuffle()
            | "KeyedSentences" >> beam.ParDo(
                _KeyedSentences(seed, do_lower_case)))
    sentences = read | "Sentences" >> beam.FlatMap(_of_kind(_SENTENCE))
    if sample_size > 0:
        # A combine: `Top.Smallest` emits from `finish_bundle`, whose
        # outputs the DaskRunner drops.
        sample = sentences | "Smallest" >> beam.CombineGlobally(
            beam.combiners.TopCombineFn(sample_size, reverse=True)
        ).without_defaults()
    else:
        sample = sentences | "All" >> beam.CombineGlobally(
            beam.combiners.ToListCombineFn()).without_defaults()
    counters = (read
                | "ReadCounters" >> beam.FlatMap(_of_kind(_READ))
                | "ReadTotals" >> beam.CombineGlobally(
                    beam_pipeline.SumFn(reader.ReadCounters)).without_defaults()
                | "TagRead" >> beam.Map(lambda total: (_READ, total)))
    _ = ((sample | "TagSample" >> beam.Map(lambda top: (_SAMPLE, top)),
          counters)
         | "Parts" >> beam.Flatten()
         | "KeyParts" >> beam.Map(lambda part: (None, part))
         | "Together" >> beam.GroupByKey()
         | "WriteSample" >> beam.Map(_write_sample, work_dir))
    dask_runner.run(root, "data_prep-vocab-%s" % uuid.uuid4().hex)
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
    input_patterns, model_prefix = beam_pipeline.worker_paths(
        runner, options, input_file=input_patterns, model_prefix=model_prefix)
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
            raise beam_pipeline.as_one_line(e, runner) from None
        finally:
            filesystems.remove_tree(work_dir, _REMOTE)
        return vocab.train_from_sentences(
            sample, model_prefix, input_patterns, counters, len(paths),
            vocab_size=vocab_size, character_coverage=character_coverage,
            hard_vocab_limit=hard_vocab_limit, num_threads=num_threads,
            extra_trainer_options=extra_trainer_options)
