import numpy as np
import tensorflow as tf

from albert_tf.training import losses


def _numpy_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _batch(seed=0, batch=6, predictions=4, vocab=11):
    rng = np.random.default_rng(seed)
    weights = (rng.random((batch, predictions)) < 0.7).astype("float32")
    return dict(
        mlm_logits=rng.normal(size=(batch, predictions, vocab)).astype("float32"),
        masked_lm_ids=rng.integers(0, vocab, (batch, predictions)).astype("int32"),
        masked_lm_weights=weights,
        sop_logits=rng.normal(size=(batch, 2)).astype("float32"),
        sop_labels=rng.integers(0, 2, (batch, 1)).astype("int32"))


def _official(b):
    """The official formulas, written out in NumPy."""
    lp = _numpy_log_softmax(b["mlm_logits"])
    ce = -np.take_along_axis(lp, b["masked_lm_ids"][..., None], -1)[..., 0]
    w = b["masked_lm_weights"]
    mlm_loss = (w * ce).sum() / (w.sum() + 1e-5)
    correct = (lp.argmax(-1) == b["masked_lm_ids"]).astype("float32")
    sop_lp = _numpy_log_softmax(b["sop_logits"])
    labels = b["sop_labels"][:, 0]
    sop_ce = -sop_lp[np.arange(len(labels)), labels]
    return {
        "loss": mlm_loss + sop_ce.mean(),
        "masked_lm_loss": mlm_loss,
        "masked_lm_accuracy": (w * correct).sum() / w.sum(),
        "sentence_order_loss": sop_ce.mean(),
        "sentence_order_accuracy": (sop_lp.argmax(-1) == labels).mean(),
    }


def test_metrics_match_official_formulas():
    b = _batch()
    metrics = losses.metrics_from_stats(losses.pretraining_stats(**b))
    expected = _official(b)
    assert set(metrics) == set(expected) == {"loss", *losses.METRIC_NAMES}
    for name, value in expected.items():
        np.testing.assert_allclose(metrics[name].numpy(), value, rtol=1e-6,
                                   err_msg=name)
    loss = losses.pretraining_loss(
        {"mlm_logits": b["mlm_logits"], "sop_logits": b["sop_logits"]},
        {"masked_lm_ids": b["masked_lm_ids"],
         "masked_lm_weights": b["masked_lm_weights"],
         "next_sentence_labels": b["sop_labels"]})
    np.testing.assert_allclose(loss.numpy(), expected["loss"], rtol=1e-6)


def test_shard_losses_add_up_to_global_loss_and_gradient():
    """Replica shards normalized by global sums reproduce the global batch."""
    b = _batch(seed=1, batch=8)
    logits = tf.Variable(b["mlm_logits"])

    def shard(lo, hi):
        return losses.pretraining_stats(
            logits[lo:hi], b["masked_lm_ids"][lo:hi],
            b["masked_lm_weights"][lo:hi], b["sop_logits"][lo:hi],
            b["sop_labels"][lo:hi])

    with tf.GradientTape() as tape:
        full = losses.loss_from_stats(shard(0, 8))
    full_grad = tape.gradient(full, logits)

    global_weight = float(b["masked_lm_weights"].sum())
    with tf.GradientTape() as tape:
        parts = [losses.replica_loss(shard(lo, lo + 2), global_weight, 8)
                 for lo in range(0, 8, 2)]
        total = tf.add_n(parts)
    np.testing.assert_allclose(total.numpy(), full.numpy(), rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(total, logits).numpy(),
                               full_grad.numpy(), atol=1e-7)

    # Summed statistics give the same metrics as the whole batch.
    summed = tf.add_n([shard(lo, lo + 2) for lo in range(0, 8, 2)])
    for name, value in losses.metrics_from_stats(shard(0, 8)).items():
        np.testing.assert_allclose(losses.metrics_from_stats(summed)[name],
                                   value, rtol=1e-6)


def test_zero_weights_are_finite():
    b = _batch()
    b["masked_lm_weights"] = np.zeros_like(b["masked_lm_weights"])
    metrics = losses.metrics_from_stats(losses.pretraining_stats(**b))
    assert all(np.isfinite(v.numpy()) for v in metrics.values())
    assert metrics["masked_lm_loss"].numpy() == 0.0


def test_the_two_tasks_separately():
    """The MLM and SOP halves, each from its own outputs only."""
    b = _batch(seed=2)
    expected = _official(b)
    mlm = losses.masked_lm_stats(b["mlm_logits"], b["masked_lm_ids"],
                                 b["masked_lm_weights"])
    sop = losses.sentence_order_stats(b["sop_logits"], b["sop_labels"])
    np.testing.assert_array_equal(tf.concat([mlm, sop], 0),
                                  losses.pretraining_stats(**b))
    np.testing.assert_allclose(losses.masked_lm_loss(mlm[0], mlm[2]),
                               expected["masked_lm_loss"], rtol=1e-6)
    np.testing.assert_allclose(losses.sentence_order_loss(sop[0], sop[2]),
                               expected["sentence_order_loss"], rtol=1e-6)
