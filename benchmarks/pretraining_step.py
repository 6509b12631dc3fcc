"""Whole pretraining step throughput: this project vs keras-hub, plus matmul peak.

ALBERT-base, sequence 128, batch 8, 20 masked positions per sequence. A step
is forward, MLM + SOP losses, backward and the optimizer update. Rows:

- albert_tf float32 / bfloat16: `train_lib.PretrainingRunner`'s compiled loop
  (the driver's own code path and its default compilation: XLA on TPUs and
  GPUs, TensorFlow's kernels on a CPU-only machine), official LAMB,
  `--iterations_per_loop` steps per call.
- albert_tf float32_xla / bfloat16_xla: the same with `jit_compile=True`.
- keras-hub float32: `AlbertBackbone` + its `MaskedLMHead` (tied to the token
  embedding) + a dense SOP head on the pooled output, Adam, compiled with XLA;
  keras_hub_float32_noxla: the same step without XLA (what Keras itself
  picks on a CPU-only machine).
- tf.matmul float32 / bfloat16: a large square matmul, the machine's reachable
  FLOP rate (the faster of XLA and TensorFlow's kernel), measured in the same
  run.

Model FLOPs per step are counted analytically for the full model (matmuls
only, 3x the forward for forward + backward). albert_tf's step computes its
last block at [CLS] and the masked positions only (`AlbertPretrainer.
pretraining_logits`, about 6% fewer FLOPs, same losses and gradients), so its
GFLOP/s counts work it does not do: read it as the rate the full model would
need to take the same time. Medians over `--repeats` timing windows; the windows
of all rows are taken in turn (round-robin), so load from other processes
falls on every row alike. Speed-ups are against `keras_hub_float32` and
against the faster keras-hub row.

    python -m benchmarks.pretraining_step [--repeats=5 --steps=3]
"""

import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import app, flags  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

_REPEATS = flags.DEFINE_integer("repeats", 5, "Timing windows per row.")
_STEPS = flags.DEFINE_integer("steps", 3, "Steps per timing window.")
_BATCH = flags.DEFINE_integer("batch", 8, "Sequences per step.")
_SEQ = flags.DEFINE_integer("seq", 128, "Sequence length.")
_PREDICTIONS = flags.DEFINE_integer("predictions", 20, "Masked positions per sequence.")
_MATMUL = flags.DEFINE_integer("matmul_size", 2048, "Side of the square matmul.")
_ROWS = flags.DEFINE_list(
    "rows", ["albert_tf_float32", "albert_tf_bfloat16", "albert_tf_float32_xla",
             "albert_tf_bfloat16_xla", "keras_hub_float32",
             "keras_hub_float32_noxla"],
    "Which model rows to run.")


def step_flops(config, batch, seq, predictions):
    """Matmul FLOPs of one training step (3x forward)."""
    h, i, e, v = (config.hidden_size, config.intermediate_size,
                  config.embedding_size, config.vocab_size)
    tokens = batch * seq
    per_token_layer = 4 * h * h + 2 * h * i + 2 * seq * h  # MACs
    forward_macs = (tokens * (e * h + config.num_hidden_layers * per_token_layer)
                    + batch * predictions * (h * e + e * v) + batch * (h * h + 2 * h))
    return 3 * 2 * forward_macs


def synthetic_batch(config, batch, seq, predictions, seed=0):
    rng = np.random.default_rng(seed)
    positions = np.sort(np.stack([rng.choice(seq, predictions, replace=False)
                                  for _ in range(batch)]), axis=1)
    ids = rng.integers(5, config.vocab_size, (batch, seq))
    return {
        "input_word_ids": tf.constant(ids, tf.int32),
        "input_mask": tf.ones((batch, seq), tf.int32),
        "input_type_ids": tf.zeros((batch, seq), tf.int32),
        "masked_lm_positions": tf.constant(positions, tf.int32),
        "masked_lm_ids": tf.constant(np.take_along_axis(ids, positions, 1), tf.int32),
        "masked_lm_weights": tf.ones((batch, predictions), tf.float32),
        "next_sentence_labels": tf.constant(rng.integers(0, 2, batch), tf.int32),
    }


def _time_interleaved(runs, repeats):
    """Median seconds per call of each callable, windows taken round-robin.

    Every callable is run once first (compile, warm up); then each timing
    window runs all of them in turn, so a change in machine load during the
    benchmark hits every row alike and the ratios stay comparable.
    """
    for run in runs.values():
        run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def albert_tf_row(config, features, dtype, steps, jit_compile=None):
    """A callable running `steps` steps of the driver's compiled loop."""
    from albert_tf.training import pretraining as train_lib

    options = train_lib.PretrainingOptions(
        input_file="unused", output_dir="unused", config=config,
        train_batch_size=features["input_word_ids"].shape[0],
        max_seq_length=features["input_word_ids"].shape[1],
        max_predictions_per_seq=features["masked_lm_positions"].shape[1],
        num_train_steps=10**6, num_warmup_steps=10, dtype=dtype,
        jit_compile=jit_compile)
    from albert_tf.training.trainer import Trainer

    trainer = Trainer(train_lib.PretrainingTask(options), options)
    train_loop = trainer._compiled()[0]
    dataset = tf.data.Dataset.from_tensors(features).repeat()
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    num = tf.constant(steps, tf.int32)
    return lambda: train_loop(iterator, num)[0].numpy()


