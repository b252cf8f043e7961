"""GPU-host side of the offline bundle (Python standard library only; runs on the host's python3).

    python3 tools/gpuhost/host.py stage DIR        # copy DIR's MANIFEST.json + chunk-* to the stage
    python3 tools/gpuhost/host.py unpack           # verify every chunk, unpack into the site dir
    source /tmp/gdn-host/env.sh                    # then `import vllm` works
    python3 tools/gpuhost/host.py env              # print the environment again
    python3 tools/gpuhost/host.py save-caches F    # pack the JIT caches a run left (Triton, ...)
    python3 tools/gpuhost/host.py load-caches F    # restore them on a fresh host before a run

Chunks arrive over several device calls (one chunk per call, see the bundle's PLAN.md); `stage`
copies each into ROOT/parts (default ROOT=/tmp/gdn-host, which survives between back-to-back
calls while the host stays up). `unpack` refuses while a chunk is missing or damaged and names
the call that carries it; a component already unpacked with the same checksum is skipped, so a
repeated `unpack` costs nothing. After unpacking, the site's bytecode is compiled on every core
(a fresh host otherwise compiles it in the first engine's import, single-threaded: ~55 s of the
first engine's ~210 s start in session 6).

A fresh host also re-compiles every Triton kernel (~90 s of the first engine's start).
`save-caches` packs the caches a run left (HOST_CACHE_DIRS under $HOME, at most
CACHE_LIMIT_MIB compressed) into FILE, or FILE.00, FILE.01, ... parts of at most CACHE_PART_MIB
each (the device tool returns files of up to 16 MiB); carried back to the next fresh host in a
call of their own (the bundle chunks leave too little room), `load-caches` restores them. A stale
cache only costs a recompile: Triton keys every entry by its source, compiler version and GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

DEFAULT_ROOT = Path(os.environ.get("GDN_HOST_ROOT", "/tmp/gdn-host"))
# Components unpacked into the site directory (the rest go to ROOT/<name>).
SITE_COMPONENTS = ("vllm", "wheels", "cutlass")
# Settings that took on the H200 (research/h200-probe.md): no flashinfer sampler JIT build, no
# network lookups, unbuffered output for the device tool's log.
HOST_ENV = {
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
    # autotuning results on disk too, so that save-caches keeps them
    "TRITON_CACHE_AUTOTUNING": "1",
}


# JIT caches under $HOME that a run fills and a fresh host lacks (Triton's kernels and, with
# TRITON_CACHE_AUTOTUNING=1, its autotuning results; vLLM's and flashinfer's own caches).
# CUDA's ComputeCache: PTX the driver JIT-compiled (kernels shipped without sm_90 SASS).
HOST_CACHE_DIRS = (".triton/cache", ".cache/vllm", ".cache/flashinfer", ".nv/ComputeCache")
# compressed MiB: the parts come back as at most 3 of the device tool's 8 files and go to the
# next fresh host in one carry of their own (64 MiB with the ~10 MiB work tree). Session 7's
# caches were 19 MiB (over the old single-file limit of 12).
CACHE_LIMIT_MIB = 45
CACHE_PART_MIB = 15


class HostError(RuntimeError):
    pass


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def load_manifest(path: Path) -> dict:
    if not path.is_file():
        raise HostError(f"no {path}: carry the bundle's MANIFEST.json with every call")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != 1:
        raise HostError(f"{path}: unknown manifest format {manifest.get('format')!r}")
    return manifest


def stage(src: Path, root: Path = DEFAULT_ROOT, log=print) -> list[str]:
    """Copy MANIFEST.json and every chunk present in src into root/parts, checking each chunk
    against the manifest. Returns the names of the chunks still missing."""
    parts = root / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(src / "MANIFEST.json")
    staged = parts / "MANIFEST.json"
    if staged.is_file() and load_manifest(staged) != manifest:
        # A new bundle: chunks of the old one must not mix in.
        for old in parts.glob("chunk-*"):
            old.unlink()
    shutil.copyfile(src / "MANIFEST.json", staged)
    for chunk in manifest["chunks"]:
        source = src / chunk["name"]
        target = parts / chunk["name"]
        if target.is_file() and target.stat().st_size == chunk["size"]:
            continue  # staged by an earlier call; unpack re-checks its sha256
        if source.is_file():
            if sha256_file(source) != chunk["sha256"]:
                raise HostError(f"{source} is damaged (sha256 differs from MANIFEST.json)")
            shutil.copyfile(source, target)
            log(f"staged {chunk['name']} (call {chunk['call']}, {chunk['size'] >> 20} MiB)")
    missing = missing_chunks(manifest, parts)
    log("all chunks staged" if not missing else f"still missing: {', '.join(missing)}")
    return missing


def missing_chunks(manifest: dict, parts: Path) -> list[str]:
    return [
        f"{c['name']} (call {c['call']})"
        for c in manifest["chunks"]
        if not (parts / c["name"]).is_file() or (parts / c["name"]).stat().st_size != c["size"]
    ]


class PayloadReader(io.RawIOBase):
    """Bytes [start, start+length) of the payload that the chunks form back to back."""

    def __init__(self, manifest: dict, parts: Path, start: int, length: int) -> None:
        self._chunks = [(parts / c["name"], c["size"]) for c in manifest["chunks"]]
        self._pos = start
        self._end = start + length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        want = min(len(buffer), self._end - self._pos)
        if want <= 0:
            return 0
        base = 0
        for path, size in self._chunks:
            if self._pos < base + size:
                with path.open("rb") as f:
                    f.seek(self._pos - base)
                    data = f.read(min(want, base + size - self._pos))
                buffer[: len(data)] = data
                self._pos += len(data)
                return len(data)
            base += size
        raise HostError("payload shorter than MANIFEST.json says")


def component_reader(manifest: dict, parts: Path, comp: dict) -> io.BufferedReader:
    return io.BufferedReader(PayloadReader(manifest, parts, comp["offset"], comp["size"]), 1 << 22)


def verify(manifest: dict, parts: Path) -> None:
    missing = missing_chunks(manifest, parts)
    if missing:
        raise HostError(
            f"chunks missing in {parts}: {', '.join(missing)}; send them (the host may have been "
            "released between calls: then send every chunk again, back to back)"
        )
    for chunk in manifest["chunks"]:
        if sha256_file(parts / chunk["name"]) != chunk["sha256"]:
            raise HostError(f"{parts / chunk['name']} is damaged: send call {chunk['call']} again")


def unpack(root: Path = DEFAULT_ROOT, log=print, compile_pyc: bool = True) -> Path:
    """Verify the staged chunks, unpack every component and compile the site's bytecode (once per
    root); returns the env file."""
    parts = root / "parts"
    manifest = load_manifest(parts / "MANIFEST.json")
    verify(manifest, parts)
    site = root / "site"
    unpacked = False
    for comp in manifest["components"]:
        dest = site if comp["name"] in SITE_COMPONENTS else root / comp["name"]
        marker = root / f".unpacked-{comp['name']}-{comp['sha256'][:16]}"
        if marker.exists():
            log(f"{comp['name']}: already unpacked")
            continue
        digest = hashlib.sha256()
        reader = component_reader(manifest, parts, comp)
        while block := reader.read(1 << 22):
            digest.update(block)
        if digest.hexdigest() != comp["sha256"]:
            raise HostError(f"component {comp['name']} does not match its sha256")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=component_reader(manifest, parts, comp), mode="r|xz") as tar:
            tar.extractall(dest, filter="data")
        marker.touch()
        unpacked = True
        log(f"{comp['name']}: {comp['files']} files -> {dest}")
    marker = root / ".bytecode"
    if compile_pyc and (unpacked or not marker.exists()):
        compile_bytecode(site, log)
        marker.touch()
    return write_env(root)


def compile_bytecode(site: Path, log=print) -> bool:
    """Compile the site's .py files on every core (errors in a few test/vendored files are
    expected and ignored). Returns compileall's verdict."""
    import compileall

    ok = compileall.compile_dir(str(site), quiet=2, workers=os.cpu_count() or 1)
    log(f"bytecode: compiled {site} on {os.cpu_count()} cores")
    return bool(ok)


