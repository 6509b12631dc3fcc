"""Progress of long jobs: bars on a terminal, timed lines elsewhere.

Attached to a terminal, a job (data prep, training, export, conversion) shows
a tqdm bar with its rate and ETA; otherwise (a log file, CI, a pipe) nothing
is drawn and the job's log lines say the same. `Pace` measures a job's speed
after its warm-up (the first step compiles: its time gives no ETA) and
`Reporter` logs a loop's progress after its first unit and then at least
every `INTERVAL_S` seconds. One helper for all of them, below TensorFlow
(tqdm only), so data-prep workers can use it too.
"""

import sys
import time

import tqdm


def interactive(stream=None):
    """Whether `stream` (default: stderr, where bars and logs go) is a
    terminal."""
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Silent:
    """The bar's interface, drawing nothing."""

    def update(self, count=1):
        del count

    def set_postfix_str(self, text):
        del text

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def bar(total=None, description="", unit="it", initial=0, enabled=None):
    """A progress bar, or a silent stand-in when not on a terminal.

    Args:
        total: the count at completion (None: unknown, no ETA).
        description: the text before the bar.
        unit: what is counted ("step", "instance", "file").
        initial: the count already done (a resumed run).
        enabled: force it on or off (default: `interactive()`).

    Returns:
        An object with `update(count)`, `set_postfix_str(text)` and
        `close()`, usable as a context manager.
    """
    if enabled is None:
        enabled = interactive()
    if not enabled:
        return _Silent()
    return tqdm.tqdm(total=total, desc=description, unit=unit, initial=initial,
                     dynamic_ncols=True, leave=True)


# Seconds of wall time a long job may go without a progress line.
INTERVAL_S = 30.0


def format_time(seconds):
    """`H:MM:SS` of a duration in seconds (negative: 0:00:00)."""
    seconds = int(max(seconds, 0))
    return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


class Pace:
    """The speed of a job after its warm-up, and the ETA it gives.

    The first unit of work (the first step or batch) pays for tracing,
    compiling and filling caches; its time says nothing about the next
    ones, so it is reported as warm-up and left out of the rate: there is
    no ETA before a second unit is done.

    Args:
        start: the count the job starts from (a resumed run's step).
        clock: the time source (seconds).
    """

    def __init__(self, start=0, clock=None):
        self._clock = clock or time.monotonic
        self.start_time = self._clock()
        self.start = start
        self._warm = None  # (count, time) when the warm-up ended.
        self.count = start
        self.warmup_s = None

    def now(self):
        """The current time of this pace's clock."""
        return self._clock()

    def update(self, count):
        """Records that `count` units are done (a running total)."""
        now = self._clock()
        if self._warm is None and count > self.start:
            self._warm = (count, now)
            self.warmup_s = now - self.start_time
        self.count = count

    @property
    def warm(self):
        """Whether units were timed after the warm-up."""
        return self._warm is not None and self.count > self._warm[0]

    def seconds_per_unit(self):
        """Seconds per unit after the warm-up, or None (not measured yet)."""
        if not self.warm:
            return None
        count, then = self._warm
        return max(self._clock() - then, 1e-9) / (self.count - count)

    def eta_s(self, total):
        """Seconds to reach `total` at the warm pace, or None."""
        per_unit = self.seconds_per_unit()
        if per_unit is None or total is None:
            return None
        return max(total - self.count, 0) * per_unit


class Reporter:
    """Progress lines of a loop the host drives (evaluation, prediction):
    one after the first unit (when it took `first_line_after_s` or more:
    a quick loop stays quiet), then at least every `interval_s`, with the
    count, the rate and (after the warm-up) the ETA.

    Args:
        description: what is done ("eval ckpt-400").
        total: the count at completion, or None (unknown).
        unit: what is counted ("batch").
        examples_per_unit: examples in a unit (for examples/s), or None.
        interval_s: seconds between lines.
        log: where lines go (default: absl's `logging.info`).
        clock: the time source.
        first_line_after_s: the first unit's seconds that make it worth a
            line.
    """

    def __init__(self, description, total=None, unit="batch",
                 examples_per_unit=None, interval_s=INTERVAL_S, log=None,
                 clock=None, first_line_after_s=1.0):
        self.description, self.total, self.unit = description, total, unit
        self.examples_per_unit = examples_per_unit
        self.interval_s = interval_s
        self.first_line_after_s = first_line_after_s
        self._log = log
        self.pace = Pace(0, clock)
        self._last_line = None
        self._first_done = False

    def _emit(self, text):
        if self._log is None:
            from absl import logging
            logging.info("%s", text)
        else:
            self._log(text)

    def update(self, count):
        """Records `count` units done; logs a line when one is due."""
        self.pace.update(count)
        now = self.pace.now()
        first = not self._first_done
        self._first_done = True
        since = now - (self.pace.start_time if self._last_line is None
                       else self._last_line)
        slow_start = first and since >= self.first_line_after_s and (
            self.total is None or count < self.total)
        if since < self.interval_s and not slow_start:
            return
        self._last_line = now
        self._emit(self.line())

    def line(self):
        """The progress line for the count so far."""
        pace, count = self.pace, self.pace.count
        done = (f"{count}/{self.total}" if self.total is not None
                else str(count))
        parts = [f"{self.description}: {self.unit} {done}"]
        per_unit = pace.seconds_per_unit()
        if per_unit is None:
            parts.append(f"first {self.unit} (warm-up) took "
                         f"{pace.warmup_s or 0.0:.1f} s; ETA after warm-up")
        else:
            rate = 1.0 / per_unit
            if self.examples_per_unit:
                parts.append(f"{rate * self.examples_per_unit:.1f} examples/s")
            else:
                parts.append(f"{rate:.2f} {self.unit}/s")
            eta = pace.eta_s(self.total)
            if eta is not None:
                parts.append(f"ETA {format_time(eta)}")
        return ", ".join(parts)
