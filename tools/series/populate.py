"""Populate ``vllm/`` with the pinned vLLM base.

Two sources, chosen by ``--source`` (default ``auto``):

* ``git``: the upstream remote (needs GitHub); the base branch is the release tag's commit.
* ``sdist``: the PyPI source release of the pinned version, imported as one deterministic
  commit (fixed author, committer, dates and message, files added with force), so every
  machine gets the same SHA (``VLLM_BASE_SHA`` in ``vllm.pin``).

The sdist link comes from pip's own PackageFinder inside pip's download-command context, so
pip's configured index (pip.conf, PIP_INDEX_URL, find-links) is used and no index host is
written into this repository. Downloads are cached under ``$GDN_UCACHE_CACHE/sdist``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from tools.series.errors import SeriesError
from tools.series.gitutil import branch_exists, git, git_out, is_repo, rev_parse
from tools.series.layout import BASE_REF, SERIES_BRANCH, Layout, base_branch_for

UPSTREAM_URL = "https://github.com/vllm-project/vllm.git"


def upstream_url() -> str:
    """The vLLM git remote; GDN_UCACHE_VLLM_URL overrides it (a mirror, or a test repo)."""
    return os.environ.get("GDN_UCACHE_VLLM_URL") or UPSTREAM_URL


IMPORT_IDENTITY = ("gdn-ucache sdist import", "sdist-import@gdn-ucache.invalid")
_VERSION_RE = re.compile(r"^\d+(\.\d+)+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def is_release_version(text: str) -> bool:
    return bool(_VERSION_RE.match(text))


def sdist_cache_path(layout: Layout, version: str) -> Path:
    return layout.cache_dir / "sdist" / f"vllm-{version}.tar.gz"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _offline() -> bool:
    return os.environ.get("GDN_UCACHE_OFFLINE", "") not in ("", "0")


def find_sdist_link(version: str) -> tuple[str, str | None]:
    """Ask pip's PackageFinder (pip's configured index) for the vllm==version sdist.

    Returns (url, sha256 or None). ``pip download`` cannot be used: it builds the sdist's
    metadata, which fails for vLLM without its build dependencies.
    """
    try:
        from pip._internal.cli.cmdoptions import make_target_python
        from pip._internal.commands.download import DownloadCommand
        from pip._vendor.packaging.specifiers import SpecifierSet
    except ImportError as exc:  # pragma: no cover - pip is part of every venv we make
        raise SeriesError(f"pip is needed to find the vLLM {version} sdist: {exc}") from exc

    # pip warns about every find-links/extra-index location without the package; quiet it.
    logging.getLogger("pip").setLevel(logging.ERROR)
    command = DownloadCommand("download", "find the vLLM source release")
    options, _ = command.parse_args(["--no-deps", "--no-binary", ":all:", f"vllm=={version}"])
    with command.main_context():
        session = command.get_default_session(options)
        finder = command._build_package_finder(
            options=options,
            session=session,
            target_python=make_target_python(options),
            ignore_requires_python=True,
        )
        result = finder.find_best_candidate("vllm", SpecifierSet(f"=={version}"))
        candidate = result.best_candidate
        if candidate is None or not candidate.link.filename.endswith(".tar.gz"):
            raise SeriesError(
                f"no source release vllm=={version} on pip's configured index; "
                "check the version (e.g. `pip index versions vllm`) and pip's index settings"
            )
        link = candidate.link
        return link.url_without_fragment, link.hash if link.hash_name == "sha256" else None


def _download(url: str, destination: Path) -> None:
    from pip._internal.commands.download import DownloadCommand

    command = DownloadCommand("download", "download the vLLM source release")
    options, _ = command.parse_args([])
    with command.main_context():
        session = command.get_default_session(options)
        partial = destination.with_suffix(".part")
        with session.get(url, stream=True) as response:
            response.raise_for_status()
            with partial.open("wb") as handle:
                for block in response.iter_content(chunk_size=1 << 20):
                    handle.write(block)
        partial.replace(destination)


def fetch_sdist(layout: Layout, version: str, expected_sha256: str | None) -> Path:
    """Return the cached sdist for version, downloading it once through pip's index."""
    path = sdist_cache_path(layout, version)
    if not path.is_file():
        if _offline():
            raise SeriesError(
                f"vLLM {version} sdist is not cached at {path} and GDN_UCACHE_OFFLINE is set"
            )
        url, index_sha256 = find_sdist_link(version)
        print(f"downloading {url.rsplit('/', 1)[-1]} (via pip's configured index)", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        _download(url, path)
        expected_sha256 = expected_sha256 or index_sha256
    if expected_sha256:
        actual = _sha256(path)
        if actual != expected_sha256:
            bad = path.with_suffix(".bad")
            path.replace(bad)
            raise SeriesError(
                f"{path.name}: sha256 {actual} does not match the expected {expected_sha256}; "
                f"moved it to {bad} (delete it and run again)"
            )
    return path


def _safe_members(archive: tarfile.TarFile, top: str) -> list[tarfile.TarInfo]:
    members = []
    for member in archive.getmembers():
        name = member.name
        if name == top:
            continue
        if not name.startswith(top + "/"):
            raise SeriesError(f"unexpected entry {name!r} outside {top}/ in the sdist")
        if member.issym() or member.islnk():
            raise SeriesError(f"the sdist contains a link {name!r}; refusing to import it")
        member.name = name[len(top) + 1 :]
        members.append(member)
    return members


def _import_identity_env(date: str) -> dict[str, str]:
    name, email = IMPORT_IDENTITY
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": date,
    }