def cache_parts(path: Path) -> list[Path]:
    """The archive's files in order: FILE itself, or FILE.00, FILE.01, ...; a directory stands
    for the one archive in it (what a carry of `.gpu/host-caches/` brings)."""
    if path.is_dir():
        stems = sorted({p.name.split(".tar.gz")[0] for p in path.glob("*.tar.gz*")})
        if len(stems) != 1:
            raise HostError(f"{path} must hold exactly one save-caches archive, found {stems}")
        path = path / f"{stems[0]}.tar.gz"
    if path.is_file():
        return [path]
    return sorted(path.parent.glob(path.name + ".[0-9][0-9]"))


def save_caches(
    dest: Path,
    home: Path | None = None,
    limit_mib: int = CACHE_LIMIT_MIB,
    part_mib: int = CACHE_PART_MIB,
    log=print,
) -> bool:
    """Pack the existing HOST_CACHE_DIRS under home into dest (tar.gz: fast to write on the
    host), split into dest.00, dest.01, ... when over part_mib. Returns False, and writes
    nothing, when there is nothing to pack or the archive exceeds limit_mib."""
    home = home or Path.home()
    present = [d for d in HOST_CACHE_DIRS if (home / d).is_dir()]
    if not present:
        log(f"save-caches: none of {', '.join(HOST_CACHE_DIRS)} under {home}")
        return False
    tmp = dest.with_name(dest.name + ".tmp")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tmp, "w:gz") as tar:
        for d in present:
            tar.add(home / d, arcname=d)
    size = tmp.stat().st_size
    if size > limit_mib << 20:
        tmp.unlink()
        log(f"save-caches: {size >> 20} MiB is over the {limit_mib} MiB limit; nothing saved")
        return False
    part = max(1, part_mib) << 20
    if size <= part:
        os.replace(tmp, dest)
        written = [dest]
    else:
        written = []
        with tmp.open("rb") as src:
            while chunk := src.read(part):
                written.append(dest.with_name(f"{dest.name}.{len(written):02d}"))
                written[-1].write_bytes(chunk)
        tmp.unlink()
    names = ", ".join(p.name for p in written)
    log(f"save-caches: {', '.join(present)} -> {names} ({size / 2**20:.1f} MiB)")
    return True


