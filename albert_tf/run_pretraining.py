"""Pretrains ALBERT (MLM + SOP): `python -m albert_tf.run_pretraining`.

Flags keep the official `run_pretraining.py` names; `--strategy`, `--dtype`,
`--gradient_accumulation_steps`, `--preset`, `--dynamic_masking` and
`--max_train_seconds` are this project's. The flags are the fields of
`albert_tf.training.options.PretrainingOptions`; the work is done by
`albert_tf.training.pretraining.run_pretraining`.

Example (CPU, tiny model):

    python -m albert_tf.run_pretraining --input_file='data/*.tfrecord' \\
        --output_dir=runs/tiny --preset=tiny --train_batch_size=32 \\
        --max_seq_length=128 --num_train_steps=1000 --num_warmup_steps=100 \\
        --learning_rate=1e-3 --iterations_per_loop=50 --do_eval
"""

from absl import logging

from albert_tf import cli
from albert_tf.training.options import PretrainingOptions


def run(options):
    """Runs pretraining under the strategy the options name; logs results."""
    # Here, not at the top: TensorFlow loads after the flags are read.
    from albert_tf.convert import pretrained
    from albert_tf.training import pretraining
    task = pretraining.PretrainingTask(
        options, load_weights=pretrained.restore_into,
        find_vocabulary=pretrained.spm_model_path)
    report = pretraining.run_pretraining(options, cli.strategy_for(options),
                                         task)
    for result in report.get("eval_results", []):
        logging.info("eval %s", result)
    return report


def main(argv=None):
    cli.run_training_program(PretrainingOptions, run, __doc__, argv)


if __name__ == "__main__":
    main()
