"""The image's install step (``python -m tools.container install``) on a synthetic vllm install.

The synthetic project of tests/fixtures exports real format-patch files; its sdist's ``vllm/``
stands in for an installed package (site dir), as the image's dist-packages would.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.fixtures.synthetic_upstream import (
    REPO_ROOT,
    SyntheticProject,
    add_standard_patches,
    make_project,
)
from tools.container.check import (
    build_test_tree,
    module_name,
    pristine_problems,
    selected_tests,
    series_test_files,
)
from tools.series.layout import Layout


def _install_site(project: SyntheticProject, version: str, site: Path) -> Path:
    """Unpack vllm/ of the synthetic sdist <version> into site, like a pip install."""
    with tarfile.open(project.cache / "sdist" / f"vllm-{version}.tar.gz") as archive:
        for member in archive.getmembers():
            rel = member.name.split("/", 1)[1]
            if rel.startswith("vllm/") and member.isfile():
                target = site / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
    return site


def _run_install(
    project: SyntheticProject, site: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.container", "install", "--site", str(site), *extra],
        cwd=REPO_ROOT,
        env=project.env(),
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def patched(tmp_path: Path) -> SyntheticProject:
    project = make_project(tmp_path)
    project.run("populate-vllm")
    add_standard_patches(project)
    return project


def test_install_applies_series_and_lists_changed_files(
    patched: SyntheticProject, tmp_path: Path
) -> None:
    site = _install_site(patched, "1.0.0", tmp_path / "site")
    manifest = tmp_path / "out" / "series-manifest.txt"
    result = _run_install(patched, site, "--manifest", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr
    # apply.sh prints each file it writes; the step then lists them again, with the action.
    assert "applying 2 patch(es) (3 vllm file(s))" in result.stdout
    assert f"modify {site / 'vllm/config.py'}" in result.stdout
    assert "3 file(s) changed" in result.stdout
    text = manifest.read_text()
    assert "patch_count=2" in text
    assert "vllm_version=1.0.0" in text
    for line in ("modify vllm/config.py", "create vllm/ucache.py", "modify vllm/engine.py"):
        assert line in text
    assert "tests/" not in text  # only the package part goes into an installed vllm
    sha = hashlib.sha256((site / "vllm/ucache.py").read_bytes()).hexdigest()
    assert f"create vllm/ucache.py sha256={sha}" in text
    assert "use_replayssm_spec" in (site / "vllm/config.py").read_text()
    # Changed modules are byte-compiled, so a read-only container does not recompile them.
    assert list((site / "vllm/__pycache__").glob("ucache.*.pyc"))


def test_install_twice_changes_nothing(patched: SyntheticProject, tmp_path: Path) -> None:
    site = _install_site(patched, "1.0.0", tmp_path / "site")
    assert _run_install(patched, site).returncode == 0
    before = {p: p.read_bytes() for p in (site / "vllm").glob("*.py")}
    again = _run_install(patched, site)
    assert again.returncode == 0, again.stderr
    assert "0 file(s) changed" in again.stdout
    assert "unchanged vllm/config.py" in again.stdout
    assert before == {p: p.read_bytes() for p in (site / "vllm").glob("*.py")}


def test_install_refuses_other_vllm_version(patched: SyntheticProject, tmp_path: Path) -> None:
    site = _install_site(patched, "1.1.0", tmp_path / "site")
    original = (site / "vllm/config.py").read_text()
    result = _run_install(patched, site)
    assert result.returncode != 0
    assert "pinned to 1.0.0" in result.stderr and "--force" in result.stderr
    assert (site / "vllm/config.py").read_text() == original
    forced = _run_install(patched, site, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "warning:" in forced.stdout


def test_install_without_vllm_names_the_fix(patched: SyntheticProject, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _run_install(patched, empty)
    assert result.returncode != 0
    assert "holds no installed vllm package" in result.stderr


def test_series_tests_come_from_sdist_plus_patches(
    patched: SyntheticProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GDN_UCACHE_CACHE", str(patched.cache))
    monkeypatch.setenv("GDN_UCACHE_OFFLINE", "1")
    layout = Layout(patched.root)
    assert series_test_files(layout) == ["tests/test_ucache.py"]
    tree = tmp_path / "tree"
    build_test_tree(layout, tree)
    assert (tree / "tests/test_engine.py").is_file()  # from the sdist
    assert "def test_ring" in (tree / "tests/test_ucache.py").read_text()  # from the patch
    assert not (tree / "vllm").exists()  # tests must import the installed, patched vllm


def test_module_names() -> None:
    assert module_name("vllm/config/cache.py") == "vllm.config.cache"
    assert module_name("vllm/v1/__init__.py") == "vllm.v1"
    assert module_name("vllm/model_executor/layers/config.json") is None


def _record_line(site: Path, rel: str) -> str:
    digest = hashlib.sha256((site / rel).read_bytes()).digest()
    return f"{rel},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},1\n"


def test_pristine_check_against_record(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm/__init__.py").write_text("")
    (site / "vllm/envs.py").write_text("A = 1\n")
    dist = site / "vllm-1.0.0.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text(
        _record_line(site, "vllm/__init__.py")
        + _record_line(site, "vllm/envs.py")
        + "vllm-1.0.0.dist-info/RECORD,,\n"
    )
    assert pristine_problems(site) == []
    (site / "vllm/envs.py").write_text("A = 2\n")
    (site / "vllm/ucache.py").write_text("")
    (site / "vllm/__pycache__").mkdir()
    (site / "vllm/__pycache__/envs.cpython-311.pyc").write_bytes(b"")
    assert sorted(pristine_problems(site)) == ["changed vllm/envs.py", "extra vllm/ucache.py"]


def test_changed_upstream_test_file_runs_only_the_series_tests(tmp_path: Path) -> None:
    original = (
        "import pytest\n\n\ndef test_upstream():\n    assert True\n\n\n"
        "class TestUpstream:\n    def test_a(self):\n        assert True\n"
    )
    changed = original.replace(
        "class TestUpstream:",
        "@pytest.mark.parametrize('x', [1, 2])\ndef test_series(x):\n    assert x\n\n\n"
        "class TestUpstream:",
    ).replace("def test_upstream():\n    assert True", "def test_upstream():\n    assert 1")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_config.py").write_text(changed)
    selected = selected_tests(tmp_path, "tests/test_config.py", original)
    assert selected == ["tests/test_config.py::test_upstream", "tests/test_config.py::test_series"]
    # A file the series adds runs whole.
    assert selected_tests(tmp_path, "tests/test_config.py", None) == ["tests/test_config.py"]
