"""`custom_gradient.with_gradient`: the custom gradient reaches every way of
differentiating, a SavedModel, and lets go of the traced graph."""

import gc
import json
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import tensorflow as tf

from albert_tf.layers import custom_gradient


def _square(x):
    """x**2 whose gradient is deliberately 3 * x * dy (autodiff gives 2x):
    a gradient of 3x shows the custom one was used."""
    return custom_gradient.with_gradient(
        "TestSquareTimesThree", lambda x: [x * x],
        lambda args, outputs, dys: [3.0 * args[0] * dys[0]], [x])[0]


X = tf.constant([1.0, -2.0, 0.5])


def _taped(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(_square(x))
    return tape.gradient(y, x)


def _symbolic(x):
    return tf.gradients(tf.reduce_sum(_square(x)), x)[0]


_inner = tf.function(lambda x: tf.reduce_sum(_square(x)))


def _nested(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = _inner(x)
    return tape.gradient(y, x)


def test_every_way_of_differentiating_uses_the_custom_gradient():
    expected = 3.0 * X.numpy()
    np.testing.assert_allclose(_square(X), X.numpy() ** 2)
    for way in (_taped, tf.function(_taped), tf.function(_symbolic),
                tf.function(_nested)):
        np.testing.assert_allclose(way(X), expected)


def test_a_taped_trace_is_freed_with_its_function():
    step = tf.function(_taped)
    graph = weakref.ref(step.get_concrete_function(X).graph)
    np.testing.assert_allclose(step(X), 3.0 * X.numpy())
    del step
    gc.collect()
    assert graph() is None


_LOAD = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    model = tf.saved_model.load(sys.argv[1])
    x = tf.constant([1.0, -2.0, 0.5])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(model.square(x))
    print(json.dumps(tape.gradient(y, x).numpy().tolist()))
""")


def test_a_saved_model_keeps_the_gradient_in_a_process_without_this_package(
        tmp_path):
    """An untaped trace (serving, export) saves the custom gradient with the
    model; a fresh process that never imports albert_tf differentiates the
    loaded model with it."""
    module = tf.Module()
    module.square = tf.function(_square,
                                input_signature=[tf.TensorSpec([None])])
    tf.saved_model.save(module, str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _LOAD, str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_allclose(json.loads(done.stdout.strip().splitlines()[-1]),
                               3.0 * X.numpy())
