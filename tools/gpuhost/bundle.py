"""Build the offline GPU-host bundle of the patched vLLM (issue #10).

A GPU host without network (the H200 here, a user's air-gapped node) that already has torch
(2.11+, CUDA 13) gets everything else from this bundle:

- `vllm`: the patched `vllm/` Python tree (git archive of the series branch of `vllm/`) over the
  vllm 0.33.0 wheel's compiled extensions and dist-info;
- `wheels`: ~70 dependency wheels, unpacked (`tools/gpuhost/wheels.txt`; flashinfer-python
  0.7.2.post1 among them);
- `cutlass`: CuTe-DSL 4.8.0 (vLLM's pin) without stubs, static runtime and IKET;
- `project`: this project's `kernels/`, `tools/e2e/`, `tools/gpuhost/`, `bench/e2e.py`.

Each component is one deterministic tar compressed with xz and cached by a key of its inputs.
The components are concatenated into one payload that is cut into *chunks* of at most
`chunk_bytes`, one chunk per transfer: the fewest transfers for the total size. MANIFEST.json
lists components (offset, size, sha256) and chunks (size, sha256, which call carries it);
PLAN.md says which device-tool call carries which chunk. `tools/gpuhost/host.py` (stdlib only)
stages chunks on the host, verifies them and unpacks the components into a site directory.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

MIB = 1 << 20
# Wheel files kept next to the patched Python tree: the engine's ops, FlashAttention 3 (SM90), the
# sleep-mode allocator, and the few Python files that only the wheel has (vllm_flash_attn layers).
# FA2, MoE, DeepGEMM, FlashMLA, FMHA-SM100 and the vllm-rs binary are not needed for Qwen3.5 dense
# text models on SM90 and would add ~200 MB of xz.
DEFAULT_WHEEL_KEEP = (
    "vllm/_C_stable_libtorch.abi3.so",
    "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so",
    "vllm/cumem_allocator.abi3.so",
    "vllm/vllm_flash_attn/layers/*",
    "vllm/vllm_flash_attn/ops/*",
    "vllm/third_party/triton_kernels/*",
    "vllm-*.dist-info/*",
)
# Never used on a CUDA 13 host running token-id prompts: NCCL extension builds for CUDA 12
# (58 MB raw) and Mistral's tekken tokenizer tables (32 MB raw).
WHEELS_DROP = (
    "nccl/*/lib/cu12/*",
    "mistral_common/data/tekken_*.json",
)
CUTLASS_DROP = (
    "nvidia_cutlass_dsl/cu13/lib/stubs/*",
    "nvidia_cutlass_dsl/cu13/lib/libcuda_dialect_runtime_static.a",
    "nvidia_cutlass_dsl/dsl_packages/iket/*",
)
CUTLASS_SPECS = (
    "nvidia-cutlass-dsl==4.8.0",
    "nvidia-cutlass-dsl-libs-base==4.8.0",
    "nvidia-cutlass-dsl-libs-core==4.8.0",
    "nvidia-cutlass-dsl-libs-cu13==4.8.0",
)
PROJECT_PATHS = ("kernels", "tools/__init__.py", "tools/e2e", "tools/gpuhost", "bench/e2e.py")
# pip download flags for the GPU host: CPython 3.12, manylinux x86_64 (N listed one by one: pip
# matches each tag exactly).
HOST_PLATFORM_ARGS = (
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    *(
        arg
        for tag in (
            "manylinux_2_35_x86_64",
            "manylinux_2_34_x86_64",
            "manylinux_2_31_x86_64",
            "manylinux_2_28_x86_64",
            "manylinux_2_27_x86_64",
            "manylinux_2_26_x86_64",
            "manylinux_2_24_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
            "manylinux_2_5_x86_64",
            "manylinux1_x86_64",
            "any",
        )
        for arg in ("--platform", tag)
    ),
)


class BundleError(RuntimeError):
    """A bundle cannot be built as asked; the message names what to change."""


@dataclass(frozen=True)
class Member:
    """One file of a component: its path inside the site directory and its bytes' source."""

    arcname: str
    data: bytes
    mode: int = 0o644


