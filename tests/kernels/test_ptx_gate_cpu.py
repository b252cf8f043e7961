"""bench/ptx_gate.py: the PTX comparison that proves a kernel refactor changes no compiled code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench import ptx_gate

NEXT = ptx_gate.ROOT / "kernels" / "gdn_ucache_flush_next.py"


def test_every_quick_config_is_in_the_matrix() -> None:
    assert set(ptx_gate.QUICK) <= set(ptx_gate.CONFIGS)
    variant, env = ptx_gate.CONFIGS["late10_bv128_t1early_t1l2"]
    assert variant[8] == 10 and env == {"GDN_UCACHE_T1EARLY": "1", "GDN_UCACHE_T1L2": "1"}
    variant, env = ptx_gate.CONFIGS["late13_bv128_sr"]
    assert variant[7] == 1 and env == {"GDN_UCACHE_STATE_SR": "1"}


def test_identical_copy_passes_and_a_changed_constant_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("cutlass") is None:
        pytest.skip("CuTe-DSL (nvidia-cutlass-dsl) not installed")
    text = NEXT.read_text()
    same = tmp_path / "same" / NEXT.name
    same.parent.mkdir()
    same.write_text(text.replace('"""Fused GDN', '"""(a docstring edit) Fused GDN', 1))
    args = ["--old", str(NEXT), "--configs", "late3_bv128"]
    assert ptx_gate.main(["--kernel", str(same), *args]) == 0
    assert "1/1 configurations byte-identical" in capsys.readouterr().out
    changed = tmp_path / "changed" / NEXT.name
    changed.parent.mkdir()
    assert "EPS = 1e-6" in text
    changed.write_text(text.replace("EPS = 1e-6", "EPS = 1e-5", 1))
    assert ptx_gate.main(["--kernel", str(changed), *args]) == 1
    assert "DIFFERS" in capsys.readouterr().out
