"""This repository's top-level packages must not collide with an installed distribution's.

`kernels/` and `tools/` sit on sys.path in the tests (pytest `pythonpath = ["."]`), so an installed
package of the same import name is shadowed. transformers 5.25 made Hugging Face's `kernels`
package a hard dependency and imports it with `import transformers`; our `kernels/` shadowed it
and tests/e2e failed in CI with "cannot import name 'CUDAProperties' from 'kernels'". This test
names the colliding distribution directly instead of failing deep inside an import.
"""

from importlib import metadata

OUR_TOP_LEVEL = ("kernels", "tools")
OUR_DISTRIBUTION = "gdn-ucache"


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-")


def test_no_installed_distribution_shares_our_top_level_names() -> None:
    providers = metadata.packages_distributions()
    clashes = {
        name: sorted(d for d in providers.get(name, []) if _normalise(d) != OUR_DISTRIBUTION)
        for name in OUR_TOP_LEVEL
    }
    clashes = {name: dists for name, dists in clashes.items() if dists}
    assert not clashes, (
        f"installed distributions provide top-level modules that this repository's directories "
        f"shadow: {clashes}. Uninstall them from the test venv or pin the dependency that pulls "
        f"them in (pyproject.toml, the `test` extra; e.g. transformers<5.25 pulls no `kernels`)."
    )
