"""Loading the exported encoder back into Keras, for fine-tuning.

    layer = load_exported_encoder("/models/albert_encoder/3")  # SavedModel
    layer = load_exported_encoder(
        "/models/albert_encoder/3/encoder.keras")  # Keras file
    outputs = layer({"input_word_ids": ..., "input_mask": ...,
                     "input_type_ids": ...})
    pooled = outputs["pooled_output"]

A SavedModel loads as `EncoderLayer`, a `keras.layers.TFSMLayer` that calls
the `serve` endpoint (and `serve_training`, with dropout, when training) and
whose weights train with any Keras optimizer. Keras 3.15's `TFSMLayer` names
the wrapped weights after `tf.Variable.name`, which keeps the ":0" suffix, and
optimizers then fail to build slot variables ("... is not a valid scope
name"): `EncoderLayer` drops the suffix. A `.keras` file loads as the
original `albert_tf.AlbertEncoder`.
"""

import keras
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)


@keras.saving.register_keras_serializable(package="albert_export")
class EncoderLayer(keras.layers.TFSMLayer):
    """The exported encoder SavedModel as a trainable Keras layer.

    Args:
        filepath: the encoder SavedModel folder.
        call_endpoint: endpoint called at inference.
        call_training_endpoint: endpoint called with `training=True`.
        trainable: whether the wrapped weights train.
        **kwargs: other `TFSMLayer` arguments (`name`, `dtype`).
    """

    def __init__(self, filepath, call_endpoint="serve",
                 call_training_endpoint="serve_training", trainable=True,
                 **kwargs):
        super().__init__(filepath, call_endpoint=call_endpoint,
                         call_training_endpoint=call_training_endpoint,
                         trainable=trainable, **kwargs)

    def _add_existing_weight(self, weight):
        # The wrapped tf.Variable is reused as is; only the Keras name changes.
        variable = keras.Variable(
            initializer=weight, trainable=weight.trainable, dtype=weight.dtype,
            shape=weight.shape,
            name=weight.name.split(":")[0].replace("/", "_"))
        self._track_variable(variable)


def load_exported_encoder(path, trainable=True):
    """Loads an exported encoder as a Keras layer or model.

    Args:
        path: an encoder SavedModel folder, or a `.keras` file.
        trainable: whether its weights train.

    Returns:
        An `EncoderLayer` (SavedModel) or an `albert_tf.AlbertEncoder`
        (`.keras`); both take the dict of int32 `[B, T]` inputs and return a
        dict with `pooled_output`, `sequence_output` and `encoder_outputs`.

    Raises:
        FileNotFoundError: nothing loadable at `path`.
    """
    path = str(path)
    if path.endswith(".keras"):
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError("No Keras file at %r" % (path,))
        # Registers AlbertEncoder and its layers with Keras. `import
        # albert_tf` alone does not: the package loads its modules lazily.
        import albert_tf.models.encoder  # noqa: F401

        model = keras.saving.load_model(path)
        model.trainable = trainable
        return model
    if not tf.saved_model.contains_saved_model(path):
        raise FileNotFoundError("No SavedModel at %r" % (path,))
    return EncoderLayer(path, trainable=trainable)
