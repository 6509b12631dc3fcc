"""Runs the main job end to end: `python -m albert_apps.quickstart`.

Writes a corpus (docstrings of the standard library and the installed
packages, or --input_file), trains a SentencePiece vocabulary, builds
pretraining TFRecords, pretrains a small ALBERT, exports it as SavedModels,
measures the exported encoder on tasks of held-out text (linear probes,
against the same model from random initialization), fine-tunes it on one,
serves the fine-tuned classifier and queries the SavedModels; everything goes
under --output_dir, and running
again resumes. See `albert_apps.quickstart`.
"""

import dataclasses

from absl import logging

from albert_apps.quickstart import inputs
from albert_apps.quickstart.inputs import QuickstartOptions
from foundation import flag_options
from foundation import tf_startup


def run_and_print(options):
    """Runs the job with `options` and prints the report.

    The flags, the corpus and the output folder are checked, and the folder
    locked, before TensorFlow loads: a mistake is one line at once.
    """
    arguments = dataclasses.asdict(options)
    with inputs.claim_output(**arguments):
        tf_startup.import_tensorflow()
        from albert_apps import quickstart
        from albert_apps.quickstart import job
        report = job.run_claimed(**arguments)
    print()
    print(quickstart.format_report(report), end="")
    print("total %.0f s" % report.seconds)
    return report


def main(argv=None):
    logging.set_verbosity(logging.INFO)
    flag_options.run_program(QuickstartOptions, run_and_print, argv, doc=__doc__,
                             tensorflow=False)


if __name__ == "__main__":
    main()