def load_caches(src: Path, home: Path | None = None, log=print) -> int:
    """Unpack a save-caches archive (one file, its .NN parts, or the directory holding them)
    into home. Members outside HOST_CACHE_DIRS are refused before anything is written."""
    home = home or Path.home()
    parts = cache_parts(src)
    if not parts:
        raise HostError(
            f"{src} not found: carry the file (or the .NN parts) that save-caches wrote, "
            "or skip this step"
        )
    data = io.BytesIO(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(fileobj=data, mode="r:gz") as tar:
        members = tar.getmembers()
        bad = [
            m.name
            for m in members
            if not any(m.name == d or m.name.startswith(d + "/") for d in HOST_CACHE_DIRS)
        ]
        if bad:
            raise HostError(f"{src} holds paths outside {HOST_CACHE_DIRS}: {bad[:3]}")
        tar.extractall(home, members=members, filter="data")
    log(f"load-caches: {len(members)} entries from {len(parts)} file(s) at {src} -> {home}")
    return len(members)


def env_lines(root: Path = DEFAULT_ROOT) -> list[str]:
    site = root / "site"
    boot = site / ".boot"
    lines = [f"export PYTHONPATH={boot}${{PYTHONPATH:+:$PYTHONPATH}}"]
    lines += [f"export {k}=${{{k}:-{v}}}" for k, v in HOST_ENV.items()]
    fi_kernel = site / "flashinfer/gdn_kernels/gdn_decode_bf16_wy_ucache_flush.py"
    lines.append(f"export GDN_FLASHINFER_UCACHE_MODULE={fi_kernel}")
    lines.append(f"export GDN_HOST_SITE={site}")
    return lines


def write_env(root: Path = DEFAULT_ROOT) -> Path:
    site = root / "site"
    boot = site / ".boot"
    boot.mkdir(parents=True, exist_ok=True)
    # addsitedir (not a plain PYTHONPATH entry) so that .pth files in the site work (CuTe-DSL's);
    # its entries then move to the front: the bundle's versions win over a host's older copies
    # (a host may already have another vllm or typing_extensions).
    # The site is put first *before* its .pth files run, so that CuTe-DSL's .pth imports the
    # bundled nvidia_cutlass_dsl even where the host has another one.
    (boot / "sitecustomize.py").write_text(
        "import site\nimport sys\n\n"
        "_before = list(sys.path)\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        f"site.addsitedir({str(site)!r})\n"
        "sys.path[:] = [p for p in sys.path if p not in _before] + _before\n"
    )
    env = root / "env.sh"
    lines = ["# written by tools/gpuhost/host.py unpack", *env_lines(root)]
    env.write_text("\n".join(lines) + "\n")
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_stage = sub.add_parser("stage", help="copy a carried bundle folder's chunks to ROOT/parts")
    p_stage.add_argument("src", type=Path)
    p_unpack = sub.add_parser("unpack", help="verify all chunks and unpack into ROOT/site")
    p_unpack.add_argument(
        "--no-bytecode", action="store_true", help="skip compiling the site's .py files"
    )
    sub.add_parser("env", help="print the environment (source ROOT/env.sh)")
    p_save = sub.add_parser("save-caches", help="pack the JIT caches under $HOME into FILE")
    p_save.add_argument("file", type=Path)
    p_load = sub.add_parser("load-caches", help="restore a save-caches FILE into $HOME")
    p_load.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "stage":
            stage(args.src, args.root)
        elif args.cmd == "unpack":
            env = unpack(args.root, compile_pyc=not args.no_bytecode)
            print(f"environment: source {env}")
            print("\n".join(env_lines(args.root)))
        elif args.cmd == "save-caches":
            save_caches(args.file)  # nothing to save is not an error: the run goes on
        elif args.cmd == "load-caches":
            load_caches(args.file)
        else:
            print("\n".join(env_lines(args.root)))
    except HostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
