"""LAMB and AdamW as released with ALBERT, and `create_optimizer`.

`Lamb` is the LAMB of the released ALBERT code, which differs from
`keras.optimizers.Lamb`: there is no bias correction, the weight decay is
added to the update *before* the trust ratio is taken, and variables whose
name matches `LayerNorm`, `layer_norm` or `bias` get neither weight decay nor
the trust ratio. `AdamW` is the released `AdamWeightDecayOptimizer`: the same
update without the trust ratio. Per variable, with gradient `g`:

    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g^2
    update = m / (sqrt(v) + epsilon) + weight_decay_rate * w     (decay if not excluded)
    ratio = ||w|| / ||update||, or 1 if either norm is 0        (LAMB, if not excluded)
    w = w - ratio * lr * update

With `clip_norm` (`create_optimizer` sets the official 1.0), gradients are
clipped to that global norm right after they are summed over replicas, inside
`apply`, so the norm is that of the global-batch gradient and a mirrored run
matches a single-device one (Keras' own `global_clipnorm` clips each
replica's gradients before the sum).
"""

import re

import keras
import tensorflow as tf

from albert_tf.training.options import OPTIMIZERS
from albert_tf.training.schedule import WarmupPolynomialDecay

CLIP_NORM = 1.0
DEFAULT_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")


@tf.function(jit_compile=True, autograph=False)
def _moments_and_update(grad, m, v, weight, beta_1, beta_2, epsilon,
                        weight_decay_rate):
    """One variable's new moments and (decayed) update, in one compiled loop."""
    next_m = beta_1 * m + (1.0 - beta_1) * grad
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    if weight_decay_rate:
        update += weight_decay_rate * weight
    return next_m, next_v, update


@tf.function(jit_compile=True, autograph=False)
def _scaled_step(weight, update, scale):
    return weight - scale * update


def _norm(x):
    # TensorFlow's L2Loss kernel: one pass (tf.norm squares, then sums).
    return tf.sqrt(2.0 * tf.nn.l2_loss(x))


def _matches(path, patterns):
    return any(re.search(pattern, path) for pattern in patterns)


