"""The errors a training run ends with, and the line that names a cause.

This module imports no TensorFlow, so that a program names these errors in
one line (`albert_tf.cli`) without loading the training code first.
"""

import re


class TrainingDivergedError(RuntimeError):
    """The loss or the weights became NaN or infinite.

    Raised by the `Trainer` before anything is saved, so that checkpoint
    rotation never removes the good checkpoints.
    """


class CheckpointUnreadableError(ValueError):
    """A checkpoint's files are missing, truncated or corrupt (the message
    names the checkpoint and the cause)."""


class TrainingStopped(KeyboardInterrupt):
    """SIGTERM or SIGINT stopped a training run after its current step.

    Raised by the `Trainer` once the checkpoint of that step is written, so
    that nothing after training (evaluation, prediction, export) runs. It is
    a `KeyboardInterrupt`, so no `except Exception` swallows the stop.

    Args:
        signal_name: "SIGTERM" or "SIGINT".
        signal_number: its number (the exit status is 128 + it).
        step: the step the run stopped at.
        checkpoint: the checkpoint holding that step (None: the run stopped
            before its first step and there is none).
        fresh: whether `checkpoint` was written by this stop.

    Example:

    ```python
    try:
        trainer.train()
    except TrainingStopped as stop:
        print(stop)  # stopped by SIGTERM at step 40 (saved runs/x/ckpt-40); ...
        raise SystemExit(stop.exit_status)  # 143
    ```
    """

    def __init__(self, signal_name, signal_number, step, checkpoint,
                 fresh=True):
        super().__init__(signal_name, step, checkpoint)
        self.signal_name, self.signal_number = signal_name, signal_number
        self.step, self.checkpoint, self.fresh = step, checkpoint, fresh

    @property
    def exit_status(self):
        """128 + the signal's number, as a shell reports a process the
        signal ended (143 for SIGTERM, 130 for SIGINT)."""
        return 128 + self.signal_number

    def __str__(self):
        if self.checkpoint is None:
            saved = "nothing trained yet, nothing saved"
        elif self.fresh:
            saved = f"saved {self.checkpoint}"
        else:
            saved = f"its checkpoint {self.checkpoint} was already saved"
        return (f"stopped by {self.signal_name} at step {self.step} "
                f"({saved}); run the same command to resume")


def op_error_summary(error):
    """The line of a TensorFlow op error that says what went wrong (its
    message also carries the graph's call stack and node names)."""
    lines = [line.strip() for line in error.message.splitlines()]
    for line in reversed(lines):
        if line and not line.startswith(("[[", "File ", "Detected at node")):
            line = re.sub(r"\s*\[Op:[^\]]*\]$", "", line)
            match = re.match(r"assertion failed: \[(.*)\]$", line)
            return match.group(1) if match else line
    return type(error).__name__
