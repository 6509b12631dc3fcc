"""`python -m albert_tf.run_classifier`: the official entry name of `albert_tf.cli.run_classifier`."""

from albert_tf.cli.run_classifier import main

if __name__ == "__main__":
    main()
