"""The compiled training loop: one optimizer step per replica, in a `while`.

One step on one replica (`TrainLoops._replica_step`): the task's loss
denominators (example counts, MLM weight sums) are all-reduced first, so each
replica's (and each accumulation micro-batch's) loss is its numerators over
the *global* denominators and the summed gradients are exactly those of the
global batch; the optimizer then sums the gradients over replicas (the one
cross-replica reduction), clips the sum to global norm 1.0 and applies it.
The loop runs up to `num_steps` of them in one call (a `while` over
`strategy.run`, what TPUs want), reading a stop flag before every step.
"""

import tensorflow as tf


class TrainLoops:
    """The compiled loops of one model and optimizer, one per XLA choice.

    Args:
        task: the job's `TrainingTask` (stats, loss, denominators).
        model: the built Keras model.
        optimizer: the built optimizer (it sums gradients over replicas).
        strategy: the `tf.distribute.Strategy` the model was built under.
        step: the run's int64 step variable (advanced by every loop).
        stop_flag: a boolean variable; True ends the loop before its next
            step (`stop_signals.StopSignals.flag`).
        accumulation_steps: micro-batches per optimizer step.
    """

    def __init__(self, task, model, optimizer, strategy, step, stop_flag,
                 accumulation_steps=1):
        self.task, self.model, self.optimizer = task, model, optimizer
        self.strategy, self.step, self.stop_flag = strategy, step, stop_flag
        self.accumulation_steps = accumulation_steps
        self._loops = {}
        self._has_grad = None

    def get(self, jit):
        """The loop `(iterator, num_steps) -> (summed stats, diverged)`,
        compiled with XLA if `jit` (made once per choice)."""
        if jit not in self._loops:
            self._loops[jit] = self._make(jit)
        return self._loops[jit]

    def choices(self):
        """The XLA choices a loop was made for so far (a set of bools)."""
        return set(self._loops)

    def _compute(self, features, denominators):
        """Gradients and statistics of one micro-batch on one replica."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            stats = self.task.stats(self.model, features, training=True)
            loss = self.task.loss(stats, denominators)
        grads = tape.gradient(loss, variables)
        # Variables the loss does not reach (the pooler under a span head)
        # get no update at all, as in the official optimizers; which ones is
        # known when this is traced.
        self._has_grad = [g is not None for g in grads]
        # Dense: gathers give IndexedSlices, which cannot be accumulated.
        return [tf.convert_to_tensor(g) for g in grads if g is not None], stats

    def _replica_step(self, features, compute_fn):
        """One optimizer step on this replica's share of the global batch."""
        context = tf.distribute.get_replica_context()
        denominators = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                          self.task.denominators(features))
        steps = self.accumulation_steps
        if steps == 1:
            grads, stats = compute_fn(features, denominators)
        else:
            # [B, ...] -> [steps, B / steps, ...]
            split = tf.nest.map_structure(
                lambda x: tf.reshape(x, [steps, x.shape[0] // steps]
                                     + x.shape[1:].as_list()), features)
            variables = self.model.trainable_variables
            grads = [tf.zeros(v.shape, v.dtype) for v in variables]
            stats = tf.zeros([len(self.task.stat_names)])
            for i in tf.range(steps):
                # Called at once, inside this iteration.
                part = tf.nest.map_structure(lambda x: x[i], split)  # noqa: B023
                g, s = compute_fn(part, denominators)
                g = iter(g)
                grads = [a + next(g) if has else a
                         for a, has in zip(grads, self._has_grad)]
                stats += s
            grads = [g for g, has in zip(grads, self._has_grad) if has]
        variables = [v for v, has in zip(self.model.trainable_variables,
                                         self._has_grad) if has]
        # The optimizer sums over replicas (the one reduction), then clips.
        self.optimizer.apply(grads, variables)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, stats)

    def _make(self, jit):
        single = (self.strategy.num_replicas_in_sync == 1 and not isinstance(
            self.strategy, tf.distribute.TPUStrategy))
        # The model code has no control flow on tensors: tracing it without
        # AutoGraph's source conversion saves seconds at every start.
        compute_fn = tf.function(self._compute, jit_compile=jit and not single,
                                 autograph=False)
        # On one device the whole step, optimizer included, is one program.
        # (Only the accumulation loop over micro-batches needs AutoGraph.)
        replica_step = tf.function(
            lambda features: self._replica_step(features, compute_fn),
            jit_compile=jit and single,
            autograph=self.accumulation_steps > 1)
        strategy, num_stats = self.strategy, len(self.task.stat_names)
        stop, step_counter = self.stop_flag, self.step

        @tf.function
        def train_loop(iterator, num_steps):
            total = tf.zeros([num_stats])
            done = tf.constant(0)
            diverged = tf.constant(False)
            # The stop flag is read in the loop's condition, before each
            # step: a stop signal (set by another thread while this call
            # runs) ends the loop after the step it came in, `done` exact.
            # (In the condition, not as a `break` in the body: a replica
            # step inside a branch does not run under MirroredStrategy.)
            while tf.logical_and(done < num_steps, tf.logical_not(
                    tf.logical_or(diverged, stop.read_value()))):
                stats = strategy.run(replica_step, args=(next(iterator),))
                # Already all-reduced: every replica holds the global sums.
                stats = strategy.experimental_local_results(stats)[0]
                done += 1
                total += stats
                diverged = tf.logical_not(
                    tf.reduce_all(tf.math.is_finite(stats)))
            step_counter.assign_add(tf.cast(done, tf.int64))
            return total, diverged

        return train_loop
