"""`WarmupPolynomialDecay`: the official ALBERT learning-rate schedule."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then polynomial decay counted from step 0 (official).

    `lr(s) = learning_rate * s / num_warmup_steps` while `s < num_warmup_steps`,
    else `(learning_rate - end) * (1 - min(s, N) / N) ** poly_power + end`
    with `N = num_train_steps`.

    Args:
        learning_rate: the peak learning rate.
        num_train_steps: N, where the decay reaches `end_learning_rate`.
        num_warmup_steps: steps of linear warmup (0: none).
        poly_power: the decay's power (1.0: linear).
        end_learning_rate: the final learning rate.

    Example:

    ```python
    from albert_tf import Lamb, WarmupPolynomialDecay

    schedule = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    print(float(schedule(5)), float(schedule(10)), float(schedule(100)))
    # 0.0005 0.0009 0.0: the warm-up's line over the first 10 steps, the
    # linear decay over all 100 after it (the official rule)
    optimizer = Lamb(learning_rate=schedule)
    ```
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0,
                 poly_power=1.0, end_learning_rate=0.0):
        if num_train_steps <= 0:
            raise ValueError("num_train_steps must be positive. Received: "
                             f"num_train_steps={num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError("num_warmup_steps must be >= 0. Received: "
                             f"num_warmup_steps={num_warmup_steps}")
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.poly_power = poly_power
        self.end_learning_rate = end_learning_rate

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        total = float(self.num_train_steps)
        fraction = 1.0 - tf.minimum(step, total) / total
        decayed = ((self.learning_rate - self.end_learning_rate)
                   * tf.pow(fraction, self.poly_power) + self.end_learning_rate)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.learning_rate * step / float(self.num_warmup_steps)
        return tf.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "poly_power": self.poly_power,
            "end_learning_rate": self.end_learning_rate,
        }
