"""Training: losses, the official optimizers, strategies, checkpoints, the
input pipeline, and the one `Trainer` that pretraining and fine-tuning use."""
