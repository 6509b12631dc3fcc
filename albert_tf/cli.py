"""The library's command-line programs (those that need no `export/`).

Each defines its flags only when run (from its options dataclass, in a
module that imports no TensorFlow, so `--help` answers at once) and calls
one library function, importing the library there; `run_training_program`
is what the training programs share (the official fine-tuning programs,
`albert_apps.run_classifier`, `albert_apps.run_squad` and
`albert_apps.run_race`, use it too).
"""

import logging as std_logging
import sys

from absl import logging

from albert_tf.training import output_folder
from albert_tf.training.errors import TrainingDivergedError
from albert_tf.training.errors import TrainingStopped
from foundation import flag_options
from foundation import safe_io
from foundation import tf_startup


def log_report(report, keys):
    """Logs the entries of `report` named by `keys` that are present, then
    a collapsed classifier's warning again (`collapse_warning`), last,
    where a user reads the outcome."""
    for key in keys:
        if key in report:
            logging.info("%s: %s", key, report[key])
    if "collapse_warning" in report:
        logging.warning("%s", report["collapse_warning"])


def strategy_for(options):
    """The `tf.distribute` strategy a training program's flags name
    (`--strategy`, `--tpu`, `--tpu_zone`, `--gcp_project`)."""
    # Here, not at the top: TensorFlow loads after the flags are read.
    from albert_tf.training import distribute
    return distribute.get_strategy(
        options.strategy, tpu=options.tpu, tpu_zone=options.tpu_zone,
        gcp_project=options.gcp_project)


def run_training_program(options_cls, run, doc, argv=None):
    """Runs a training program from the command line.

    Reads the flags into an `options_cls`, logs at INFO level and calls
    `run(options)`. A bad flag, a bad input or a run whose loss stops being
    finite ends the program with one line saying what went wrong, not a
    traceback.

    The program holds the lock on `--output_dir` for the whole run
    (training, evaluation, prediction and export): a second run into the
    same folder fails at once, before TensorFlow loads, with one line naming
    the folder and the holder's process id.

    SIGTERM or SIGINT during training ends the program after the current
    step with that step's checkpoint, one line saying so, and the exit
    status of the signal (143, 130); nothing is evaluated, predicted or
    exported after it. A run whose training loss ended at chance ends with
    its warning as the last log line.

    Args:
        options_cls: the program's options dataclass (its fields are the
            flags).
        run: `run(options)` does the work once TensorFlow is loaded.
        doc: the program's help text (its module docstring).
        argv: the command line (default: `sys.argv`).
    """
    logging.set_verbosity(logging.INFO)
    program = flag_options.program_name(argv)

    def locked_run(options):
        # The output is checked and locked before TensorFlow loads.
        safe_io.check_output_path(options.output_dir, output_folder.FLAG)
        try:
            with output_folder.hold(options.output_dir, program):
                tf_startup.import_tensorflow()
                report = run(options)
        except TrainingStopped as stop:
            # What is left behind on the way out stays quiet: this line
            # is the last word.
            std_logging.getLogger("tensorflow").setLevel(std_logging.CRITICAL)
            sys.stderr.write(f"{program}: {stop}\n")
            sys.exit(stop.exit_status)
        warning = (report or {}).get("train", {}).get("warning")
        if warning:
            logging.warning("%s", warning)
        return report

    flag_options.run_program(options_cls, locked_run, argv, doc=doc,
                             errors=flag_options.USER_ERRORS + (TrainingDivergedError,),
                             tensorflow=False)
