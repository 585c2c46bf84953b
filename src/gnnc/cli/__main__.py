"""``python -m gnnc.cli``: the ``gnnc`` command."""

import sys

from . import main

sys.exit(main())