def keras_hub_row(config, features, steps, jit_compile=True):
    """A callable running `steps` keras-hub training steps."""
    import keras_hub
    from keras_hub.layers import MaskedLMHead

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=0.0,
        max_sequence_length=config.max_position_embeddings)
    mlm_head = MaskedLMHead(vocabulary_size=config.vocab_size,
                            token_embedding=backbone.token_embedding,
                            intermediate_activation="gelu")
    sop_head = keras.layers.Dense(2)
    optimizer = keras.optimizers.Adam(1e-4)
    inputs = {"token_ids": features["input_word_ids"],
              "segment_ids": features["input_type_ids"],
              "padding_mask": features["input_mask"]}
    outputs = backbone(inputs)
    mlm_head(outputs["sequence_output"], features["masked_lm_positions"])
    sop_head(outputs["pooled_output"])
    variables = (backbone.trainable_variables + mlm_head.trainable_variables
                 + sop_head.trainable_variables)
    optimizer.build(variables)
    mlm_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            out = backbone(inputs, training=True)
            logits = mlm_head(out["sequence_output"], features["masked_lm_positions"])
            loss = mlm_loss(features["masked_lm_ids"], logits,
                            sample_weight=features["masked_lm_weights"])
            loss += mlm_loss(features["next_sentence_labels"],
                             sop_head(out["pooled_output"]))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    @tf.function
    def loop():
        for _ in tf.range(steps):
            loss = step()
        return loss

    return lambda: loop().numpy()


MATMUL_INNER = 8


def matmul_rows(size, dtype):
    """Callables running `MATMUL_INNER` `size`^2 matmuls, XLA and not."""
    # Distinct operands: identical matmuls would be computed once.
    a = tf.cast(tf.random.normal((MATMUL_INNER, size, size)), dtype)
    b = tf.cast(tf.random.normal((size, size)), dtype)
    runs = {}
    for jit_compile in (True, False):
        @tf.function(jit_compile=jit_compile)
        def run(a, b):
            acc = tf.zeros((size, size), dtype)
            for i in range(MATMUL_INNER):
                acc += tf.matmul(a[i], b)
            return acc

        runs[jit_compile] = lambda run=run: run(a, b).numpy()
    return runs


def main(argv):
    del argv
    from albert_tf import AlbertConfig

    config = AlbertConfig.from_preset("albert_base_v2")
    batch, seq, predictions = _BATCH.value, _SEQ.value, _PREDICTIONS.value
    features = synthetic_batch(config, batch, seq, predictions)
    flops = step_flops(config, batch, seq, predictions)
    steps, size = _STEPS.value, _MATMUL.value
    runs, peak_of = {}, {}
    for dtype in (tf.float32, tf.bfloat16):
        for jit_compile, run in matmul_rows(size, dtype).items():
            runs[("matmul", dtype.name, jit_compile)] = run
    for row in _ROWS.value:
        if row.startswith("albert_tf_"):
            dtype, _, xla = row[len("albert_tf_"):].partition("_")
            if dtype not in ("float32", "bfloat16") or xla not in ("", "xla"):
                raise app.UsageError(f"Unknown row {row!r}")
            runs[row] = albert_tf_row(config, features, dtype, steps,
                                      jit_compile=True if xla else None)
            peak_of[row] = tf.as_dtype(dtype)
        elif row in ("keras_hub_float32", "keras_hub_float32_noxla"):
            runs[row] = keras_hub_row(config, features, steps,
                                      jit_compile=not row.endswith("noxla"))
            peak_of[row] = tf.float32
        else:
            raise app.UsageError(f"Unknown row {row!r}")
    medians = _time_interleaved(runs, _REPEATS.value)
    # The reachable rate: the faster of XLA and TensorFlow's kernel.
    peak = {dtype: max(MATMUL_INNER * 2 * size ** 3 / medians[("matmul", dtype.name, jit)]
                       for jit in (True, False))
            for dtype in (tf.float32, tf.bfloat16)}
    rows = [(row, medians[row] / steps, peak[peak_of[row]]) for row in _ROWS.value]
    seconds_of = dict((r[0], r[1]) for r in rows)
    base = seconds_of.get("keras_hub_float32")
    hub = [seconds_of[r] for r in ("keras_hub_float32", "keras_hub_float32_noxla")
           if r in seconds_of]
    best_hub = min(hub) if hub else None
    print(f"ALBERT-base pretraining step: batch {batch} x seq {seq}, "
          f"{predictions} predictions/seq, {flops / 1e9:.1f} GFLOP/step; "
          f"medians of {_REPEATS.value} windows x {_STEPS.value} steps; "
          f"{os.cpu_count()} CPU cores")
    print(f"{'row':24s} {'ms/step':>9s} {'tokens/s':>9s} {'GFLOP/s':>8s} "
          f"{'% matmul':>9s} {'vs keras-hub':>13s} {'vs best hub':>12s}")
    for name, seconds, reference in rows:
        rate = flops / seconds
        speedup = f"{base / seconds:.2f}x" if base else "-"
        best = f"{best_hub / seconds:.2f}x" if best_hub else "-"
        print(f"{name:24s} {seconds * 1e3:9.1f} {batch * seq / seconds:9.0f} "
              f"{rate / 1e9:8.1f} {100 * rate / reference:8.0f}% {speedup:>13s} "
              f"{best:>12s}")
    for dtype, rate in peak.items():
        print(f"{'tf.matmul ' + dtype.name:24s} {'':9s} {'':9s} {rate / 1e9:8.1f} "
              f"{'100%':>9s}")


if __name__ == "__main__":
    app.run(main)
