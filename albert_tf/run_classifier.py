"""`python -m albert_tf.run_classifier`: says where the program went.

The program exports SavedModels, so it sits above `export/` in the layer
order: `python -m albert_apps.run_classifier`, with the same flags.
"""

import sys

MOVED_TO = "albert_apps.run_classifier"

if __name__ == "__main__":
    sys.exit("run_classifier moved: run `python -m %s` (same flags)."
             % MOVED_TO)