@dataclass
class Component:
    name: str
    key: str  # sha256 of the inputs: the cached .tar.xz is reused when it matches
    path: Path  # the .tar.xz
    size: int = 0
    sha256: str = ""
    offset: int = 0  # in the payload
    files: int = 0
    raw_bytes: int = 0
    notes: str = ""


@dataclass
class Chunk:
    name: str
    call: int
    size: int
    sha256: str


@dataclass
class Manifest:
    format: int
    chunk_bytes: int
    total_bytes: int
    components: list[dict] = field(default_factory=list)
    chunks: list[dict] = field(default_factory=list)
    source: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(4 * MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def matches(path: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


# ----------------------------------------------------------------------------- sources


def wheel_members(
    wheel: Path, keep: Iterable[str] | None = None, drop: Iterable[str] = ()
) -> Iterator[Member]:
    """Files of a wheel as they land in site-packages (`*.data/purelib|platlib/` lifted to the
    top; scripts and headers skipped); `keep` selects (None = all), `drop` removes."""
    keep = None if keep is None else tuple(keep)
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            name = info.filename
            parts = name.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                name = "/".join(parts[2:])
            if keep is not None and not matches(name, keep):
                continue
            if matches(name, drop):
                continue
            mode = (info.external_attr >> 16) & 0o777 or 0o644
            yield Member(name, z.read(info), mode | 0o644)


def git_tree_members(repo: Path, ref: str, subdir: str) -> Iterator[Member]:
    """Files under `subdir` of commit `ref` in `repo` (git archive: the committed series, not
    whatever is checked out or half-edited in the working tree)."""
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", ref, "--", subdir],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for info in tar:
            if info.isfile():
                data = tar.extractfile(info).read()  # type: ignore[union-attr]
                yield Member(info.name, data, 0o755 if info.mode & 0o111 else 0o644)


def dir_members(root: Path, subdir: str) -> Iterator[Member]:
    """Files under root/subdir (a plain directory instead of a git ref; used by tests)."""
    base = root / subdir
    paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    for path in paths:
        if "__pycache__" in path.parts:
            continue
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        yield Member(path.relative_to(root).as_posix(), path.read_bytes(), mode)


def git_rev(repo: Path, ref: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", ref], check=True, capture_output=True, text=True
    ).stdout.strip()


# ----------------------------------------------------------------------------- packing


def write_tar_xz(members: Iterable[Member], out: Path, xz_args: tuple[str, ...]) -> tuple[int, int]:
    """Deterministic tar (sorted, mtime 0, root-owned) piped through the xz CLI (whose large
    dictionaries span the 88 MB `_C` library; Python's lzma module is single-threaded and
    slower). Later members with the same arcname win (the series overlays the wheel).
    Returns (files, raw bytes)."""
    unique: dict[str, Member] = {}
    for member in members:
        unique[member.arcname] = member
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    raw = 0
    with tmp.open("wb") as sink:
        xz = subprocess.Popen(["xz", "-c", *xz_args], stdin=subprocess.PIPE, stdout=sink)
        assert xz.stdin is not None
        with tarfile.open(fileobj=xz.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(unique):
                member = unique[name]
                info = tarfile.TarInfo(name)
                info.size = len(member.data)
                info.mode = member.mode
                info.mtime = 0
                info.uname = info.gname = "root"
                tar.addfile(info, io.BytesIO(member.data))
                raw += info.size
        xz.stdin.close()
        if xz.wait() != 0:
            raise BundleError(f"xz failed while writing {out}")
    tmp.replace(out)
    return len(unique), raw


def inputs_key(*parts: object) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def build_component(
    name: str,
    key: str,
    members: Iterable[Member] | None,
    cache_dir: Path,
    xz_args: tuple[str, ...],
    notes: str = "",
    log=print,
) -> Component:
    """The cached `<name>-<key>.tar.xz`, built from `members` (an iterable, consumed only when
    the cache misses)."""
    path = cache_dir / f"{name}-{key}.tar.xz"
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists():
        info = json.loads(meta.read_text())
        log(f"{name}: cached {path.name} ({path.stat().st_size / MIB:.1f} MiB)")
        return Component(name, key, path, files=info["files"], raw_bytes=info["raw"], notes=notes)
    if members is None:
        raise BundleError(f"{name}: no inputs and no cached {path}")
    log(f"{name}: packing with xz {' '.join(xz_args)} ...")
    files, raw = write_tar_xz(members, path, xz_args)
    meta.write_text(json.dumps({"files": files, "raw": raw}))
    log(f"{name}: {files} files, {raw / MIB:.1f} MiB raw -> {path.stat().st_size / MIB:.1f} MiB xz")
    return Component(name, key, path, files=files, raw_bytes=raw, notes=notes)


# Room left in every call for the work tree to grow (results, other helpers' files) between the
# build and the calls; more margin would cost a fourth call for the measured 174 MiB payload. A
# call whose tree has outgrown it is refused by the device tool before it starts.
TREE_MARGIN = 1 * MIB


def auto_chunk_bytes(total: int, tree: int, limit: int, margin: int = TREE_MARGIN) -> int:
    """Fewest chunks that fit a call beside the work tree, then equal sizes (even margins)."""
    room = limit - tree - margin
    if room <= MIB:
        raise BundleError(
            f"the work tree ({tree / MIB:.1f} MiB) leaves no room in a {limit / MIB:.0f} MiB "
            "call: ignore or remove large untracked files"
        )
    n_chunks = max(1, -(-total // room))
    return -(-total // n_chunks)


def split_payload(components: list[Component], out: Path, chunk_bytes: int) -> list[Chunk]:
    """Concatenate the components' .tar.xz into one payload and cut it into chunks of at most
    `chunk_bytes`; chunk i travels in device call i (1-based)."""
    if chunk_bytes <= 0:
        raise BundleError("chunk size must be positive")
    offset = 0
    for comp in components:
        comp.size = comp.path.stat().st_size
        comp.sha256 = sha256_file(comp.path)
        comp.offset = offset
        offset += comp.size
    total = offset
    n_chunks = max(1, -(-total // chunk_bytes))
    for old in out.glob("chunk-*"):
        old.unlink()
    chunks = []
    stream = _concat(components)
    for i in range(n_chunks):
        name = f"chunk-{i + 1:02d}"
        digest = hashlib.sha256()
        size = 0
        with (out / name).open("wb") as f:
            while size < chunk_bytes:
                block = stream.read(min(4 * MIB, chunk_bytes - size))
                if not block:
                    break
                f.write(block)
                digest.update(block)
                size += len(block)
        chunks.append(Chunk(name, i + 1, size, digest.hexdigest()))
    if stream.read(1):
        raise BundleError("internal error: payload longer than its chunks")
    return chunks


class _concat(io.RawIOBase):
    """The components' files read back to back as one stream."""

    def __init__(self, components: list[Component]) -> None:
        self._paths = [c.path for c in components]
        self._f = None

    def read(self, n: int = -1) -> bytes:  # type: ignore[override]
        out = b""
        while n < 0 or len(out) < n:
            if self._f is None:
                if not self._paths:
                    break
                self._f = open(self._paths.pop(0), "rb")  # noqa: SIM115
            block = self._f.read(-1 if n < 0 else n - len(out))
            if not block:
                self._f.close()
                self._f = None
                continue
            out += block
        return out


# ----------------------------------------------------------------------------- plan


def carry_path(path: Path, top: Path) -> str:
    """path as the device tool's carry names it: relative to the project root where it can be."""
    try:
        return path.relative_to(top).as_posix()
    except ValueError:
        return str(path)


def place_host_caches(dest: Path, cache: Path, log=print) -> bool:
    """Mirror the host JIT caches an earlier session saved (host.py save-caches; its files kept
    in <cache>/host-caches/) into dest for a carry: the saved set replaces whatever archive dest
    held. Without a saved set, dest is left as it is. True if dest then holds an archive."""
    src = cache / "host-caches"
    files = sorted(src.glob("*.tar.gz*")) if src.is_dir() else []
    if files:
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.glob("*.tar.gz*"):
            old.unlink()  # (copies of earlier sets are read-only: unlink, then copy)
        for f in files:
            shutil.copy2(f, dest / f.name)
        size = sum(f.stat().st_size for f in files)
        log(f"host caches: {len(files)} file(s), {size / MIB:.1f} MiB from {src} -> {dest}")
    return any(dest.glob("*.tar.gz*"))


def plan_markdown(
    manifest: Manifest,
    out_rel: str,
    tree_bytes: int,
    limit_bytes: int,
    caches_rel: str | None = None,
) -> str:
    """Which device call carries what, as the next session should type it (call 0: the host JIT
    caches of an earlier session, when there are any)."""
    lines = [
        "# GPU-host bundle: transfer plan",
        "",
        f"Payload {manifest.total_bytes / MIB:.1f} MiB in {len(manifest.chunks)} chunk(s) of "
        f"at most {manifest.chunk_bytes / MIB:.0f} MiB; the work tree that travels "
        f"with every call is {tree_bytes / MIB:.1f} MiB "
        f"(limit per call {limit_bytes / MIB:.0f} MiB).",
        "Make the calls back to back (the host is released ~30 s after a call, and /tmp with it).",
        "",
        "| call | carry | command starts with |",
        "|---|---|---|",
    ]
    if caches_rel:
        carry = json.dumps([caches_rel])
        lines.append(
            f"| 0 (first, fresh host) | `{carry}` | `python3 tools/gpuhost/host.py load-caches "
            f"{caches_rel}` (Triton/vLLM/flashinfer/CUDA JIT caches: the first engine starts "
            "without the ~150 s of JIT) |"
        )
    last = len(manifest.chunks)
    for chunk in manifest.chunks:
        carry = json.dumps([f"{out_rel}/MANIFEST.json", f"{out_rel}/{chunk['name']}"])
        cmd = f"python3 tools/gpuhost/host.py stage {out_rel}"
        if chunk["call"] == last:
            cmd += f" && python3 tools/gpuhost/host.py unpack && source {HOST_ENV_FILE} && <run>"
        lines.append(f"| {chunk['call']} | `{carry}` | `{cmd}` |")
    lines += [
        "",
        "`<run>` for the e2e check (issue #10; NOTES.md lists the calls after it):",
        "",
        f"    {E2E_FIRST_RUN}",
        "",
        f"Later calls on the same warm host: `source {HOST_ENV_FILE} && ...` (no carry). "
        "If the host was released in between, `host.py unpack` names the chunks that are "
        "missing: send those again.",
        "",
        "| component | files | raw MiB | xz MiB | notes |",
        "|---|---|---|---|---|",
    ]
    for comp in manifest.components:
        lines.append(
            f"| {comp['name']} | {comp['files']} | {comp['raw_bytes'] / MIB:.1f} | "
            f"{comp['size'] / MIB:.1f} | {comp['notes']} |"
        )
    return "\n".join(lines) + "\n"


HOST_ENV_FILE = "/tmp/gdn-host/env.sh"
E2E_FIRST_RUN = (
    "python3 bench/e2e.py models /tmp/e2e-models --models tiny && python3 bench/e2e.py run "
    "--suite smoke --suite badconfig --suite correctness --modes eager,full_graphs "
    "--models-dir /tmp/e2e-models --out $OUT/e2e --deadline-s 480 --name e2e-a"
)


def tree_bytes(top: Path) -> int:
    """Bytes of the work tree that travels with every device call: tracked files plus untracked
    files git does not ignore (nested repositories such as vllm/ travel without their files)."""
    out = subprocess.run(
        ["git", "-C", str(top), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    total = 0
    for rel in out.split(b"\0"):
        path = top / os.fsdecode(rel)
        if rel and path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


# ----------------------------------------------------------------------------- pip


def pip_download(specs: Iterable[str], dest: Path, host_platform: bool = True) -> None:
    """`pip download --no-deps` into dest through pip's configured index (no host named here)."""
    specs = list(specs)
    if not specs:
        return
    dest.mkdir(parents=True, exist_ok=True)
    cmd = ["python3", "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest)]
    if host_platform:
        cmd += list(HOST_PLATFORM_ARGS)
    subprocess.run(cmd + specs, check=True)


def wheel_for(spec: str, directory: Path) -> Path | None:
    """The wheel for `name==version` in directory (names compared normalised), if present."""
    name, _, version = spec.partition("==")
    norm = name.lower().replace("-", "_").replace(".", "_")
    for wheel in sorted(directory.glob("*.whl")):
        w_name, w_version = wheel.name.split("-")[:2]
        if w_name.lower().replace(".", "_") == norm and (not version or w_version == version):
            return wheel
    return None


def read_specs(path: Path) -> list[str]:
    specs = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            if "==" not in line:
                raise BundleError(f"{path}: {line!r} is not pinned (name==version)")
            specs.append(line)
    return specs


def ensure_wheels(
    specs: list[str], cache: Path, download: bool = True, also: Iterable[Path] = ()
) -> list[Path]:
    """The wheel file of every spec, found in `cache` or `also`, else downloaded into cache."""
    dirs = [cache, *(d for d in also if d.is_dir())]

    def find(spec: str) -> Path | None:
        return next((w for d in dirs if (w := wheel_for(spec, d)) is not None), None)

    missing = [s for s in specs if find(s) is None]
    if missing and download:
        pip_download(missing, cache)
    wheels, still = [], []
    for spec in specs:
        wheel = find(spec)
        (wheels.append(wheel) if wheel else still.append(spec))
    if still:
        raise BundleError(
            f"no CPython 3.12 manylinux wheel for {', '.join(still)} in {cache}; "
            "fix the pin in tools/gpuhost/wheels.txt"
        )
    return wheels


# ----------------------------------------------------------------------------- build


@dataclass
class BundleConfig:
    top: Path  # project root
    out: Path  # e.g. <top>/.gpu/vllm-bundle
    cache: Path  # ${GDN_UCACHE_CACHE:-~/.cache/gdn-ucache}
    vllm_repo: Path  # the populated vllm/ submodule
    series_ref: str = "gdn-ucache"
    vllm_tree_dir: Path | None = None  # a plain directory instead of vllm_repo@series_ref
    vllm_wheel: Path | None = None  # default: found/downloaded into the cache
    wheels_file: Path | None = None  # default: tools/gpuhost/wheels.txt
    chunk_bytes: int = 0  # 0: the largest that fits a call beside the work tree, balanced
    limit_bytes: int = 64 * MIB
    components: tuple[str, ...] = ("vllm", "wheels", "cutlass", "project")
    download: bool = True
    xz_big: tuple[str, ...] = ("-T1", "--lzma2=preset=9e,dict=192MiB")
    xz_small: tuple[str, ...] = ("-T2", "-9")
    # where the host JIT caches of an earlier session go for call 0's carry (main: <top>/.gpu/
    # host-caches, filled from <cache>/host-caches); None: no call 0 in the plan
    host_caches: Path | None = None


def find_vllm_wheel(cfg: BundleConfig, version: str = "0.33.0") -> Path:
    if cfg.vllm_wheel:
        return cfg.vllm_wheel
    pattern = f"vllm-{version}-*.whl"
    for where in (cfg.cache / "gpu-host-wheels", cfg.cache / "container-wheels"):
        found = sorted(where.rglob(pattern)) if where.exists() else []
        if found:
            return found[0]
    if not cfg.download:
        raise BundleError(f"no {pattern} under {cfg.cache}; run without --offline once")
    dest = cfg.cache / "gpu-host-wheels"
    pip_download([f"vllm=={version}"], dest)
    return sorted(dest.glob(pattern))[0]


def build(cfg: BundleConfig, log=print) -> Manifest:
    cfg.out.mkdir(parents=True, exist_ok=True)
    comp_cache = cfg.cache / "gpu-host-bundle"
    wheel_cache = cfg.cache / "gpu-host-wheels"
    components: list[Component] = []
    source: dict = {}
    unknown = set(cfg.components) - {"vllm", "wheels", "cutlass", "project"}
    if unknown:
        raise BundleError(f"unknown component(s) {sorted(unknown)}")

    if "vllm" in cfg.components:
        wheel = find_vllm_wheel(cfg)
        if cfg.vllm_tree_dir is not None:
            tree_id = inputs_key(
                sorted(
                    (m.arcname, hashlib.sha256(m.data).hexdigest())
                    for m in dir_members(cfg.vllm_tree_dir, "vllm")
                )
            )
            tree_members = lambda: dir_members(cfg.vllm_tree_dir, "vllm")  # noqa: E731
            source["vllm_tree"] = str(cfg.vllm_tree_dir)
        else:
            if not (cfg.vllm_repo / ".git").exists():
                raise BundleError(f"{cfg.vllm_repo} is not populated: run scripts/setup.sh first")
            tree_id = git_rev(cfg.vllm_repo, f"{cfg.series_ref}^{{tree}}")
            tree_members = lambda: git_tree_members(cfg.vllm_repo, cfg.series_ref, "vllm")  # noqa: E731
            source["vllm_series_ref"] = cfg.series_ref
            source["vllm_series_commit"] = git_rev(cfg.vllm_repo, cfg.series_ref)
        source["vllm_wheel"] = wheel.name
        key = inputs_key("vllm", tree_id, wheel.name, wheel.stat().st_size, DEFAULT_WHEEL_KEEP)

        def vllm_members() -> Iterator[Member]:
            # Wheel first, series tree second: the tree's files (patched) win.
            yield from wheel_members(wheel, keep=DEFAULT_WHEEL_KEEP)
            yield from tree_members()

        components.append(
            build_component(
                "vllm",
                key,
                vllm_members(),
                comp_cache,
                cfg.xz_big,
                notes=f"{source.get('vllm_series_ref', 'dir')} tree + {wheel.name} extensions",
                log=log,
            )
        )

    if "wheels" in cfg.components:
        specs = read_specs(cfg.wheels_file or cfg.top / "tools/gpuhost/wheels.txt")
        wheels = ensure_wheels(specs, wheel_cache, cfg.download)
        key = inputs_key("wheels", [w.name for w in wheels], WHEELS_DROP)
        source["wheels"] = [w.name for w in wheels]
        members = (m for w in wheels for m in wheel_members(w, drop=WHEELS_DROP))
        components.append(
            build_component(
                "wheels",
                key,
                members,
                comp_cache,
                cfg.xz_small,
                notes=f"{len(wheels)} wheels",
                log=log,
            )
        )

    if "cutlass" in cfg.components:
        # scripts/gpu-bundle.sh caches the same cp312 wheels in gpu-wheels/
        wheels = ensure_wheels(
            list(CUTLASS_SPECS), wheel_cache, cfg.download, also=[cfg.cache / "gpu-wheels"]
        )
        key = inputs_key("cutlass", [w.name for w in wheels], CUTLASS_DROP)
        members = (m for w in wheels for m in wheel_members(w, drop=CUTLASS_DROP))
        components.append(
            build_component(
                "cutlass", key, members, comp_cache, cfg.xz_big, notes="CuTe-DSL 4.8.0", log=log
            )
        )

    if "project" in cfg.components:
        present = [p for p in PROJECT_PATHS if (cfg.top / p).exists()]
        members = [m for p in present for m in dir_members(cfg.top, p)]
        key = inputs_key(
            "project", sorted((m.arcname, hashlib.sha256(m.data).hexdigest()) for m in members)
        )
        components.append(
            build_component(
                "project", key, members, comp_cache, cfg.xz_small, notes=" ".join(present), log=log
            )
        )

    tree = tree_bytes(cfg.top) if (cfg.top / ".git").exists() else 0
    total = sum(c.path.stat().st_size for c in components)
    chunk_bytes = cfg.chunk_bytes or auto_chunk_bytes(total, tree, cfg.limit_bytes)
    chunks = split_payload(components, cfg.out, chunk_bytes)
    manifest = Manifest(
        format=1,
        chunk_bytes=chunk_bytes,
        total_bytes=sum(c.size for c in components),
        components=[
            {k: v for k, v in asdict(c).items() if k != "path"} | {"file": c.path.name}
            for c in components
        ],
        chunks=[asdict(c) for c in chunks],
        source=source,
    )
    (cfg.out / "MANIFEST.json").write_text(manifest.to_json())
    out_rel = carry_path(cfg.out, cfg.top)
    caches_rel = None
    if cfg.host_caches is not None and place_host_caches(cfg.host_caches, cfg.cache, log=log):
        caches_rel = carry_path(cfg.host_caches, cfg.top)
    (cfg.out / "PLAN.md").write_text(
        plan_markdown(manifest, out_rel, tree, cfg.limit_bytes, caches_rel)
    )
    if tree + chunk_bytes + TREE_MARGIN // 2 > cfg.limit_bytes:
        log(
            f"warning: work tree {tree / MIB:.1f} MiB + chunk {chunk_bytes / MIB:.0f} MiB "
            f"exceeds the {cfg.limit_bytes / MIB:.0f} MiB per call: lower --chunk-mib"
        )
    shutil.copy2(Path(__file__).with_name("host.py"), cfg.out / "host.py")
    log(
        f"bundle: {manifest.total_bytes / MIB:.1f} MiB in {len(chunks)} chunk(s) -> {cfg.out} "
        f"(plan: {cfg.out / 'PLAN.md'})"
    )
    return manifest


def main(argv: list[str] | None = None) -> int:
    import argparse

    top = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(prog="gpu-host-bundle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=top / ".gpu/vllm-bundle")
    parser.add_argument(
        "--series-ref",
        default="gdn-ucache",
        help="branch/commit of vllm/ whose vllm/ tree is bundled",
    )
    parser.add_argument(
        "--vllm-tree",
        type=Path,
        default=None,
        help="use DIR/vllm (a plain directory) instead of vllm/@series-ref",
    )
    parser.add_argument("--vllm-wheel", type=Path, default=None)
    parser.add_argument("--wheels-file", type=Path, default=None)
    parser.add_argument(
        "--chunk-mib",
        type=float,
        default=0.0,
        help="chunk size (default: the largest that fits a 64 MiB call beside the work tree, "
        "balanced over the fewest chunks)",
    )
    parser.add_argument("--components", default="vllm,wheels,cutlass,project")
    parser.add_argument("--offline", action="store_true", help="never download; use the cache")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="xz -6 everywhere (quick builds for testing; ~10%% larger)",
    )
    args = parser.parse_args(argv)
    cache = Path(os.environ.get("GDN_UCACHE_CACHE", Path.home() / ".cache/gdn-ucache"))
    cfg = BundleConfig(
        top=top,
        out=args.out.resolve(),
        cache=cache,
        vllm_repo=top / "vllm",
        series_ref=args.series_ref,
        vllm_tree_dir=args.vllm_tree,
        vllm_wheel=args.vllm_wheel,
        wheels_file=args.wheels_file,
        chunk_bytes=int(args.chunk_mib * MIB),
        components=tuple(c for c in args.components.split(",") if c),
        download=not args.offline,
        host_caches=top / ".gpu/host-caches",
    )
    if args.fast:
        cfg.xz_big = cfg.xz_small = ("-T2", "-6")
    try:
        build(cfg)
    except (BundleError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "BundleConfig",
    "BundleError",
    "Manifest",
    "build",
    "read_specs",
    "split_payload",
    "wheel_members",
]