class _OfficialAdamFamily(keras.optimizers.Optimizer):
    """Adam moments without bias correction, decay inside the update.

    Subclasses set `_layer_adaptation` (True: LAMB's trust ratio).
    """

    _layer_adaptation = False

    def __init__(self, learning_rate=0.00176, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, weight_decay_rate=0.01,
                 exclude_from_weight_decay=DEFAULT_EXCLUSIONS,
                 exclude_from_layer_adaptation=None, clip_norm=None, name=None,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.clip_norm = clip_norm
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay_rate = weight_decay_rate
        # Stored under other names: the base class has a method called
        # `exclude_from_weight_decay`.
        self.decay_exclusions = tuple(exclude_from_weight_decay or ())
        # Official: the layer-adaptation exclusions default to the decay ones.
        self.adaptation_exclusions = tuple(
            self.decay_exclusions if exclude_from_layer_adaptation is None
            else exclude_from_layer_adaptation)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])
        # Decided once from the Keras path (e.g. "embeddings/LayerNorm/gamma"):
        # inside a distributed update the variable is a per-device component
        # whose name may differ.
        self._use_decay = [
            bool(self.weight_decay_rate)
            and not _matches(v.path, self.decay_exclusions) for v in var_list]
        self._use_adaptation = [
            self._layer_adaptation
            and not _matches(v.path, self.adaptation_exclusions)
            for v in var_list]

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # The TensorFlow optimizer's hook that sums gradients over replicas
        # (identity on one device): the global norm is taken after it.
        grads_and_vars = super()._all_reduce_sum_gradients(grads_and_vars)
        if self.clip_norm is None:
            return grads_and_vars
        grads, variables = zip(*grads_and_vars)
        grads, _ = tf.clip_by_global_norm(list(grads), self.clip_norm)
        return list(zip(grads, variables))

    def uses_weight_decay(self, variable):
        """Whether `variable` (one this optimizer was built on) is decayed."""
        return self._use_decay[self._get_variable_index(variable)]

    def uses_layer_adaptation(self, variable):
        """Whether `variable` gets the trust ratio (LAMB only)."""
        return self._use_adaptation[self._get_variable_index(variable)]

    def update_step(self, gradient, variable, learning_rate):
        # Elementwise work in compiled loops (less memory traffic than one op
        # at a time); the norms in TensorFlow's reductions, which XLA's CPU
        # backend runs slower.
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        m, v = self._m[index], self._v[index]
        weight = tf.convert_to_tensor(variable)
        next_m, next_v, update = _moments_and_update(
            tf.cast(tf.convert_to_tensor(gradient), dtype), tf.convert_to_tensor(m),
            tf.convert_to_tensor(v), weight, self.beta_1, self.beta_2, self.epsilon,
            self.weight_decay_rate if self._use_decay[index] else 0.0)
        scale = tf.cast(learning_rate, dtype)
        if self._use_adaptation[index]:
            weight_norm, update_norm = _norm(weight), _norm(update)
            ratio = tf.where(
                weight_norm > 0.0,
                tf.where(update_norm > 0.0,
                         weight_norm / tf.maximum(update_norm, 1e-30), 1.0),
                1.0)
            scale *= ratio
        self.assign(m, next_m)
        self.assign(v, next_v)
        self.assign(variable, _scaled_step(weight, update, scale))

    def get_config(self):
        config = super().get_config()
        config.update({
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "weight_decay_rate": self.weight_decay_rate,
            "exclude_from_weight_decay": list(self.decay_exclusions),
            "exclude_from_layer_adaptation": list(self.adaptation_exclusions),
            "clip_norm": self.clip_norm,
        })
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(_OfficialAdamFamily):
    """LAMB exactly as released with ALBERT (see the module docstring).

    Args:
        learning_rate: a float or a `LearningRateSchedule`.
        beta_1: first-moment decay.
        beta_2: second-moment decay.
        epsilon: added to `sqrt(v)`.
        weight_decay_rate: L2 decay added to the update (before the ratio).
        exclude_from_weight_decay: regexes of variable paths not decayed.
        exclude_from_layer_adaptation: regexes of paths without trust ratio;
            None: the same as `exclude_from_weight_decay`.
        clip_norm: global-norm clipping of the replica-summed gradients
            (None: no clipping).

    Example:

    ```python
    import albert_tf
    import keras
    import numpy as np

    schedule = albert_tf.WarmupPolynomialDecay(
        0.00176, num_train_steps=100, num_warmup_steps=10)
    optimizer = albert_tf.Lamb(learning_rate=schedule, clip_norm=1.0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(np.ones((8, 4)), np.zeros((8, 2)), epochs=1, verbose=0)
    ```
    """

    _layer_adaptation = True

    def __init__(self, learning_rate=0.00176, name="lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamW(_OfficialAdamFamily):
    """The released `AdamWeightDecayOptimizer` (no bias correction, no ratio).

    Takes the same arguments as `Lamb`; `exclude_from_layer_adaptation` is
    accepted and has no effect.

    Example:

    ```python
    import keras
    import numpy as np
    from albert_tf import AdamW, WarmupPolynomialDecay

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(AdamW(WarmupPolynomialDecay(1e-2, num_train_steps=20)), "mse")
    model.fit(np.ones((8, 4)), np.ones((8, 1)), epochs=1, verbose=0)
    ```
    """

    def __init__(self, learning_rate=0.00176, name="adamw", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)


def create_optimizer(optimizer="lamb", learning_rate=0.00176,
                     num_train_steps=125000, num_warmup_steps=3125,
                     poly_power=1.0, clip_norm=CLIP_NORM):
    """The official optimizer with the official schedule and clipping.

    Args:
        optimizer: `"lamb"` or `"adamw"`.
        learning_rate: the peak learning rate.
        num_train_steps: where the polynomial decay reaches 0.
        num_warmup_steps: steps of linear warmup.
        poly_power: the decay's power.
        clip_norm: global-norm clipping (official: 1.0; None: none).

    Returns:
        A `Lamb` or `AdamW` driven by a `WarmupPolynomialDecay`.

    Raises:
        ValueError: for an unknown optimizer name.
    """
    schedule = WarmupPolynomialDecay(learning_rate, num_train_steps,
                                     num_warmup_steps, poly_power)
    if optimizer == "lamb":
        return Lamb(learning_rate=schedule, clip_norm=clip_norm)
    if optimizer == "adamw":
        return AdamW(learning_rate=schedule, clip_norm=clip_norm)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}. "
                     f"Received: optimizer={optimizer!r}")

