"""`python -m albert_tf.run_pretraining`: the official entry name of `albert_tf.cli.run_pretraining`."""

from albert_tf.cli.run_pretraining import main

if __name__ == "__main__":
    main()
