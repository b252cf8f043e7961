"""``python -m tools.container``: see :mod:`tools.container.cli`."""

import sys

from tools.container.cli import main

sys.exit(main())
