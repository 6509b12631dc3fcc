"""ALBERT for TensorFlow 2 and Keras 3.

Subpackages, imported in one direction (a module imports only from the
packages before its own):

    config -> layers -> models -> training, convert -> tasks -> (export/) -> cli

The public names below are loaded on first use, so `import albert_tf` (and
`albert_tf.config`) stays cheap: no converter, training or export code is
imported until it is asked for.

A `.keras` file this package saved loads in a fresh process after
`import albert_tf` alone (`keras.models.load_model(path)`): once Keras is
imported, each class this package registers with Keras is known to Keras by
its registered name, and its module is imported when a file needs it.
"""

import importlib
import importlib.abc
import os
import sys

# Layers here are written for the TensorFlow backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

_EXPORTS = {
    "AlbertConfig": "albert_tf.config",
    "PRESETS": "albert_tf.config",
    "SHARE_MODES": "albert_tf.cross_layer_sharing",
    "AlbertEmbedding": "albert_tf.layers.factorized_embedding",
    "FeedForwardSubBlock": "albert_tf.layers.transformer",
    "SelfAttentionSubBlock": "albert_tf.layers.transformer",
    "TransformerBlock": "albert_tf.layers.transformer",
    "MaskedLMHead": "albert_tf.layers.masked_lm_head",
    "SentenceOrderHead": "albert_tf.layers.sentence_order_head",
    "AlbertEncoder": "albert_tf.models.encoder",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "AlbertClassifier": "albert_tf.models.task_models",
    "AlbertMultipleChoice": "albert_tf.models.task_models",
    "AlbertSpanExtractor": "albert_tf.models.task_models",
    "AlbertTextClassifier": "albert_tf.tasks.text_models",
    "AlbertMaskedLM": "albert_tf.tasks.masked_lm",
    "AlbertTextPreprocessor": "albert_tf.layers.text_preprocessor",
    "AdamW": "albert_tf.training.lamb",
    "Lamb": "albert_tf.training.lamb",
    "WarmupPolynomialDecay": "albert_tf.training.schedule",
    "load_pretrained": "albert_tf.convert.pretrained",
}

__all__ = sorted(_EXPORTS)

# Every class registered with `keras.saving.register_keras_serializable(
# package="albert_tf")`, and its module. A `.keras` file names its classes
# `albert_tf>Name`; Keras looks them up only in its registry, which the
# decorators fill when their modules are imported, and `import albert_tf`
# imports none of them.
KERAS_PACKAGE = "albert_tf"
KERAS_CLASSES = {
    "AlbertEmbedding": "albert_tf.layers.factorized_embedding",
    "SelfAttentionSubBlock": "albert_tf.layers.transformer",
    "FeedForwardSubBlock": "albert_tf.layers.transformer",
    "TransformerBlock": "albert_tf.layers.transformer",
    "MaskedLMHead": "albert_tf.layers.masked_lm_head",
    "SentenceOrderHead": "albert_tf.layers.sentence_order_head",
    "ClassificationHead": "albert_tf.layers.task_heads",
    "SpanHead": "albert_tf.layers.task_heads",
    "FoldChoices": "albert_tf.layers.task_heads",
    "MultipleChoiceHead": "albert_tf.layers.task_heads",
    "AlbertTextPreprocessor": "albert_tf.layers.text_preprocessor",
    "AlbertEncoder": "albert_tf.models.encoder",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "AlbertClassifier": "albert_tf.models.task_models",
    "AlbertSpanExtractor": "albert_tf.models.task_models",
    "AlbertMultipleChoice": "albert_tf.models.task_models",
    "WarmupPolynomialDecay": "albert_tf.training.schedule",
    "Lamb": "albert_tf.training.lamb",
    "AdamW": "albert_tf.training.lamb",
    "AlbertTextClassifier": "albert_tf.tasks.text_models",
    "AlbertMaskedLM": "albert_tf.tasks.masked_lm",
}
# The Keras module that holds the registry (`GLOBAL_CUSTOM_OBJECTS`).
_KERAS_REGISTRY = "keras.src.saving.object_registration"


def _stand_in(name, module):
    """A class Keras can find under `albert_tf>name` before `module` is
    imported: its `from_config` imports `module` (whose decorator then
    registers the real class in its place) and builds the real class."""

    def from_config(cls, config, *args, **kwargs):
        del cls  # The stand-in: the real class builds the object.
        real = getattr(importlib.import_module(module), name)
        return real.from_config(config, *args, **kwargs)

    return type(name, (), {
        "__doc__": f"Loads {module}.{name} on first use.",
        "__module__": module,
        "from_config": classmethod(from_config),
    })


def _register_with_keras(registry):
    """Puts a stand-in for each of `KERAS_CLASSES` in Keras' `registry`,
    where the real class is not registered yet."""
    for name, module in KERAS_CLASSES.items():
        registry.setdefault(f"{KERAS_PACKAGE}>{name}",
                            _stand_in(name, module))


class _RegistryLoader(importlib.abc.Loader):
    """Loads Keras' registry module as its own loader does, then registers
    this package's classes in it."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _register_with_keras(module.GLOBAL_CUSTOM_OBJECTS)

    def __getattr__(self, name):  # get_source, is_package, ...
        if name == "_loader":  # Not set yet: no delegate to ask.
            raise AttributeError(name)
        return getattr(self._loader, name)


class _KerasImportHook(importlib.abc.MetaPathFinder):
    """Waits for Keras' registry module to be imported (once), and has it
    loaded by `_RegistryLoader`."""

    albert_tf_hook = True  # Found again after a reload of this module.

    def find_spec(self, fullname, path, target=None):
        if fullname != _KERAS_REGISTRY:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _RegistryLoader(spec.loader)
                return spec
        return None


if _KERAS_REGISTRY in sys.modules:
    _register_with_keras(sys.modules[_KERAS_REGISTRY].GLOBAL_CUSTOM_OBJECTS)
elif not any(getattr(f, "albert_tf_hook", False) for f in sys.meta_path):
    sys.meta_path.insert(0, _KerasImportHook())


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
