r"""Trains an ALBERT SentencePiece vocabulary.

    python -m data_prep.build_vocab --input_file=corpus/*.txt \
        --model_prefix=vocab/30k-clean --vocab_size=30000 --do_lower_case

Writes `<model_prefix>.model` and `<model_prefix>.vocab`: a unigram model with
`<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3, `[MASK]`=4 and the released user
symbols, trained on text preprocessed as for pretraining. See
`data_prep.vocab.train_vocab`.
"""

import sys

from absl import app
from absl import flags
from absl import logging

from data_prep import reader
from data_prep import vocab

_INPUT_FILE = flags.DEFINE_string(
    "input_file", None,
    "Text files: comma-separated paths or glob patterns, one sentence per "
    "line (plain or gzip; gs:// and other tf.io.gfile paths work).")
_MODEL_PREFIX = flags.DEFINE_string(
    "model_prefix", None, "Output prefix: writes <prefix>.model and .vocab.")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", 30000, "Number of pieces, special pieces included.")
_DO_LOWER_CASE = flags.DEFINE_bool(
    "do_lower_case", True,
    "Lowercase the text (use the same value for create_pretraining_data).")
_INPUT_SENTENCE_SIZE = flags.DEFINE_integer(
    "input_sentence_size", 10_000_000,
    "Most sentences held in memory: a uniform sample of the corpus "
    "(<= 0: all).")
_CHARACTER_COVERAGE = flags.DEFINE_float(
    "character_coverage", 0.9995, "Fraction of characters the model covers.")
_HARD_VOCAB_LIMIT = flags.DEFINE_bool(
    "hard_vocab_limit", True,
    "If false, vocab_size is a soft limit (for small corpora).")
_RANDOM_SEED = flags.DEFINE_integer(
    "random_seed", 12345, "Seed of the sentence sampling.")
_NUM_THREADS = flags.DEFINE_integer(
    "num_threads", None, "Trainer threads (default: the CPU count).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))
    try:
        model_path, vocab_path = vocab.train_vocab(
            _INPUT_FILE.value, _MODEL_PREFIX.value,
            vocab_size=_VOCAB_SIZE.value,
            do_lower_case=_DO_LOWER_CASE.value,
            input_sentence_size=_INPUT_SENTENCE_SIZE.value,
            character_coverage=_CHARACTER_COVERAGE.value,
            hard_vocab_limit=_HARD_VOCAB_LIMIT.value,
            seed=_RANDOM_SEED.value,
            num_threads=_NUM_THREADS.value)
    except (reader.InputError, vocab.SpecialPiecesError) as e:
        sys.exit("build_vocab: error: %s" % e)
    except RuntimeError as e:  # Raised by the SentencePiece trainer.
        sys.exit("build_vocab: SentencePiece training failed: %s" % e)
    logging.info("Wrote %s and %s.", model_path, vocab_path)


if __name__ == "__main__":
    flags.mark_flags_as_required(["input_file", "model_prefix"])
    app.run(main)
