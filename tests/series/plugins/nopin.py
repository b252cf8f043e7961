"""pytest plugin: no pinned memory on a GPU-less host whose torch is a CUDA build.

vLLM's UnspecifiedPlatform reports pinned memory as available there, and pinning then fails.
Used only by tests/series/run_patch_tests.py.
"""


def pytest_configure(config: object) -> None:
    import vllm.utils.torch_utils as torch_utils

    torch_utils.PIN_MEMORY = False
