"""The official pretraining losses and metrics, as sums that reduce exactly.

The masked-LM loss (`masked_lm_loss`) is `sum(w * CE) / (sum(w) + 1e-5)`
over the batch and the sentence-order (SOP) loss (`sentence_order_loss`) the
mean cross-entropy; the pretraining loss is their unweighted sum.
Both are ratios of batch sums, so a replica holding part of the batch cannot
normalize by its own sums and match a single-device run. Everything here is
therefore written as additive *statistics* (`STAT_NAMES`): a replica computes
the sums of its shard, the sums are added across replicas (and across
gradient-accumulation micro-batches, and across evaluation batches), and only
then are the ratios taken (`metrics_from_stats`). For the gradient,
`replica_loss` divides a replica's numerators by the *global* denominators,
so the per-replica losses (and their gradients) add up to the global ones.

Shape legend: B batch, P masked positions, V vocabulary.
"""

import tensorflow as tf

# Added to the MLM denominator by the official code (guards an all-zero batch).
MLM_DENOMINATOR_EPSILON = 1e-5

STAT_NAMES = (
    "mlm_loss_sum",       # sum(w * CE) over masked positions
    "mlm_correct_sum",    # sum(w * [argmax == label])
    "mlm_weight_sum",     # sum(w)
    "sop_loss_sum",       # sum(CE) over examples
    "sop_correct_sum",    # sum([argmax == label])
    "sop_count",          # number of examples
)
METRIC_NAMES = ("masked_lm_accuracy", "masked_lm_loss",
                "sentence_order_accuracy", "sentence_order_loss")


def _cross_entropy(logits, labels):
    """Per-element CE of float32 logits `[..., C]` against int labels `[...]`."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    one_hot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(logits)[-1],
                         dtype=tf.float32)
    return -tf.reduce_sum(log_probs * one_hot, axis=-1)


def _correct(logits, labels):
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32)


def masked_lm_stats(mlm_logits, masked_lm_ids, masked_lm_weights):
    """The masked-LM part of `pretraining_stats` (its first three entries).

    Args:
        mlm_logits: float `[B, P, V]`.
        masked_lm_ids: int `[B, P]`, the original token ids.
        masked_lm_weights: float `[B, P]`, 1 at real predictions, 0 at padding.

    Returns:
        A float32 vector `[3]`: `mlm_loss_sum`, `mlm_correct_sum`,
        `mlm_weight_sum`.
    """
    weights = tf.cast(masked_lm_weights, tf.float32)  # [B, P]
    mlm_ce = _cross_entropy(mlm_logits, masked_lm_ids)  # [B, P]
    return tf.stack([
        tf.reduce_sum(weights * mlm_ce),
        tf.reduce_sum(weights * _correct(mlm_logits, masked_lm_ids)),
        tf.reduce_sum(weights),
    ])


def sentence_order_stats(sop_logits, sop_labels):
    """The sentence-order (SOP) part of `pretraining_stats` (its last three).

    Args:
        sop_logits: float `[B, 2]`.
        sop_labels: int `[B]` or `[B, 1]` (1: segments swapped).

    Returns:
        A float32 vector `[3]`: `sop_loss_sum`, `sop_correct_sum`,
        `sop_count`.
    """
    sop_labels = tf.reshape(sop_labels, [-1])  # [B]
    sop_ce = _cross_entropy(sop_logits, sop_labels)  # [B]
    return tf.stack([
        tf.reduce_sum(sop_ce),
        tf.reduce_sum(_correct(sop_logits, sop_labels)),
        tf.cast(tf.shape(sop_labels)[0], tf.float32),
    ])


def pretraining_stats(mlm_logits, masked_lm_ids, masked_lm_weights,
                      sop_logits, sop_labels):
    """Additive statistics of one batch (or one replica's shard of it).

    Args:
        mlm_logits, masked_lm_ids, masked_lm_weights: as `masked_lm_stats`.
        sop_logits, sop_labels: as `sentence_order_stats`.

    Returns:
        A float32 vector `[len(STAT_NAMES)]`, in `STAT_NAMES` order.
    """
    return tf.concat([
        masked_lm_stats(mlm_logits, masked_lm_ids, masked_lm_weights),
        sentence_order_stats(sop_logits, sop_labels),
    ], axis=0)


def masked_lm_loss(loss_sum, weight_sum):
    """The official masked-LM loss `sum(w * CE) / (sum(w) + 1e-5)`, from sums."""
    return loss_sum / (weight_sum + MLM_DENOMINATOR_EPSILON)


def sentence_order_loss(loss_sum, count):
    """The SOP loss, the mean cross-entropy of `count` examples, from sums."""
    return loss_sum / count


def loss_from_stats(stats):
    """The official pretraining loss from (global) statistics."""
    stats = tf.convert_to_tensor(stats, tf.float32)
    return (masked_lm_loss(stats[0], stats[2])
            + sentence_order_loss(stats[3], tf.maximum(stats[5], 1.0)))


def metrics_from_stats(stats):
    """The four official metrics (and the total `loss`) from statistics.

    `masked_lm_loss` is the training-loss form `sum(w*CE)/(sum(w)+1e-5)`; with
    summed evaluation statistics it is the official weighted-mean eval metric
    up to that epsilon.

    Args:
        stats: a vector in `STAT_NAMES` order (tensor or array).

    Returns:
        A dict of scalar float32 tensors: `loss` and `METRIC_NAMES`.
    """
    stats = tf.convert_to_tensor(stats, tf.float32)
    mlm_loss = masked_lm_loss(stats[0], stats[2])
    count = tf.maximum(stats[5], 1.0)
    sop_loss = sentence_order_loss(stats[3], count)
    return {
        "loss": mlm_loss + sop_loss,
        "masked_lm_accuracy": tf.math.divide_no_nan(stats[1], stats[2]),
        "masked_lm_loss": mlm_loss,
        "sentence_order_accuracy": stats[4] / count,
        "sentence_order_loss": sop_loss,
    }


def replica_loss(stats, global_mlm_weight, global_count):
    """A shard's share of the global loss: its numerators over global sums.

    Summed over the shards of a batch (replicas, micro-batches), these give
    exactly `loss_from_stats` of the whole batch, and so do their gradients.

    Args:
        stats: the shard's `pretraining_stats`.
        global_mlm_weight: `sum(w)` over the whole batch.
        global_count: number of examples in the whole batch.

    Returns:
        A float32 scalar.
    """
    return (masked_lm_loss(stats[0], global_mlm_weight)
            + sentence_order_loss(stats[3], tf.cast(global_count, tf.float32)))


def pretraining_loss(outputs, labels):
    """The official loss of one whole batch on one device.

    Args:
        outputs: `AlbertPretrainer` outputs (`mlm_logits`, `sop_logits`).
        labels: dict with `masked_lm_ids`, `masked_lm_weights`,
            `next_sentence_labels`.

    Returns:
        A float32 scalar: MLM loss + SOP loss.
    """
    stats = pretraining_stats(
        outputs["mlm_logits"], labels["masked_lm_ids"],
        labels["masked_lm_weights"], outputs["sop_logits"],
        labels["next_sentence_labels"])
    return loss_from_stats(stats)
