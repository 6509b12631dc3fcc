r"""Converts ALBERT weights between formats.

Sources: this project's model directory (`albert_tf`), an official TF1 release
or TF-Hub module (`tf1`), a Hugging Face directory (`huggingface`), a keras-hub
preset (`keras_hub`). Targets: `albert_tf` (default; ready for
`run_pretraining --init_checkpoint`, fine-tuning and export), `tf1`,
`huggingface`.

    python -m albert_tf.convert_checkpoint --source=tf1 \
        --input=albert_base/ --output_dir=models/albert_base_v2
    python -m albert_tf.convert_checkpoint --source=albert_tf \
        --input=models/mine --output_dir=exports/mine_hf --target=huggingface
    python -m albert_tf.convert_checkpoint --input=albert_base_v2 \
        --output_dir=models/albert_base_v2     # released weights by name
    python -m albert_tf.convert_checkpoint --input=runs/pretrain/best \
        --output_dir=exports/run_hf --target=huggingface \
        --spm_model_file=vocab/30k-clean.model  # a training run's best/

The output directory is written whole or not at all, and holds
`conversion_report.txt`, the fate of every source tensor. A training run's
folder holds no vocabulary: the conversion takes `--spm_model_file`, or the
one the run's records name (`--init_checkpoint`'s); `--target=huggingface`
without one is refused before anything is written. The flags are the
fields of `albert_tf.convert.options.ConvertOptions`; the work is done by
`albert_tf.convert.pretrained.convert_checkpoint`.
"""

from absl import logging

from albert_tf.convert.options import ConvertOptions
from foundation import flag_options


def convert(options):
    """Converts as `options` (a `ConvertOptions`) say.

    Returns:
        The `ConversionReport` (its counts are logged).

    Raises:
        ValueError, OSError: bad inputs (nothing is written).
    """
    from albert_tf.convert import pretrained
    try:
        report = pretrained.convert_checkpoint(
            pretrained.local_model_path(options.input), options.output_dir,
            source=options.source,
            target=options.target, config_file=options.config_file,
            overwrite=options.overwrite,
            spm_model_file=options.spm_model_file,
            do_lower_case=options.do_lower_case)
    except flag_options.USER_ERRORS:
        # Said before the error itself, which the program prints last.
        logging.error("Conversion failed, nothing written to %s",
                      options.output_dir)
        raise
    logging.info("%d tensors mapped, %d skipped, %d absent; see %s/%s",
                 len(report.mapped), len(report.skipped), len(report.absent),
                 options.output_dir, "conversion_report.txt")
    return report


def main(argv=None):
    logging.set_verbosity(logging.INFO)
    flag_options.run_program(ConvertOptions, convert, argv, doc=__doc__)


if __name__ == "__main__":
    main()
