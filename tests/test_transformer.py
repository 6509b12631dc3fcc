import math

import numpy as np
import pytest

from albert_tf import FeedForwardSubBlock
from albert_tf import SelfAttentionSubBlock
from albert_tf import TransformerBlock
from albert_tf.layers import activations
from tests.layer_checks import run_layer_test

H, N, F = 16, 4, 32


def _inputs(batch=2, length=7, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, length, H)).astype("float32")
    mask = np.ones((batch, length), "int32")
    mask[1, 4:] = 0
    return x, mask


def _dense(layer, x):
    return x @ layer.kernel.numpy() + layer.bias.numpy()


def _layer_norm(layer, x, eps=1e-12):
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return x * layer.gamma.numpy() + layer.beta.numpy()


def _reference_attention(block, x, mask):
    """The official formula, written out in NumPy."""
    b, t, _ = x.shape
    d = H // N

    def heads(y):
        return y.reshape(b, t, N, d).transpose(0, 2, 1, 3)  # [B, N, T, D]

    q, k, v = (heads(_dense(layer, x))
               for layer in (block.query, block.key, block.value))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, t, H)
    return _layer_norm(block.layer_norm, _dense(block.output_dense, context) + x)


def test_attention_layer_checks():
    x, mask = _inputs()
    run_layer_test(SelfAttentionSubBlock,
                   dict(hidden_size=H, num_heads=N, dropout=0.1, attention_dropout=0.1),
                   {"x": x, "padding_mask": mask}, (2, 7, H))


def test_attention_matches_numpy_reference():
    x, mask = _inputs()
    block = SelfAttentionSubBlock(hidden_size=H, num_heads=N)
    np.testing.assert_allclose(block(x, padding_mask=mask),
                               _reference_attention(block, x, mask), atol=1e-5)


def test_padded_keys_do_not_change_real_positions():
    x, mask = _inputs()
    block = SelfAttentionSubBlock(hidden_size=H, num_heads=N)
    out = np.asarray(block(x, padding_mask=mask))
    noisy = x.copy()
    noisy[1, 4:] = 100.0  # Garbage at padded positions.
    out_noisy = np.asarray(block(noisy, padding_mask=mask))
    np.testing.assert_allclose(out_noisy[1, :4], out[1, :4], atol=1e-5)
    np.testing.assert_allclose(out_noisy[0], out[0], atol=1e-6)


def test_ffn_layer_checks_and_reference():
    x, _ = _inputs()
    run_layer_test(FeedForwardSubBlock,
                   dict(hidden_size=H, intermediate_size=F, dropout=0.1),
                   {"x": x}, (2, 7, H))
    block = FeedForwardSubBlock(hidden_size=H, intermediate_size=F)
    out = block(x)
    h = np.asarray(activations.gelu(_dense(block.intermediate, x)))
    ref = _layer_norm(block.layer_norm, _dense(block.output_dense, h) + x)
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_transformer_block_is_attention_then_ffn():
    x, mask = _inputs()
    kwargs = dict(hidden_size=H, num_heads=N, intermediate_size=F, dropout=0.1,
                  attention_dropout=0.1)
    block = run_layer_test(TransformerBlock, kwargs,
                           {"x": x, "padding_mask": mask}, (2, 7, H))
    expected = block.ffn(block.attention(x, padding_mask=mask))
    np.testing.assert_allclose(block(x, padding_mask=mask), expected, atol=1e-6)


def test_attention_gradients_match_separate_projections():
    """The fused query/key/value matmul has the gradients of three Dense."""
    import tensorflow as tf

    x, mask = _inputs()
    x = tf.constant(x)
    block = SelfAttentionSubBlock(hidden_size=H, num_heads=N)
    block(x, padding_mask=mask)
    d = H // N

    def separate(x):
        b, t = x.shape[0], x.shape[1]

        def heads(layer):
            return tf.reshape(layer(x), (b, t, N, d))  # [B, T, N, D]

        q, k, v = heads(block.query), heads(block.key), heads(block.value)
        scores = tf.einsum("btnd,bsnd->bnts", q / math.sqrt(d), k)
        scores += (1.0 - tf.cast(mask, tf.float32))[:, None, None, :] * -10000.0
        context = tf.einsum("bnts,bsnd->btnd", tf.nn.softmax(scores), v)
        out = block.output_dense(tf.reshape(context, (b, t, H)))
        return block.layer_norm(out + x)

    weights = np.random.default_rng(1).normal(size=(2, 7, H)).astype("float32")
    grads = []
    for fn in (lambda x: block(x, padding_mask=mask), separate):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(fn(x) * weights)
        grads.append(tape.gradient(loss, [x] + block.trainable_variables))
    assert [v.path.split("/")[-2] for v in block.trainable_variables[:6]] == [
        "query", "query", "key", "key", "value", "value"]
    for path, ours, reference in zip(
            ["x"] + [v.path for v in block.trainable_variables], *grads):
        np.testing.assert_allclose(ours, reference, atol=1e-5, err_msg=path)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("block_cls", [SelfAttentionSubBlock, FeedForwardSubBlock])
def test_training_path_matches_inference_path(block_cls, policy):
    # With no dropout, `training=True` (the fused kernels) and `training=False`
    # (plain layers) compute the same function, and the same gradients.
    import tensorflow as tf

    kwargs = (dict(hidden_size=H, num_heads=N) if block_cls is SelfAttentionSubBlock
              else dict(hidden_size=H, intermediate_size=F))
    block = block_cls(dtype=policy, **kwargs)
    x, mask = _inputs()
    call_kwargs = {"padding_mask": mask} if block_cls is SelfAttentionSubBlock else {}
    block(x, **call_kwargs)
    rng = np.random.default_rng(1)
    for w in block.weights:  # LayerNorm scales and biases away from 1 and 0
        w.assign(rng.normal(scale=0.3, size=w.shape).astype("float32"))
    weight = tf.constant(rng.normal(size=(H,)), tf.float32)
    results = []
    for training in (False, True):
        with tf.GradientTape() as tape:
            inputs = tf.constant(x)
            tape.watch(inputs)
            y = block(inputs, training=training, **call_kwargs)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * weight)
        grads = tape.gradient(loss, [inputs] + block.trainable_weights)
        results.append((y, grads))
    (y0, g0), (y1, g1) = results
    atol = 1e-5 if policy == "float32" else 3e-2
    np.testing.assert_allclose(np.asarray(tf.cast(y1, tf.float32)),
                               np.asarray(tf.cast(y0, tf.float32)), atol=atol)
    for w, a, b in zip(["x"] + [w.path for w in block.trainable_weights], g0, g1):
        scale = max(1.0, float(np.abs(np.asarray(a)).max()))
        np.testing.assert_allclose(np.asarray(b) / scale, np.asarray(a) / scale,
                                   atol=atol, err_msg=w)


def test_query_positions_give_the_rows_of_the_full_output():
    import tensorflow as tf

    block = SelfAttentionSubBlock(hidden_size=H, num_heads=N)
    x, mask = _inputs()
    positions = np.array([[0, 3, 3], [6, 0, 2]], "int32")
    full = block(x, padding_mask=mask)
    for training in (False, True):
        rows = block(x, padding_mask=mask, query_positions=positions,
                     training=training)
        assert tuple(rows.shape) == (2, 3, H)
        np.testing.assert_allclose(
            rows, tf.gather(full, positions, batch_dims=1), atol=1e-5)
    assert block.compute_output_shape((2, 7, H), (2, 7), (2, 3)) == (2, 3, H)
