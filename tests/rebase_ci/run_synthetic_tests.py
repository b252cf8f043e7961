"""Run the synthetic upstream's ``tests/test_*.py`` functions; exit 1 on the first failure.

The per-patch test command of the fixture, run from a checkout of the synthetic upstream: a
few milliseconds where a pytest start-up costs a second (the matrix runs it once per patch
and release, bisect once per step).
"""

import glob
import runpy
import sys
import traceback

sys.path.insert(0, ".")
for path in sorted(glob.glob("tests/test_*.py")):
    for name, function in runpy.run_path(path).items():
        if name.startswith("test_") and callable(function):
            try:
                function()
            except Exception:
                traceback.print_exc()
                print(f"FAILED {path}::{name}")
                sys.exit(1)
print("passed")
