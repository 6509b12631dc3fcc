"""Keras models built from `albert_tf.layers`: the encoder, the pretrainer
(encoder + MLM + SOP heads) and the fine-tuning task models."""
