"""What a training run tells while it trains, and how long each call runs.

The compiled loop cannot log while it runs (a print inside it costs every
step, and on a TPU it is no log at all), so progress is made visible by the
calls' length instead: the first call of a run is one step (it compiles:
its line comes after the first step), the second one step too (the first
warm measurement), and later ones last about half of `progress_interval_s`
at the measured pace. The steps, the schedule and the data are the same in
calls of any length (the step counter and the stop flag are exact per
step). On a terminal a progress bar replaces the lines after the warm-up.
"""

import time

from absl import logging

from foundation import progress


class TrainingProgress:
    """The pace, the lines and the time budget of one run of the loop.

    Args:
        options: the job's `TrainingOptions` (`num_steps`,
            `iterations_per_loop`, `save_checkpoints_steps`,
            `progress_interval_s`, `max_train_seconds`, `do_eval`).
        start: the step the run starts at.
        is_chief: whether this process writes the lines.
        single_process: whether this process runs every replica (else every
            worker's calls must agree step for step: no clock cuts them).
    """

    def __init__(self, options, start, is_chief=True, single_process=True):
        self.options, self.is_chief = options, is_chief
        self.single_process = single_process
        self.run_start = time.time()
        self.pace = progress.Pace(start, clock=time.time)
        self._interactive = is_chief and progress.interactive()
        # On a terminal the bar starts after the warm-up (`log`): its rate
        # and ETA then leave the compiling out.
        self._bar = None
        self._last_line = None
        self._seconds_per_step = 0.0

    def out_of_time(self, step):
        """Whether `max_train_seconds` of this run have passed (logged)."""
        options = self.options
        limit = options.max_train_seconds
        if limit <= 0 or time.time() - self.run_start < limit:
            return False
        if step <= self.pace.start:
            then = "nothing trained in this run"
        elif step % options.save_checkpoints_steps == 0:
            then = "its checkpoint is saved"
        else:
            then = "saving and evaluating it" if options.do_eval else "saving it"
        logging.info("max_train_seconds=%g reached at step %d: %s.", limit,
                     step, then)
        return True

    def loop_steps(self, step):
        """Steps of the next compiled call: `iterations_per_loop`, ending at
        the next checkpoint and at the last step, and cut to the time a
        progress line is due and to what is left of `max_train_seconds`."""
        options = self.options
        to_save = (options.save_checkpoints_steps
                   - step % options.save_checkpoints_steps)
        # Calls end on multiples of iterations_per_loop, as when every call
        # was a whole loop (a progress line each, checkpoints in step).
        to_loop_end = (options.iterations_per_loop
                       - step % options.iterations_per_loop)
        steps = min(to_loop_end, to_save, options.num_steps - step)
        per_step = self.pace.seconds_per_unit()
        if per_step is None:
            return min(steps, 1)
        if not self.single_process:
            return steps
        # The slower of the last call and the warm average: a call that
        # grew slower (another job on the machine) is not trusted longer.
        per_step = max(per_step, self._seconds_per_step)
        budget = 0.5 * options.progress_interval_s
        if options.max_train_seconds > 0:
            budget = min(budget, options.max_train_seconds
                         - (time.time() - self.run_start))
        return max(1, min(steps, int(budget / per_step)))

    def record(self, step, steps_done, seconds):
        """Takes the measure of a call that ran `steps_done` steps to
        `step` in `seconds`."""
        self.pace.update(step)
        self._seconds_per_step = seconds / max(steps_done, 1)

    def log(self, step, steps_done, metrics):
        """The progress bar on a terminal, else a log line after the first
        step, when half of `progress_interval_s` has passed since the last
        line, at the end of each `iterations_per_loop` steps, at each
        checkpoint and at the end."""
        if not self.is_chief:
            return
        options = self.options
        total = options.num_steps
        if self._interactive:
            self._update_bar(step, steps_done, metrics)
            return
        now = time.time()
        due = (self._last_line is None
               or now - self._last_line >= 0.5 * options.progress_interval_s
               or step % options.iterations_per_loop == 0
               or step % options.save_checkpoints_steps == 0
               or step >= total)
        if not due:
            return
        self._last_line = now
        values = " ".join(f"{k} {v:.4g}" for k, v in metrics.items()
                          if k != "examples_per_second")
        logging.info("step %d/%d (%.1f%%) %s %.1f examples/s elapsed %s %s",
                     step, total, 100.0 * step / total, values,
                     metrics["examples_per_second"],
                     progress.format_time(now - self.run_start), self.eta())

    def _update_bar(self, step, steps_done, metrics):
        if self._bar is None:
            logging.info("The first step (compiling included) took %.1f s; "
                         "a progress bar follows.", self.pace.warmup_s or 0.0)
            self._bar = progress.bar(
                total=self.options.num_steps, description="train",
                unit="step", initial=step, enabled=True)
            return
        self._bar.set_postfix_str("loss %.4g, %.1f examples/s" % (
            metrics["loss"], metrics["examples_per_second"]))
        self._bar.update(steps_done)

    def eta(self):
        """The ETA part of a progress line: none before the warm-up ends
        (the first step's time is mostly compiling), and bounded by what is
        left of `max_train_seconds`."""
        eta = self.pace.eta_s(self.options.num_steps)
        if eta is None:
            return ("(the first step, compiling included, took %.1f s; ETA "
                    "after warm-up)" % (self.pace.warmup_s or 0.0))
        limit = self.options.max_train_seconds
        if limit > 0:
            left = limit - (time.time() - self.run_start)
            if left < eta:
                return "ETA %s (max_train_seconds)" % progress.format_time(
                    left)
        return "ETA %s" % progress.format_time(eta)

    def close(self):
        """Ends the progress bar, if there is one."""
        if self._bar is not None:
            self._bar.close()
