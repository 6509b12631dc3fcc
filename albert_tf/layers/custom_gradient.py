"""Custom gradients that do not keep training steps alive.

`tf.custom_gradient`, traced in a graph (every `tf.function`, so every
training step), registers a new gradient function for every call and never
removes it; the function's closure holds the call's tensors, and through
them the whole graph being traced. Every traced training step, and every
fine-tuning run, stayed in memory for the life of the process, and every
garbage collection walked it.

Where a tape watches the call (the training step: `Trainer`, Keras `fit`,
`Finetuner`), `with_gradient` attaches the gradient the two ways TensorFlow looks one
up, and holds no tensor past the trace:
- the tape's record of the call, which lives as long as the tape;
- a gradient registered once per name and computed from the op's own
  inputs, for a function traced inside a taped one (its gradient is derived
  from its graph) and `tf.gradients`.
Where no tape watches it (serving and export traces) it is
`tf.custom_gradient` itself: a SavedModel saves that gradient, traced from
the call's own tensors, so that a loaded model is differentiated with it;
those graphs are traced once.
"""

import threading

import tensorflow as tf

# The tape's record of an op and its backward function: the mechanism
# `tf.custom_gradient` uses under a tape.
from tensorflow.python.eager import record

_REGISTERED = set()
_LOCK = threading.Lock()


def _register(name, backward, num_args):
    """Registers the graph gradient of `with_gradient`'s op under `name`.

    The op is an `IdentityN` of the outputs, then the args; the outputs get
    no gradient, so nothing flows back through the forward's own ops.
    """
    @tf.RegisterGradient(name)
    def _gradient(op, *dys):
        width = len(op.inputs) - num_args
        return [None] * width + list(backward(
            list(op.inputs[width:]), list(op.inputs[:width]), dys[:width]))

    _REGISTERED.add(name)


def with_gradient(name, forward, backward, args):
    """`forward(*args)`, a list of tensors, whose gradient is `backward`.

    Args:
        name: names the gradient: calls with the same name must pass the same
            `backward` and the same number of args.
        forward: tensors -> a list of output tensors. Not differentiated.
        backward: `(args, outputs, output_gradients)` -> a gradient (or None)
            for each of `args`. It must hold no tensor of its own.
        args: the input tensors.

    Returns:
        The outputs, as new tensors the gradient is attached to.
    """
    args = list(args)
    if not record.should_record_backprop(args):
        return _custom_gradient(forward, backward, args)
    with record.stop_recording():
        outputs = list(forward(*args))
    count = len(outputs)
    if tf.executing_eagerly():
        joined = [tf.identity(output) for output in outputs]
    else:
        with _LOCK:
            if name not in _REGISTERED:
                _register(name, backward, len(args))
        with tf.compat.v1.get_default_graph().gradient_override_map(
                {"IdentityN": name}):
            joined = tf.identity_n(outputs + args)[:count]
    record.record_operation(
        name, joined, args,
        lambda *dys: list(backward(args, outputs, dys[:count])))
    return joined


def _custom_gradient(forward, backward, args):
    @tf.custom_gradient
    def fn(*args):
        outputs = list(forward(*args))
        return outputs, lambda *dys: list(backward(list(args), outputs, dys))

    return list(fn(*args))
