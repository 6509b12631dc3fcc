"""`python -m benchmarks.finetune_parity`: runs `main` of the package."""

import sys

from benchmarks.finetune_parity import main

if __name__ == "__main__":
    sys.exit(main())
