"""`python -m albert_tf.run_race`: the official entry name of `albert_tf.cli.run_race`."""

from albert_tf.cli.run_race import main

if __name__ == "__main__":
    main()