def _read_commit_id(tree: Path) -> str | None:
    version_file = tree / "vllm" / "_version.py"
    if not version_file.is_file():
        return None
    match = re.search(r"commit_id\s*=\s*['\"]g?([0-9a-f]{7,40})['\"]", version_file.read_text())
    return match.group(1) if match else None


def import_sdist(repo: Path, sdist: Path, version: str) -> str:
    """Import the sdist into repo as a root commit on branch vllm-<version>; return its SHA.

    The work tree of repo is replaced by the sdist's files (repo must be clean or new). The
    commit is deterministic: fixed identity, date = newest mtime in the archive, fixed message.
    """
    top = f"vllm-{version}"
    if not is_repo(repo):
        repo.mkdir(exist_ok=True)
        git(repo, "init", "--quiet", "--object-format=sha1")
    # Extract inside vllm/.git: same file system, invisible to both work trees, and an
    # interrupted run leaves no clutter in the project.
    git_dir = Path(git_out(repo, "rev-parse", "--absolute-git-dir"))
    staging = Path(tempfile.mkdtemp(prefix="sdist-import-", dir=git_dir))
    try:
        with tarfile.open(sdist, "r:gz") as archive:
            members = _safe_members(archive, top)
            newest = max(member.mtime for member in members)
            if hasattr(tarfile, "data_filter"):
                archive.extractall(staging, members=members, filter="data")
            else:  # Python < 3.11.4: members were already checked by _safe_members
                archive.extractall(staging, members=members)
        upstream_commit = _read_commit_id(staging)
        # Index the sdist's files without touching repo's checkout: a separate work tree
        # and index, everything added with force (sdists carry .gitignore files that would
        # otherwise hide some of their own files).
        index = staging.parent / f"{staging.name}.index"
        env = {
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(staging),
            "GIT_INDEX_FILE": str(index),
        }
        git(staging, "add", "--force", "--all", ".", env=env)
        tree = git_out(staging, "write-tree", env=env)
        index.unlink(missing_ok=True)
        message = (
            f"Import vLLM {version} from its PyPI source release\n\n"
            f"Deterministic import of {sdist.name} by gdn-ucache (tools/series/populate.py):\n"
            "fixed author, committer, dates and message, so every machine gets this SHA.\n\n"
            f"Upstream-Commit: {upstream_commit or 'unknown'}\n"
            f"Sdist-SHA256: {_sha256(sdist)}\n"
        )
        date = f"@{newest} +0000"
        commit = git_out(
            repo, "commit-tree", "--no-gpg-sign", tree, "-m", message,
            env=_import_identity_env(date),
        )  # fmt: skip
        git(repo, "update-ref", f"refs/heads/{base_branch_for(version)}", commit)
        return commit
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        staging.with_name(staging.name + ".index").unlink(missing_ok=True)


