"""pytest plugin: run vLLM's own Triton kernels in Triton's CPU interpreter.

vLLM disables Triton on a host without a GPU driver (vllm.triton_utils.importing), so under
TRITON_INTERPRET=1 this loads that module first, from VLLM_SRC_ROOT, with HAS_TRITON forced on.
Used only by tests/series/run_patch_tests.py on GPU-less hosts.
"""

import importlib.util
import os
import sys

root = os.environ["VLLM_SRC_ROOT"]
spec = importlib.util.spec_from_file_location(
    "vllm.triton_utils.importing", os.path.join(root, "vllm/triton_utils/importing.py")
)
module = importlib.util.module_from_spec(spec)
assert spec is not None and spec.loader is not None
spec.loader.exec_module(module)
module.HAS_TRITON = True
sys.modules["vllm.triton_utils.importing"] = module
