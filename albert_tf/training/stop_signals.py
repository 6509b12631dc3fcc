"""Stop means stop: SIGTERM and SIGINT end a training loop after its step.

The `Trainer` runs `iterations_per_loop` steps inside one compiled call, and
Python runs a signal handler only in the main thread, between bytecodes:
not while that thread waits in the call. So while a run trains, the
signal's number is also written to a pipe (`signal.set_wakeup_fd`) that a
watcher thread reads; the thread sets a `tf.Variable` that the compiled
loop reads before each step, so the loop returns after the step it is in
with the number of steps done. The `Trainer` then saves that step and
raises `TrainingStopped`. A second signal changes nothing (the save it
would interrupt completes). See docs/training_runs.md.
"""

import contextlib
import os
import signal
import threading

import tensorflow as tf
from absl import logging

# The signals that stop a run, by number.
SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}


class StopSignals:
    """A stop flag that SIGTERM and SIGINT set while `catching` holds.

    Create it outside any strategy scope: the flag is one variable on the
    host, read by the compiled loop of every replica.

    Example:

    ```python
    stop = StopSignals()
    with stop.catching():
        ...  # a compiled loop reading `stop.flag` before each step
    if stop.requested:
        print(stop.signal_name)  # "SIGTERM"
    ```
    """

    def __init__(self):
        with tf.device("/CPU:0"):
            self.flag = tf.Variable(False, trainable=False,
                                    name="stop_requested")
        self.signal_number = None
        self._lock = threading.Lock()

    @property
    def requested(self):
        """Whether a signal asked the run to stop."""
        return self.signal_number is not None

    @property
    def signal_name(self):
        return SIGNALS.get(self.signal_number)

    def request(self, signal_number):
        """Asks the run to stop (the first request is logged; the others
        change nothing)."""
        with self._lock:
            if self.signal_number is not None:
                return
            self.signal_number = signal_number
        self.flag.assign(True)
        logging.warning("%s: stopping after the current step (its "
                        "checkpoint is saved, then the program exits; "
                        "nothing is evaluated, predicted or exported).",
                        SIGNALS.get(signal_number, signal_number))

    @contextlib.contextmanager
    def catching(self):
        """Catches SIGTERM and SIGINT for the block (from the main thread
        only: elsewhere Python cannot take signals, and the block runs
        without). The previous handlers come back after it."""
        with self._lock:
            self.signal_number = None
        self.flag.assign(False)
        state = self._install()
        try:
            yield self
        finally:
            if state is not None:
                self._uninstall(*state)

    def _handler(self, signal_number, frame):
        del frame
        self.request(signal_number)

    def _install(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            previous_fd = signal.set_wakeup_fd(write_fd)
        except ValueError:
            os.close(read_fd)
            os.close(write_fd)
            return None
        previous = {number: signal.signal(number, self._handler)
                    for number in SIGNALS}
        watcher = threading.Thread(target=self._watch,
                                   args=(read_fd, previous_fd),
                                   name="stop-signals", daemon=True)
        watcher.start()
        return read_fd, write_fd, previous_fd, previous, watcher

    def _uninstall(self, read_fd, write_fd, previous_fd, previous, watcher):
        for number, handler in previous.items():
            # None: a handler installed outside Python; the default is
            # the nearest Python can put back.
            signal.signal(number, signal.SIG_DFL if handler is None
                          else handler)
        signal.set_wakeup_fd(previous_fd)
        os.close(write_fd)  # The watcher reads the end of the pipe.
        watcher.join()
        os.close(read_fd)

    def _watch(self, read_fd, forward_fd):
        """Reads the signal numbers the interpreter writes to the pipe as
        each signal arrives (while the main thread may be inside a compiled
        call); passes them on to a wakeup fd that was there before."""
        while True:
            try:
                data = os.read(read_fd, 512)
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number in SIGNALS:
                    self.request(number)
            if forward_fd >= 0:
                try:
                    os.write(forward_fd, data)
                except OSError:
                    pass
