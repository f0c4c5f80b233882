"""``python -m context_neurons.training [train] ...`` or ``... analyze RUN_DIR``."""

import sys

from context_neurons.training.cli import main

if __name__ == "__main__":
    sys.exit(main())
