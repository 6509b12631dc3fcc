"""The dtypes an export's model can compute in, named once.

No TensorFlow here: the option modules name them in `--serving_dtype`
before TensorFlow loads. `albert_tf.models.serving_copy` builds a model in
each; `export.serving_dtype_auto` measures them to pick one for "auto".
"""

SERVING_DTYPES = ("float32", "bfloat16", "int8")
# What `--serving_dtype` takes: a serving dtype, or "auto" (the fastest one
# whose outputs agree with float32 on the exporting machine).
SERVING_DTYPE_CHOICES = SERVING_DTYPES + ("auto",)
