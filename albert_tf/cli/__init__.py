"""The library's command-line programs (those that need no `export/`).

Each defines its flags only when run (from its options dataclass, in a
module that imports no TensorFlow, so `--help` answers at once) and calls
one library function, importing the library there; `run_training_program`
is what the training programs share (the fine-tuning programs that export,
`albert_apps.run_classifier` and `albert_apps.run_squad`, use it too).
"""

from absl import logging

from data_prep import options as options_lib

from albert_tf.training.options import TrainingDivergedError


def log_report(report, keys):
    """Logs the entries of `report` named by `keys` that are present."""
    for key in keys:
        if key in report:
            logging.info("%s: %s", key, report[key])


def run_training_program(options_cls, run, doc, argv=None):
    """Runs a training program: INFO logging, flags from `options_cls`, and
    one line for a bad option or input or a diverging run."""
    logging.set_verbosity(logging.INFO)
    options_lib.run(options_cls, run, argv, doc=doc,
                    errors=options_lib.USER_ERRORS + (TrainingDivergedError,))
