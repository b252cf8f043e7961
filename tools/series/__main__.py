"""``python -m tools.series``: see :mod:`tools.series.cli`."""

import sys

from tools.series.cli import main

sys.exit(main())
