"""`python -m albert_tf.convert_checkpoint`: the official entry name of `albert_tf.cli.convert_checkpoint`."""

from albert_tf.cli.convert_checkpoint import main

if __name__ == "__main__":
    main()
