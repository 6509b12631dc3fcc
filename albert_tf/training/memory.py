"""A training run's memory, estimated before it starts.

Four parts, in bytes:

- parameters: float32 variables (mixed precision keeps them float32);
- optimizer: LAMB and AdamW keep two float32 slots per parameter, and the
  step holds the float32 gradients (one more copy with gradient accumulation,
  which sums them; under bfloat16 the casts of the weights add half a copy);
- shared gradients: a kernel shared by L layers gets L gradients in the
  backward pass, one per use, summed once all exist; for ALBERT-xxlarge
  (one block used 12 times) this is the largest term (docs/benchmarks.md,
  "Memory");
- activations: what the backward pass keeps of one example, times the
  micro-batch (`train_batch_size / replicas / gradient_accumulation_steps`):
  per layer and token, the sub-blocks' inputs, projections, GELU input and
  output and LayerNorm outputs (`8H + 2I` values in the compute dtype) and
  the attention probabilities with their float32 softmax (`N * T` each);
  plus the embeddings and the MLM logits;
- the total of the four.

It is an estimate of what the step must hold at once, not of TensorFlow's
allocator: `benchmarks/memory.py` measures the peak resident memory of real
steps next to it.

Shape legend: T sequence length, E embedding, H hidden, I intermediate,
N heads, L executed layers, P predictions, V vocabulary.
"""

from absl import logging

GIB = 1024 ** 3


def shared_block_parameters(config):
    """Parameters of the sub-blocks each used by several layers."""
    h, i = config.hidden_size, config.intermediate_size
    attention = 4 * h * h + 4 * h + 2 * h  # Q, K, V, output; LayerNorm.
    ffn = 2 * h * i + i + h + 2 * h
    shared = {"all": attention + ffn, "attention": attention, "ffn": ffn,
              "none": 0}[config.share]
    return shared * config.num_hidden_groups * config.inner_group_num


def estimate(config, num_params, seq_length, micro_batch, dtype="float32",
             gradient_accumulation_steps=1, predictions=0):
    """Bytes of one training step's parameters, optimizer, activations.

    Args:
        config: the `AlbertConfig`.
        num_params: the model's parameter count.
        seq_length: T.
        micro_batch: examples per forward pass on one replica.
        dtype: "float32" or "bfloat16" (the compute dtype).
        gradient_accumulation_steps: micro-batches per step.
        predictions: masked positions per example (P; 0 for fine-tuning).

    Returns:
        A dict: `parameters`, `optimizer` (slots and gradients),
        `shared_gradients`, `activations_per_example`, `activations` and
        `total`.
    """
    c = 2 if dtype == "bfloat16" else 4
    h, i, n = config.hidden_size, config.intermediate_size, config.num_attention_heads
    t, layers = seq_length, config.num_hidden_layers
    parameters = 4 * num_params
    gradient_copies = 1 + (gradient_accumulation_steps > 1)
    optimizer = 4 * num_params * (2 + gradient_copies) + (
        2 * num_params if c == 2 else 0)
    uses = config.num_hidden_layers // config.num_hidden_groups
    shared_gradients = (c * shared_block_parameters(config) * uses
                        if uses > 1 else 0)
    per_token_layer = c * (8 * h + 2 * i) + n * t * (c + 4)
    per_example = (layers * t * per_token_layer
                   + t * (config.embedding_size + h) * c
                   + 2 * 4 * predictions * config.vocab_size)
    activations = per_example * micro_batch
    return {"parameters": parameters, "optimizer": optimizer,
            "shared_gradients": shared_gradients,
            "activations_per_example": per_example, "activations": activations,
            "total": parameters + optimizer + shared_gradients + activations}


def describe(numbers, micro_batch):
    """One log line of `estimate`'s numbers, in GiB."""
    return ("parameters %.2f GiB, optimizer slots and gradients %.2f GiB, "
            "per-use gradients of shared kernels %.2f GiB, activations %.2f "
            "GiB per example x %d = %.2f GiB; about %.1f GiB in all" % (
                numbers["parameters"] / GIB, numbers["optimizer"] / GIB,
                numbers["shared_gradients"] / GIB,
                numbers["activations_per_example"] / GIB, micro_batch,
                numbers["activations"] / GIB, numbers["total"] / GIB))


def log_estimate(config, model, options, num_replicas, dtype):
    """Logs the estimate of one replica's training step (nothing for a
    model without an `AlbertConfig` or a job without `max_seq_length`).

    Args:
        config: the model's `AlbertConfig`, or None.
        model: the built model (its parameter count).
        options: the job's options (batch, sequence and masking sizes).
        num_replicas: replicas in sync.
        dtype: the run's resolved `--dtype`, "float32" or "bfloat16" (a
            model's own policy does not say it: its layers carry it).
    """
    seq_length = getattr(options, "max_seq_length", None)
    if config is None or not seq_length:
        return
    micro_batch = (options.train_batch_size // num_replicas
                   // options.gradient_accumulation_steps)
    numbers = estimate(config, model.count_params(), seq_length, micro_batch,
                       dtype, options.gradient_accumulation_steps,
                       getattr(options, "max_predictions_per_seq", 0))
    logging.info("Memory estimate per replica: %s.",
                 describe(numbers, micro_batch))
