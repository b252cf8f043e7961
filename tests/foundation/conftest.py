"""Fixtures for the series-tooling tests (see tests/fixtures/synthetic_upstream.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.synthetic_upstream import SyntheticProject, add_standard_patches, make_project


@pytest.fixture
def project(tmp_path: Path) -> SyntheticProject:
    """A synthetic project with vllm/ populated (base 1.0.0) and no patches."""
    synthetic = make_project(tmp_path)
    synthetic.run("populate-vllm")
    return synthetic


@pytest.fixture
def patched(project: SyntheticProject) -> SyntheticProject:
    """The project with two patches committed on gdn-ucache and exported to patches/."""
    add_standard_patches(project)
    return project
