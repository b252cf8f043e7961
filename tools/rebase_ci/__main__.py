"""``python -m tools.rebase_ci``: see :mod:`tools.rebase_ci.cli`."""

import sys

from tools.rebase_ci.cli import main

sys.exit(main())
