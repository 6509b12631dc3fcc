"""Runs the main job end to end: `python -m albert_apps.quickstart`.

Writes a corpus (docstrings of the standard library and the installed
packages, or --input_file), trains a SentencePiece vocabulary, builds
pretraining TFRecords, pretrains a small ALBERT, exports it as SavedModels,
measures the exported encoder on tasks of held-out text (linear probes,
against the same model from random initialization), fine-tunes it on one,
serves the fine-tuned classifier and queries the SavedModels; everything goes under --output_dir, and running
again resumes. See `albert_apps.quickstart`.
"""

import dataclasses
from typing import Optional

from absl import logging

from data_prep import options as options_lib
from data_prep.options import option

from albert_apps.quickstart import budget


@dataclasses.dataclass
class QuickstartOptions:
    """The program's flags (the arguments of `quickstart.run` a user sets
    most)."""

    output_dir: str = option("runs/quickstart", "Where every artifact goes.")
    input_file: Optional[str] = option(
        None, "Text corpus (one sentence a line, blank line between "
        "documents); default: the standard library's docstrings.")
    max_corpus_chars: int = option(
        3_000_000, "Cap on the pretraining text (characters).")
    vocab_size: int = option(4000, "SentencePiece pieces (a soft limit).")
    max_seq_length: int = option(64, "Tokens a record.")
    num_train_steps: int = option(budget.NUM_TRAIN_STEPS,
                                  "Pretraining steps.")
    train_seconds: float = option(
        budget.TRAIN_SECONDS, "Time budget of pretraining in this run "
        "(seconds; 0: none): "
        "training stops, saving a checkpoint, once it is spent, even before "
        "num_train_steps; running again continues from there.")
    train_batch_size: int = option(32, "Batch size.")
    dupe_factor: int = option(10, "Maskings of each training document.")
    dtype: str = option(
        "auto", "Pretraining precision: bfloat16 (mixed, float32 variables), "
        "float32, or auto: bfloat16 where the CPU or accelerator has fast "
        "bfloat16 matmuls (AVX512_BF16, AMX, TPU, recent GPUs), else "
        "float32.", choices=("auto", "float32", "bfloat16"))


def run_and_print(options):
    """Runs the job with `options` and prints the report."""
    from albert_apps import quickstart  # pylint: disable=import-outside-toplevel
    report = quickstart.run(**dataclasses.asdict(options))
    print()
    print(quickstart.format_report(report), end="")
    print("total %.0f s" % report["seconds"])
    return report


def main(argv=None):
    logging.set_verbosity(logging.INFO)
    options_lib.run(QuickstartOptions, run_and_print, argv, doc=__doc__)


if __name__ == "__main__":
    main()
