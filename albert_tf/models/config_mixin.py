"""`AlbertConfigMixin`: saving a model as its `AlbertConfig` and dtype policy."""

import keras


class AlbertConfigMixin:
    """`get_config` / `from_config` of a model built from an `AlbertConfig`.

    The model is rebuilt from its name, `trainable`, config and dtype policy.
    A Functional model keeps no dtype policy of its own, so the class names
    the layer whose policy all its layers share (`_policy_layer`). Put the
    mixin before `keras.Model` in the bases.
    """

    @property
    def _policy_layer(self):
        raise NotImplementedError

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(
                self._policy_layer.dtype_policy),
            "config": self.config.to_dict(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
