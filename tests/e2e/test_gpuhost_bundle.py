"""The offline GPU-host bundle (#10): builder and host-side stage/unpack on small fake inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tools.gpuhost import bundle, host

TOP = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("xz") is None, reason="needs the xz CLI")


def make_wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


@pytest.fixture()
def inputs(tmp_path: Path) -> dict:
    """A fake project: vllm tree (patched files), vllm wheel, two dependency wheels, cutlass."""
    cache = tmp_path / "cache"
    wheels = cache / "gpu-host-wheels"
    wheels.mkdir(parents=True)
    big = os.urandom(300_000)  # incompressible: forces several chunks at a small chunk size
    vllm_wheel = make_wheel(
        wheels / "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        {
            "vllm/__init__.py": b"# from the wheel\n",
            "vllm/_C_stable_libtorch.abi3.so": big,
            "vllm/_vllm_fa2_C.abi3.so": b"not kept",
            "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so": b"fa3",
            "vllm/vllm_flash_attn/layers/rotary.py": b"# wheel-only python\n",
            "vllm/vllm-rs": b"binary not kept",
            "vllm-0.33.0.dist-info/METADATA": b"Name: vllm\nVersion: 0.33.0\n",
        },
    )
    make_wheel(
        wheels / "pydantic-2.14.4-py3-none-any.whl",
        {
            "pydantic/__init__.py": b"VERSION = '2.14.4'\n",
            "pydantic-2.14.4.dist-info/METADATA": b"",
        },
    )
    make_wheel(
        wheels / "blake3-1.0.11-cp312-cp312-manylinux_2_17_x86_64.whl",
        {
            "blake3-1.0.11.data/platlib/blake3/__init__.py": b"# lifted from .data/platlib\n",
            "blake3-1.0.11.data/scripts/tool": b"#!/bin/sh\n",
            "blake3-1.0.11.dist-info/METADATA": b"",
            # Like CuTe-DSL's: a .pth that imports its package and extends sys.path from it.
            "fake_dsl/__init__.py": b"",
            "fake_dsl_packages.pth": b"import sys, os, fake_dsl; "
            b"sys.path.insert(0, os.path.join(fake_dsl.__path__[0], 'extra'))\n",
        },
    )
    spec_file = tmp_path / "wheels.txt"
    spec_file.write_text("# comment\npydantic==2.14.4\nblake3==1.0.11  # compiled\n")
    tree = tmp_path / "series"
    (tree / "vllm/model_executor").mkdir(parents=True)
    (tree / "vllm/__init__.py").write_text("# patched tree\n")
    (tree / "vllm/model_executor/gdn.py").write_text("PATCHED = True\n")
    return {
        "cache": cache,
        "vllm_wheel": vllm_wheel,
        "spec_file": spec_file,
        "tree": tree,
        "big": big,
    }


def build(tmp_path: Path, inputs: dict, chunk_bytes: int = 120_000) -> tuple[Path, dict]:
    out = tmp_path / "out"
    cfg = bundle.BundleConfig(
        top=TOP,
        out=out,
        cache=inputs["cache"],
        vllm_repo=tmp_path / "no-repo",
        vllm_tree_dir=inputs["tree"],
        vllm_wheel=inputs["vllm_wheel"],
        wheels_file=inputs["spec_file"],
        chunk_bytes=chunk_bytes,
        components=("vllm", "wheels", "project"),
        download=False,
        xz_big=("-T1", "-1"),
        xz_small=("-T1", "-1"),
    )
    manifest = bundle.build(cfg, log=lambda *a: None)
    return out, json.loads((out / "MANIFEST.json").read_text()) | {"_obj": manifest}


def test_build_chunks_and_plan(tmp_path: Path, inputs: dict) -> None:
    out, manifest = build(tmp_path, inputs)
    chunks = manifest["chunks"]
    assert len(chunks) >= 3, "300 kB of random bytes at 120 kB per chunk"
    assert all(c["size"] <= 120_000 for c in chunks)
    assert sum(c["size"] for c in chunks) == manifest["total_bytes"]
    assert [c["call"] for c in chunks] == list(range(1, len(chunks) + 1))
    names = [c["name"] for c in manifest["components"]]
    assert names == ["vllm", "wheels", "project"]
    plan = (out / "PLAN.md").read_text()
    for c in chunks:
        assert c["name"] in plan
    assert "host.py unpack" in plan and (out / "host.py").is_file()


def test_cached_components_are_reused(tmp_path: Path, inputs: dict) -> None:
    build(tmp_path, inputs)
    messages: list[str] = []
    cfg_out = tmp_path / "out2"
    cfg = bundle.BundleConfig(
        top=TOP,
        out=cfg_out,
        cache=inputs["cache"],
        vllm_repo=tmp_path / "no-repo",
        vllm_tree_dir=inputs["tree"],
        vllm_wheel=inputs["vllm_wheel"],
        wheels_file=inputs["spec_file"],
        chunk_bytes=120_000,
        components=("vllm", "wheels"),
        download=False,
        xz_big=("-1",),
        xz_small=("-1",),
    )
    bundle.build(cfg, log=messages.append)
    assert any(m.startswith("vllm: cached") for m in messages)
    # A patched file changes: the vllm component is rebuilt.
    (inputs["tree"] / "vllm/model_executor/gdn.py").write_text("PATCHED = 2\n")
    messages.clear()
    bundle.build(cfg, log=messages.append)
    assert any(m.startswith("vllm: packing") for m in messages)


def test_host_stage_over_calls_then_unpack(tmp_path: Path, inputs: dict) -> None:
    out, manifest = build(tmp_path, inputs)
    root = tmp_path / "host"
    chunks = manifest["chunks"]
    # Each device call carries MANIFEST.json + one chunk (the plan's carry list).
    for i, chunk in enumerate(chunks):
        carried = tmp_path / f"call{i}"
        carried.mkdir()
        shutil.copy(out / "MANIFEST.json", carried)
        shutil.copy(out / chunk["name"], carried)
        missing = host.stage(carried, root, log=lambda *a: None)
        assert len(missing) == len(chunks) - i - 1
        if missing:
            with pytest.raises(host.HostError, match="chunks missing"):
                host.unpack(root, log=lambda *a: None)
    env = host.unpack(root, log=lambda *a: None)
    site = root / "site"
    assert (site / "vllm/__init__.py").read_text() == "# patched tree\n", "series tree wins"
    assert (site / "vllm/model_executor/gdn.py").read_text() == "PATCHED = True\n"
    assert (site / "vllm/_C_stable_libtorch.abi3.so").read_bytes() == inputs["big"]
    assert (site / "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so").is_file()
    assert (site / "vllm/vllm_flash_attn/layers/rotary.py").is_file()
    assert not (site / "vllm/_vllm_fa2_C.abi3.so").exists()
    assert not (site / "vllm/vllm-rs").exists()
    assert (site / "vllm-0.33.0.dist-info/METADATA").is_file()
    assert (site / "blake3/__init__.py").is_file(), ".data/platlib lifted"
    assert not list(site.rglob("tool")), "wheel scripts are skipped"
    assert (root / "project/tools/e2e/make_models.py").is_file()
    assert (site / ".boot/sitecustomize.py").is_file()
    assert list((site / "vllm").rglob("__pycache__/*.pyc")), "bytecode compiled at unpack"
    text = env.read_text()
    assert "VLLM_USE_FLASHINFER_SAMPLER" in text and str(site / ".boot") in text
    # The environment works: the site's packages import through sitecustomize.
    proc = subprocess.run(
        [
            "bash",
            "-c",
            f"source {env} && {sys.executable} -c 'import sys, pydantic, blake3, vllm, fake_dsl; "
            'print(pydantic.VERSION, sys.path.index(fake_dsl.__path__[0] + "/extra"))\'',
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    version, pth_index = proc.stdout.split()
    assert version == "2.14.4", "the bundle's copy wins over the local one"
    assert int(pth_index) <= 2, ".pth ran against the bundled package, its path is up front"
    # Unpacking again skips every component.
    seen: list[str] = []
    host.unpack(root, log=seen.append)
    assert all("already unpacked" in s for s in seen)


def test_host_rejects_damaged_chunk(tmp_path: Path, inputs: dict) -> None:
    out, manifest = build(tmp_path, inputs)
    first = out / manifest["chunks"][0]["name"]
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(host.HostError, match="damaged"):
        host.stage(out, tmp_path / "host", log=lambda *a: None)


def test_host_cli_names_missing_calls(tmp_path: Path, inputs: dict) -> None:
    out, manifest = build(tmp_path, inputs)
    carried = tmp_path / "call1"
    carried.mkdir()
    shutil.copy(out / "MANIFEST.json", carried)
    shutil.copy(out / "chunk-01", carried)
    root = tmp_path / "host"
    script = TOP / "tools/gpuhost/host.py"
    subprocess.run(
        [sys.executable, script, "--root", root, "stage", carried], check=True, capture_output=True
    )
    proc = subprocess.run(
        [sys.executable, script, "--root", root, "unpack"], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "chunk-02 (call 2)" in proc.stderr


def test_unpinned_spec_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "wheels.txt"
    spec.write_text("pydantic\n")
    with pytest.raises(bundle.BundleError, match="not pinned"):
        bundle.read_specs(spec)


def test_missing_wheel_offline_names_the_pin(tmp_path: Path) -> None:
    with pytest.raises(bundle.BundleError, match="nothere==1.0"):
        bundle.ensure_wheels(["nothere==1.0"], tmp_path, download=False)


def test_project_wheel_list_is_pinned_and_unique() -> None:
    specs = bundle.read_specs(TOP / "tools/gpuhost/wheels.txt")
    names = [s.split("==")[0].lower().replace("_", "-") for s in specs]
    assert len(names) == len(set(names)), "one version of each package"
    assert "flashinfer-python==0.7.2.post1" in specs


def test_script_help_and_shellcheck() -> None:
    script = TOP / "scripts/gpu-host-bundle.sh"
    proc = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, check=True)
    assert "PLAN.md" in proc.stdout
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        subprocess.run([shellcheck, script], check=True)


def test_auto_chunk_size_is_the_fewest_balanced_chunks() -> None:
    mib = bundle.MIB
    # 178 MiB with a 3.5 MiB tree: 58.5 MiB of room -> 4 chunks of 44.5 MiB
    size = bundle.auto_chunk_bytes(178 * mib, int(3.5 * mib), 64 * mib, margin=2 * mib)
    assert size == -(-178 * mib // 4) and size <= 58.5 * mib
    # 170 MiB fits 3 chunks of 56.7 MiB
    assert bundle.auto_chunk_bytes(170 * mib, int(3.5 * mib), 64 * mib, margin=2 * mib) == -(
        -170 * mib // 3
    )
    # The measured bundle: 174.2 MiB with a 4.6 MiB tree fits 3 calls at the default margin.
    assert (
        -(-int(174.2 * mib) // bundle.auto_chunk_bytes(int(174.2 * mib), int(4.6 * mib), 64 * mib))
        == 3
    )
    with pytest.raises(bundle.BundleError, match="no room"):
        bundle.auto_chunk_bytes(10 * mib, 62 * mib, 64 * mib)


def test_host_caches_round_trip_and_refuse_foreign_paths(tmp_path: Path) -> None:
    run_home, fresh_home = tmp_path / "run", tmp_path / "fresh"
    kernel = run_home / ".triton/cache/ab12/kernel.cubin"
    kernel.parent.mkdir(parents=True)
    payload = os.urandom(4096)
    kernel.write_bytes(payload)
    (run_home / ".ssh").mkdir()
    (run_home / ".ssh/id").write_text("never packed")
    archive = tmp_path / "out/host-caches.tar.gz"
    assert host.save_caches(archive, home=run_home, log=lambda *a: None)
    assert host.load_caches(archive, home=fresh_home, log=lambda *a: None) >= 1
    assert (fresh_home / ".triton/cache/ab12/kernel.cubin").read_bytes() == payload
    assert not (fresh_home / ".ssh").exists(), "only HOST_CACHE_DIRS travel"
    # over the size limit: nothing is written, the run goes on
    big = tmp_path / "out/big.tar.gz"
    assert not host.save_caches(big, home=run_home, limit_mib=0, log=lambda *a: None)
    assert not big.exists() and not big.with_name(big.name + ".tmp").exists()
    # nothing to save
    assert not host.save_caches(big, home=tmp_path / "empty", log=lambda *a: None)
    # an archive with a path outside the cache dirs is refused before anything is written
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(run_home / ".ssh/id", arcname=".bashrc")
    with pytest.raises(host.HostError, match="outside"):
        host.load_caches(evil, home=fresh_home, log=lambda *a: None)
    assert not (fresh_home / ".bashrc").exists()
    with pytest.raises(host.HostError, match="not found"):
        host.load_caches(tmp_path / "missing.tar.gz", home=fresh_home, log=lambda *a: None)


def test_host_caches_split_into_parts_and_load_from_their_directory(tmp_path: Path) -> None:
    # the device tool returns files of <= 16 MiB: a larger archive comes back as .NN parts, and a
    # carry of the directory holding them restores the caches on the next fresh host
    run_home, fresh_home = tmp_path / "run", tmp_path / "fresh"
    blobs = {}
    for n in range(3):
        path = run_home / f".triton/cache/k{n}/kernel.cubin"
        path.parent.mkdir(parents=True)
        blobs[path.relative_to(run_home)] = os.urandom(700_000)  # incompressible
        path.write_bytes(blobs[path.relative_to(run_home)])
    out = tmp_path / "out"
    archive = out / "host-caches.tar.gz"
    assert host.save_caches(archive, home=run_home, part_mib=1, log=lambda *a: None)
    parts = sorted(p.name for p in out.iterdir())
    assert len(parts) == 3 and parts == [f"host-caches.tar.gz.{i:02d}" for i in range(3)], parts
    assert all((out / p).stat().st_size <= 1 << 20 for p in parts)
    assert host.load_caches(out, home=fresh_home, log=lambda *a: None) >= 3
    for rel, payload in blobs.items():
        assert (fresh_home / rel).read_bytes() == payload
    # the archive's own name finds its parts too; a missing part set is named
    other = tmp_path / "fresh2"
    assert host.load_caches(archive, home=other, log=lambda *a: None) >= 3
    with pytest.raises(host.HostError, match="not found"):
        host.load_caches(out / "other.tar.gz", home=other, log=lambda *a: None)


def test_plan_puts_an_earlier_sessions_host_caches_first(tmp_path: Path, inputs: dict) -> None:
    """Caches kept in <cache>/host-caches/ are mirrored into the carry folder (a newer saved set
    replaces an older copy, read-only files included) and PLAN.md opens with call 0 that loads
    them on the fresh host."""
    saved = inputs["cache"] / "host-caches"
    saved.mkdir(parents=True)
    for n in range(2):
        (saved / f"host-caches.tar.gz.{n:02d}").write_bytes(os.urandom(1000))
        (saved / f"host-caches.tar.gz.{n:02d}").chmod(0o444)  # as the device tool returns them
    dest = tmp_path / "top/.gpu/host-caches"
    assert bundle.place_host_caches(dest, inputs["cache"], log=lambda *a: None)
    assert sorted(p.name for p in dest.iterdir()) == [
        "host-caches.tar.gz.00",
        "host-caches.tar.gz.01",
    ]
    for part in saved.iterdir():
        part.unlink()
    (saved / "host-caches.tar.gz").write_bytes(b"newer, one file")
    assert bundle.place_host_caches(dest, inputs["cache"], log=lambda *a: None)
    assert [p.name for p in dest.iterdir()] == ["host-caches.tar.gz"]
    assert (dest / "host-caches.tar.gz").read_bytes() == b"newer, one file"
    # no saved set: the folder is left as it is
    assert bundle.place_host_caches(dest, tmp_path / "empty-cache", log=lambda *a: None)
    assert not bundle.place_host_caches(tmp_path / "none", tmp_path / "empty-cache")

    out, manifest = build(tmp_path, inputs)
    plan = bundle.plan_markdown(manifest["_obj"], "out", 0, 64 << 20, ".gpu/host-caches")
    rows = [ln for ln in plan.splitlines() if ln.startswith("| ")]
    assert rows[1].startswith('| 0 (first, fresh host) | `[".gpu/host-caches"]` |')
    assert "host.py load-caches .gpu/host-caches" in rows[1]
    assert "| 0 " not in (out / "PLAN.md").read_text()  # build() in the tests sets no caches
