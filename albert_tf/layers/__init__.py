"""Keras layers: activations, the factorized embedding, the transformer
sub-blocks, the MLM/SOP heads and the fine-tuning heads (no models here)."""
