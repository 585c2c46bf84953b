"""Run the benchmark suite: ``python bench/run.py [--quick] [--models ...] [--datasets ...] [--systems ...]``.

Same as ``gnnc bench``; see bench/README.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.cli import main  # needs the path above

if __name__ == "__main__":
    sys.exit(main())
