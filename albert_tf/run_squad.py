"""`python -m albert_tf.run_squad`: the official entry name of `albert_tf.cli.run_squad`."""

from albert_tf.cli.run_squad import main

if __name__ == "__main__":
    main()
