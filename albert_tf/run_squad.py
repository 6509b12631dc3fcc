"""`python -m albert_tf.run_squad`: says where the program went.

The program exports SavedModels, so it sits above `export/` in the layer
order: `python -m albert_apps.run_squad`, with the same flags.
"""

import sys

MOVED_TO = "albert_apps.run_squad"

if __name__ == "__main__":
    sys.exit("run_squad moved: run `python -m %s` (same flags)."
             % MOVED_TO)
