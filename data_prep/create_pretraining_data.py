r"""Builds ALBERT pretraining TFRecords (MLM + SOP) from text.

    python -m data_prep.create_pretraining_data \
        --input_file='corpus/*.txt.gz' --output_file=data/train.tfrecord \
        --spm_model_file=vocab/30k-clean.model --max_seq_length=512 \
        --dupe_factor=40 --num_workers=8 --num_output_shards=64

The flags and defaults are those of the official ALBERT script, plus
`--num_workers` and `--num_output_shards` (and a few memory/shuffle knobs).
Output: the shards (official schema, see `data_prep.schema`) and
`<output_file>.stats.json`. The same inputs and seed give byte-identical
output whatever `--num_workers` is. See `data_prep.pipeline` for the data
flow, the bounded memory and what the bounded shuffle means.
"""

import sys

from absl import app
from absl import flags

from data_prep import instances
from data_prep import pipeline
from data_prep import reader
from data_prep import vocab

_INPUT_FILE = flags.DEFINE_string(
    "input_file", None,
    "Input raw text: comma-separated paths or glob patterns (plain or gzip; "
    "gs:// and other tf.io.gfile paths work). One sentence per line, a blank "
    "line between documents.")
_OUTPUT_FILE = flags.DEFINE_string(
    "output_file", None,
    "Output TFRecord path, or comma-separated list of shard paths.")
_SPM_MODEL_FILE = flags.DEFINE_string(
    "spm_model_file", None, "The SentencePiece model (.model).")
_DO_LOWER_CASE = flags.DEFINE_bool(
    "do_lower_case", True, "Lowercase the text (must match the vocabulary).")
_DO_WHOLE_WORD_MASK = flags.DEFINE_bool(
    "do_whole_word_mask", True,
    "Mask whole words rather than single pieces.")
_FAVOR_SHORTER_NGRAM = flags.DEFINE_bool(
    "favor_shorter_ngram", True, "p(n) proportional to 1/n (else reversed).")
_RANDOM_NEXT_SENTENCE = flags.DEFINE_bool(
    "random_next_sentence", False,
    "Take segment B from another document half of the time (NSP-style) "
    "instead of swapping A and B (SOP).")
_MAX_SEQ_LENGTH = flags.DEFINE_integer(
    "max_seq_length", 512, "Maximum sequence length.")
_NGRAM = flags.DEFINE_integer("ngram", 3, "Longest masked n-gram, in words.")
_MAX_PREDICTIONS_PER_SEQ = flags.DEFINE_integer(
    "max_predictions_per_seq", 20,
    "Maximum number of masked LM predictions per sequence.")
_RANDOM_SEED = flags.DEFINE_integer(
    "random_seed", 12345, "Random seed for data generation.")
_DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 40,
    "Number of times to duplicate the input data (with different masks).")
_MASKED_LM_PROB = flags.DEFINE_float("masked_lm_prob", 0.15,
                                     "Masked LM probability.")
_SHORT_SEQ_PROB = flags.DEFINE_float(
    "short_seq_prob", 0.1,
    "Probability of creating sequences shorter than the maximum length.")
_NUM_WORKERS = flags.DEFINE_integer(
    "num_workers", 1,
    "Worker processes (1: work in the main process). Does not change the "
    "output.")
_NUM_OUTPUT_SHARDS = flags.DEFINE_integer(
    "num_output_shards", 1,
    "Output shards when --output_file is a single path: "
    "<output_file>-00000-of-0000N, ...")
_CHUNK_MB = flags.DEFINE_float(
    "chunk_mb", 1.0,
    "Text per work unit and per shuffle window, in MB. Memory grows with "
    "chunk_mb * dupe_factor * num_workers.")
_SHUFFLE_BUFFER_SIZE = flags.DEFINE_integer(
    "shuffle_buffer_size", 10000,
    "Records in the streaming shuffle buffer that mixes neighbouring chunks.")
_MAX_LINE_BYTES = flags.DEFINE_integer(
    "max_line_bytes", reader.DEFAULT_MAX_LINE_BYTES,
    "Longer input lines are skipped (and counted).")
_PROGRESS_INTERVAL = flags.DEFINE_float(
    "progress_interval_s", 30.0, "Seconds between progress log lines.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
    options = instances.InstanceOptions(
        max_seq_length=_MAX_SEQ_LENGTH.value,
        max_predictions_per_seq=_MAX_PREDICTIONS_PER_SEQ.value,
        masked_lm_prob=_MASKED_LM_PROB.value,
        short_seq_prob=_SHORT_SEQ_PROB.value,
        ngram=_NGRAM.value,
        do_whole_word_mask=_DO_WHOLE_WORD_MASK.value,
        favor_shorter_ngram=_FAVOR_SHORTER_NGRAM.value,
        random_next_sentence=_RANDOM_NEXT_SENTENCE.value)
    try:
        pipeline.create_pretraining_data(
            _INPUT_FILE.value, _OUTPUT_FILE.value, _SPM_MODEL_FILE.value,
            options=options,
            dupe_factor=_DUPE_FACTOR.value,
            random_seed=_RANDOM_SEED.value,
            do_lower_case=_DO_LOWER_CASE.value,
            num_workers=_NUM_WORKERS.value,
            num_output_shards=_NUM_OUTPUT_SHARDS.value,
            chunk_bytes=max(1, int(_CHUNK_MB.value * (1 << 20))),
            shuffle_buffer_size=_SHUFFLE_BUFFER_SIZE.value,
            max_line_bytes=_MAX_LINE_BYTES.value,
            progress_interval_s=_PROGRESS_INTERVAL.value)
    except (reader.InputError, vocab.SpecialPiecesError, ValueError) as e:
        sys.exit("create_pretraining_data: error: %s" % e)
    except OSError as e:  # Output directory not writable, disk full...
        sys.exit("create_pretraining_data: I/O error: %s" % e)


if __name__ == "__main__":
    flags.mark_flags_as_required(["input_file", "output_file", "spm_model_file"])
    app.run(main)