def _remote_has_tag(url: str, version: str) -> bool:
    """True when the git remote answers and has tag v<version> (30 s at most)."""
    try:
        result = git(
            Path.cwd(), "ls-remote", "--exit-code", url, f"refs/tags/v{version}",
            check=False, timeout=30,
        )  # fmt: skip
    except SeriesError:  # timed out: treat as unreachable
        return False
    return result.returncode == 0


def _populate_from_git(repo: Path, version: str, upstream_commit: str) -> str:
    if not is_repo(repo):
        repo.mkdir(exist_ok=True)
        git(repo, "init", "--quiet")
    if git(repo, "remote", "get-url", "origin", check=False).returncode != 0:
        git(repo, "remote", "add", "origin", upstream_url())
    tag = f"v{version}"
    print(f"fetching {tag} from {upstream_url()}", flush=True)
    git(repo, "fetch", "--depth=1", "origin", f"refs/tags/{tag}:refs/tags/{tag}", timeout=1800)
    commit = git_out(repo, "rev-parse", f"{tag}^{{commit}}")
    if upstream_commit and not commit.startswith(upstream_commit):
        raise SeriesError(f"tag {tag} is {commit[:12]}, but vllm.pin says {upstream_commit}")
    git(repo, "update-ref", f"refs/heads/{base_branch_for(version)}", commit)
    return commit


def ensure_base(layout: Layout, version: str, source: str = "auto") -> str:
    """Make sure branch vllm-<version> exists in vllm/ (importing it if needed); return its SHA."""
    repo = layout.vllm_dir
    branch = base_branch_for(version)
    if is_repo(repo) and branch_exists(repo, branch):
        return git_out(repo, "rev-parse", f"refs/heads/{branch}")
    if repo.exists() and not is_repo(repo) and any(repo.iterdir()):
        raise SeriesError(
            f"{repo} exists, is not empty and is not a git repository; move it aside "
            "(nothing was changed)"
        )
    pin = layout.pin() if version == layout.pinned_version() else {}
    if source == "auto":
        source = "git" if not _offline() and _remote_has_tag(upstream_url(), version) else "sdist"
    if source == "git":
        return _populate_from_git(repo, version, pin.get("VLLM_UPSTREAM_COMMIT", ""))
    if source != "sdist":
        raise SeriesError(f"unknown source {source!r} (use auto, git or sdist)")
    sdist = fetch_sdist(layout, version, pin.get("VLLM_SDIST_SHA256"))
    print(f"importing {sdist.name} into {repo} as branch {branch}", flush=True)
    commit = import_sdist(repo, sdist, version)
    expected = pin.get("VLLM_BASE_SHA")
    if expected and commit != expected:
        raise SeriesError(
            f"the import of {sdist.name} gave {commit}, but vllm.pin says VLLM_BASE_SHA={expected};"
            " the import is no longer deterministic (report it; the branch was kept)"
        )
    print(f"{branch} = {commit}", flush=True)
    return commit


def populate(layout: Layout, source: str = "auto") -> str:
    """Populate vllm/ with the pinned base and a series branch; check it out if vllm/ is new."""
    repo = layout.vllm_dir
    version = layout.pinned_version()
    fresh = not is_repo(repo) or rev_parse(repo, "HEAD") is None
    base = ensure_base(layout, version, source)
    if not branch_exists(repo, SERIES_BRANCH):
        git(repo, "branch", SERIES_BRANCH, base)
        git(repo, "update-ref", BASE_REF, base)
    if fresh:
        # New repository: its work tree is empty, so check out the series branch.
        git(repo, "checkout", "--quiet", "--force", SERIES_BRANCH)
    return base
