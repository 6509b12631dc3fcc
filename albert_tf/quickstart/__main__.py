"""`python -m albert_tf.quickstart`: says where the main job went."""

import sys

from albert_tf.quickstart import MOVED_TO

if __name__ == "__main__":
    sys.exit("The main job moved: run `python -m %s` (same flags)." % MOVED_TO)
