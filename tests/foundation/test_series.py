"""The series tooling end to end on a synthetic upstream (no network, no real vLLM)."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.fixtures.synthetic_upstream import (
    MESSAGE_CONFIG,
    SyntheticProject,
    make_project,
    release_files,
)
from tools.series.patchfile import parse_patch, read_series
from tools.series.pin import read_pin


def test_populate_is_deterministic_and_keeps_ignored_files(tmp_path: Path) -> None:
    first = make_project(tmp_path, name="first")
    second = make_project(tmp_path, name="second")
    first.run("populate-vllm")
    second.run("populate-vllm")
    base = first.git("rev-parse", "vllm-1.0.0")
    assert base == second.git("rev-parse", "vllm-1.0.0")
    assert first.git("log", "-1", "--format=%an|%ae|%at|%cn|%ce|%ct", base) == (
        "gdn-ucache sdist import|sdist-import@gdn-ucache.invalid|1700000000|"
        "gdn-ucache sdist import|sdist-import@gdn-ucache.invalid|1700000000"
    )
    tracked = first.git("ls-files").splitlines()
    # The sdist's .gitignore hides these; the import adds them with force.
    assert "vllm/_version.py" in tracked and "vllm.egg-info/PKG-INFO" in tracked
    assert first.git("ls-files", "-s", "tools/run.sh").startswith("100755")
    assert first.git("symbolic-ref", "--short", "HEAD") == "gdn-ucache"
    assert first.git("status", "--porcelain") == ""
    # Idempotent: a second populate changes nothing.
    first.run("populate-vllm")
    assert first.git("rev-parse", "gdn-ucache") == base


def test_populate_checks_base_sha_from_pin(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    pin = project.root / "vllm.pin"
    pin.write_text(pin.read_text() + "VLLM_BASE_SHA=" + "0" * 40 + "\n")
    result = project.run("populate-vllm", check=False)
    assert result.returncode == 1
    assert "VLLM_BASE_SHA" in result.stderr and "deterministic" in result.stderr


def test_apply_is_idempotent(patched: SyntheticProject) -> None:
    tip = patched.git("rev-parse", "gdn-ucache")
    assert patched.git("rev-list", "--count", "vllm-1.0.0..gdn-ucache") == "2"
    result = patched.run("apply")
    assert result.stdout.count("already applied") == 2
    assert patched.git("rev-parse", "gdn-ucache") == tip


def test_apply_builds_series_from_base(patched: SyntheticProject, tmp_path: Path) -> None:
    fresh = make_project(tmp_path, name="fresh")
    for path in patched.patches.iterdir():
        (fresh.patches / path.name).write_bytes(path.read_bytes())
    result = fresh.run("setup")
    assert "[1/2] Spec-Decode-Add-use_replayssm_spec-to-CacheConfig.patch: applied" in result.stdout
    assert fresh.tree("gdn-ucache") == patched.tree("gdn-ucache")
    assert fresh.git("log", "--format=%s", "vllm-1.0.0..gdn-ucache").splitlines() == [
        "[Kernel] Add the ucache kernel module",
        "[Spec Decode] Add use_replayssm_spec to CacheConfig",
    ]
    assert "use_replayssm_spec" in (fresh.vllm / "vllm" / "config.py").read_text()


def test_check_reports_each_state_and_changes_nothing(patched: SyntheticProject) -> None:
    # Take the branch back to one patch: patch 1 applied, patch 2 applies cleanly.
    patched.git("reset", "--quiet", "--hard", "gdn-ucache~1")
    before = (patched.git("rev-parse", "HEAD"), patched.git("status", "--porcelain"))
    result = patched.run("apply", "--check")
    lines = result.stdout.splitlines()
    assert lines[0].endswith("applied") and "Spec-Decode" in lines[0]
    assert lines[1].endswith("applies cleanly") and "Kernel" in lines[1]
    assert (patched.git("rev-parse", "HEAD"), patched.git("status", "--porcelain")) == before
    # A patch 2 that no longer fits (its context changed): fails, naming the file.
    kernel = read_series(patched.patches)[1]
    kernel.write_text(kernel.read_text().replace("return state + 1\n", "return state + 7\n", 1))
    result = patched.run("apply", "--check", check=False)
    assert result.returncode == 1
    assert "fails" in result.stdout and "vllm/engine.py" in result.stdout
    assert (patched.git("rev-parse", "HEAD"), patched.git("status", "--porcelain")) == before
    # Local commits that are not in patches/ are reported, not hidden.
    patched.commit_on_series(
        "[Misc] local change\n\nSigned-off-by: A <a@b.c>", {"vllm/extra.py": "Z = 3\n"}
    )
    assert (
        "1 local commit(s) not in patches/" in patched.run("apply", "--check", check=False).stdout
    )


def test_export_round_trip_is_exact_and_stable(patched: SyntheticProject, tmp_path: Path) -> None:
    names = [p.name for p in read_series(patched.patches)]
    assert names == [
        "Spec-Decode-Add-use_replayssm_spec-to-CacheConfig.patch",
        "Kernel-Add-the-ucache-kernel-module.patch",
    ]
    text = (patched.patches / names[0]).read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "\nDate: " not in text and "\n-- \n" not in text
    before = patched.snapshot_patches()
    patched.run("export")  # an unchanged branch rewrites nothing
    assert patched.snapshot_patches() == before
    # Apply onto a fresh base elsewhere: the same tree, and the same patches on re-export.
    fresh = make_project(tmp_path, name="fresh")
    for name, data in before.items():
        (fresh.patches / name).write_bytes(data)
    fresh.run("setup")
    assert fresh.tree("gdn-ucache") == patched.tree("gdn-ucache")
    fresh.run("export")
    assert fresh.snapshot_patches() == before
    assert fresh.run("check-patches", "--branch").returncode == 0


def test_rebase_onto_release_prints_range_diff(patched: SyntheticProject) -> None:
    old_tip = patched.git("rev-parse", "gdn-ucache")
    result = patched.run("rebase", "1.1.0")
    assert "[1/2] Spec-Decode-Add-use_replayssm_spec-to-CacheConfig.patch: ok" in result.stdout
    assert "[2/2] Kernel-Add-the-ucache-kernel-module.patch: ok" in result.stdout
    assert "git range-diff" in result.stdout and "= 1:" in result.stdout
    assert patched.git("rev-parse", "gdn-ucache-backup-1") == old_tip
    new_base = patched.git("rev-parse", "vllm-1.1.0")
    assert patched.git("merge-base", "gdn-ucache", new_base) == new_base
    assert (patched.vllm / "vllm" / "new_module.py").exists()
    pin = read_pin(patched.root / "vllm.pin")
    assert pin["VLLM_VERSION"] == "1.1.0" and pin["VLLM_BASE_SHA"] == new_base
    assert pin["VLLM_UPSTREAM_COMMIT"] == "abc1100"
    # patches/ refreshed against the new base, and consistent with the branch.
    assert patched.run("check-patches", "--branch").returncode == 0
    assert "already applied" in patched.run("apply").stdout


def test_rebase_conflict_names_patch_and_keeps_patches(patched: SyntheticProject) -> None:
    before = patched.snapshot_patches()
    pin_before = (patched.root / "vllm.pin").read_text()
    tip = patched.git("rev-parse", "gdn-ucache")
    result = patched.run("rebase", "1.2.0", check=False)
    assert result.returncode == 1
    assert "[1/2] Spec-Decode-Add-use_replayssm_spec-to-CacheConfig.patch: CONFLICT" in (
        result.stderr
    )
    assert "vllm/config.py" in result.stderr
    assert "patches/ and branch gdn-ucache are untouched" in result.stderr
    assert patched.snapshot_patches() == before
    assert (patched.root / "vllm.pin").read_text() == pin_before
    assert patched.git("rev-parse", "gdn-ucache") == tip
    # A second rebase is refused until this one is finished or dropped.
    again = patched.run("rebase", "1.1.0", check=False)
    assert again.returncode == 1 and "--abort" in again.stderr
    patched.run("rebase", "--abort")
    assert patched.git("symbolic-ref", "--short", "HEAD") == "gdn-ucache"
    assert patched.git("status", "--porcelain") == ""
    assert patched.git("rev-parse", "gdn-ucache") == tip


def test_rebase_conflict_can_be_resolved_and_continued(patched: SyntheticProject) -> None:
    patched.run("rebase", "1.2.0", check=False)
    config = patched.vllm / "vllm" / "config.py"
    text = config.read_text()
    start, end = text.index("<<<<<<<"), text.index(">>>>>>>")
    end = text.index("\n", end) + 1
    resolved = "    use_replayssm: bool | None = None\n    use_replayssm_spec: bool = False\n"
    config.write_text(text[:start] + resolved + text[end:])
    patched.git("add", "vllm/config.py")
    patched.git("am", "--continue")
    result = patched.run("rebase", "--continue")
    assert "[2/2] Kernel-Add-the-ucache-kernel-module.patch: ok" in result.stdout
    assert "git range-diff" in result.stdout
    assert read_pin(patched.root / "vllm.pin")["VLLM_VERSION"] == "1.2.0"
    assert "bool | None" in (patched.patches / read_series(patched.patches)[0].name).read_text()


def _fake_site_packages(tmp_path: Path, version: str = "1.0.0") -> Path:
    site = tmp_path / "site-packages"
    for name, text in release_files(version).items():
        if name.startswith("vllm/"):
            path = site / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return site


def test_target_applies_vllm_part_without_git(patched: SyntheticProject, tmp_path: Path) -> None:
    site = _fake_site_packages(tmp_path)
    dry = patched.run("apply", "--target", str(site), "--dry-run")
    assert "would create" in dry.stdout and not (site / "vllm" / "ucache.py").exists()
    result = patched.run("apply", "--target", str(site))
    assert f"modify {site}/vllm/config.py" in result.stdout
    assert f"create {site}/vllm/ucache.py" in result.stdout
    assert not (site / "tests").exists()  # only the vllm/ part of the series
    assert "use_replayssm_spec" in (site / "vllm" / "config.py").read_text()
    snapshot = {p: p.read_bytes() for p in site.rglob("*.py")}
    again = patched.run("apply", "--target", str(site / "vllm"))
    assert again.stdout.count("already applied") == 2
    assert {p: p.read_bytes() for p in site.rglob("*.py")} == snapshot


def test_target_refuses_other_version_and_is_all_or_nothing(
    patched: SyntheticProject, tmp_path: Path
) -> None:
    site = _fake_site_packages(tmp_path, version="1.2.0")
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    refused = patched.run("apply", "--target", str(site), check=False)
    assert refused.returncode == 1 and "pinned to 1.0.0" in refused.stderr
    # Forced onto 1.2.0: patch 1 conflicts in config.py; patch 2 alone would fit, but
    # nothing may be written.
    forced = patched.run("apply", "--target", str(site), "--force", check=False)
    assert forced.returncode == 1
    assert "Spec-Decode-Add-use_replayssm_spec-to-CacheConfig.patch" in forced.stderr
    assert "vllm/config.py" in forced.stderr and "nothing was written" in forced.stderr
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    missing = patched.run("apply", "--target", str(tmp_path / "nowhere"), check=False)
    assert missing.returncode == 1 and "no installed vllm package" in missing.stderr


def test_missing_vllm_is_a_clear_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    for args in (("apply",), ("apply", "--check"), ("export",), ("rebase", "1.1.0")):
        result = project.run(*args, check=False)
        assert result.returncode == 1, args
        assert "not populated" in result.stderr and "scripts/setup.sh" in result.stderr
        assert "Traceback" not in result.stderr
    assert not project.vllm.exists()


def test_unknown_version_is_a_clear_error(patched: SyntheticProject) -> None:
    tip = patched.git("rev-parse", "gdn-ucache")
    before = patched.snapshot_patches()
    result = patched.run("rebase", "9.9.9", check=False)
    assert result.returncode == 1 and "9.9.9" in result.stderr and "Traceback" not in result.stderr
    result = patched.run("rebase", "no-such-ref", check=False)
    assert result.returncode == 1 and "neither a release version" in result.stderr
    assert patched.git("rev-parse", "gdn-ucache") == tip
    assert patched.git("symbolic-ref", "--short", "HEAD") == "gdn-ucache"
    assert patched.snapshot_patches() == before
    pin = patched.root / "vllm.pin"
    pin.write_text(pin.read_text().replace("1.0.0", "8.8.8"))
    result = patched.run("setup", check=False)
    assert result.returncode == 1 and "8.8.8" in result.stderr


def test_corrupt_patch_is_named_and_nothing_changes(patched: SyntheticProject) -> None:
    patched.run("apply", "--reset")
    patched.git("reset", "--quiet", "--hard", "vllm-1.0.0")
    tip = patched.git("rev-parse", "gdn-ucache")
    name = read_series(patched.patches)[0].name
    path = patched.patches / name
    path.write_text(path.read_text().replace("@@ -", "@@ -x", 1))
    result = patched.run("apply", check=False)
    assert result.returncode == 1 and name in result.stderr
    assert patched.git("rev-parse", "gdn-ucache") == tip
    check = patched.run("apply", "--check", check=False)
    assert check.returncode == 1 and "fails" in check.stdout
    path.write_text("this is not a patch\n")
    for args in (("apply",), ("check-patches",)):
        result = patched.run(*args, check=False)
        assert result.returncode == 1 and name in result.stdout + result.stderr
    assert patched.git("rev-parse", "gdn-ucache") == tip


def test_dirty_tree_is_refused_and_kept(patched: SyntheticProject) -> None:
    engine = patched.vllm / "vllm" / "engine.py"
    engine.write_text(engine.read_text() + "# work in progress\n")
    for args in (("apply",), ("apply", "--reset"), ("rebase", "1.1.0")):
        result = patched.run(*args, check=False)
        assert result.returncode == 1 and "uncommitted changes" in result.stderr, args
    assert engine.read_text().endswith("# work in progress\n")


def test_unexported_commits_are_never_dropped(patched: SyntheticProject) -> None:
    patched.commit_on_series(
        "[Misc] not exported yet\n\nSigned-off-by: A <a@b.c>", {"vllm/extra.py": "Y = 2\n"}
    )
    result = patched.run("apply", check=False)
    assert result.returncode == 1 and "not exported yet" in result.stderr
    assert "scripts/export.sh" in result.stderr
    tip = patched.git("rev-parse", "gdn-ucache")
    result = patched.run("apply", "--reset")
    assert "gdn-ucache-backup-1" in result.stdout
    assert patched.git("rev-parse", "gdn-ucache-backup-1") == tip
    assert not (patched.vllm / "vllm" / "extra.py").exists()


def test_apply_conflict_stops_at_patch_and_is_recoverable(patched: SyntheticProject) -> None:
    # Change the base's series: rebuild with a conflicting first local commit via --reset
    # onto a branch that patch 2 no longer fits.
    kernel = read_series(patched.patches)[1]
    kernel.write_text(kernel.read_text().replace("return state + 1\n", "return state + 7\n", 1))
    (patched.patches / "series").write_text(f"{kernel.name}\n")
    result = patched.run("apply", "--reset", check=False)
    assert result.returncode == 1
    assert f"[1/1] {kernel.name} does not apply" in result.stderr
    assert "vllm/engine.py" in result.stderr and "am --abort" in result.stderr
    patched.git("am", "--abort")
    assert patched.git("rev-parse", "gdn-ucache") == patched.git("rev-parse", "vllm-1.0.0")
    assert patched.git("status", "--porcelain") == ""


def test_check_patches_enforces_conventions(patched: SyntheticProject) -> None:
    assert patched.run("check-patches").returncode == 0
    bad = patched.patches / read_series(patched.patches)[0].name
    text = bad.read_text()
    text = text.replace("Subject: [Spec Decode] Add", "Subject: Add")
    text = text.replace("Signed-off-by: Test Author <test@example.com>\n", "")
    text = text.replace("Drop-when: #49887 is merged and released\n", "")
    bad.write_text(text)
    (patched.patches / "stray.patch").write_text(text)
    result = patched.run("check-patches", check=False)
    assert result.returncode == 1
    for needle in ("[Tag] Title", "Signed-off-by", "Drop-when", "stray.patch: not listed"):
        assert needle in result.stdout, needle


def test_patch_header_parsing() -> None:
    assert "Upstream-PR: vllm-project/vllm#49887" in MESSAGE_CONFIG


def test_parse_patch_reads_trailers(patched: SyntheticProject) -> None:
    patch = parse_patch(read_series(patched.patches)[0])
    assert patch.subject == "[Spec Decode] Add use_replayssm_spec to CacheConfig"
    assert patch.trailer_values("Upstream-PR") == ["vllm-project/vllm#49887"]
    assert patch.changed_paths() == ["vllm/config.py"]


def test_sdist_with_links_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    sdist = project.cache / "sdist" / "vllm-1.0.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        info = tarfile.TarInfo("vllm-1.0.0/evil")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        archive.addfile(info, io.BytesIO())
    result = project.run("populate-vllm", check=False)
    assert result.returncode == 1 and "link" in result.stderr


@pytest.mark.parametrize(
    "script",
    ["setup", "populate-vllm", "apply", "export", "rebase", "check-patches"],
)
def test_scripts_answer_help(script: str, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    result = project.run(script, "--help")
    assert "usage:" in result.stdout and f"scripts/{script}.sh" in result.stdout


def test_git_missing_identity_still_applies(patched: SyntheticProject, tmp_path: Path) -> None:
    env = patched.env()
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        env.pop(key)
    env["HOME"] = str(tmp_path / "home")
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    fresh = make_project(tmp_path, name="fresh")
    for path in patched.patches.iterdir():
        (fresh.patches / path.name).write_bytes(path.read_bytes())
    env["GDN_UCACHE_ROOT"] = str(fresh.root)
    from tests.fixtures.synthetic_upstream import REPO_ROOT

    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_rebase_onto_git_ref_keeps_pin(patched: SyntheticProject) -> None:
    patched.git("branch", "upstream-main", "vllm-1.0.0")
    patched.git("checkout", "--quiet", "upstream-main")
    patched.commit_on_series("upstream work", {"vllm/other.py": "W = 1\n"})
    patched.git("checkout", "--quiet", "gdn-ucache")
    pin_before = (patched.root / "vllm.pin").read_text()
    result = patched.run("rebase", "upstream-main")
    assert "[2/2] Kernel-Add-the-ucache-kernel-module.patch: ok" in result.stdout
    assert "vllm.pin unchanged" in result.stdout
    assert (patched.root / "vllm.pin").read_text() == pin_before
    assert (patched.vllm / "vllm" / "other.py").exists()
    # export and check follow the recorded base (refs/gdn-ucache/base), not the pin.
    assert patched.run("check-patches", "--branch").returncode == 0
    assert "already applied" in patched.run("apply").stdout
    # --reset goes back to the pinned base.
    patched.run("apply", "--reset")
    assert not (patched.vllm / "vllm" / "other.py").exists()


def test_target_matches_git_on_awkward_diffs(project: SyntheticProject, tmp_path: Path) -> None:
    """No final newline, CRLF, form feed, deletion, new executable file: same bytes as git."""
    project.commit_on_series(
        "[Misc] Awkward base files\n\nSet up files that diff tools get wrong.\n\n"
        "Upstream-PR: none (test)\nDrop-when: never\nSigned-off-by: A <a@b.c>",
        {
            "vllm/nonl.py": "x = 1\ny = 2",
            "vllm/crlf.py": "a = 1\r\nb = 2\r\n",
            "vllm/ff.py": "def f():\n    pass\n\x0c\ndef g():\n    pass\n",
            "vllm/gone.py": "DEAD = True\n",
        },
    )
    project.git("update-ref", "refs/gdn-ucache/base", "HEAD")
    base_files = {
        name: (project.vllm / name).read_bytes()
        for name in project.git("ls-files", "vllm").splitlines()
    }
    project.git("rm", "--quiet", "vllm/gone.py")
    (project.vllm / "vllm" / "nonl.py").write_text("x = 1\ny = 3")
    (project.vllm / "vllm" / "crlf.py").write_bytes(b"a = 1\r\nb = 3\r\n")
    (project.vllm / "vllm" / "ff.py").write_text(
        "def f():\n    pass\n\x0c\ndef g():\n    return 1\n"
    )
    tool = project.vllm / "vllm" / "tool.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    project.git("add", "-A")
    project.git(
        "commit",
        "--quiet",
        "-m",
        "[Misc] Awkward edits\n\nEdits them.\n\n"
        "Upstream-PR: none (test)\nDrop-when: never\nSigned-off-by: A <a@b.c>",
    )
    project.run("export")
    site = tmp_path / "site"
    for name, data in base_files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    # Only the last patch is "the series" here: the base files are already in site.
    series = project.patches / "series"
    sorted_names = [path.name for path in read_series(project.patches)]
    series.write_text(sorted_names[-1] + "\n")
    project.run("apply", "--target", str(site), "--force")
    for name in project.git("ls-files", "vllm").splitlines():
        assert (site / name).read_bytes() == (project.vllm / name).read_bytes(), name
    assert not (site / "vllm" / "gone.py").exists()
    assert (site / "vllm" / "tool.sh").stat().st_mode & 0o111
    assert "already applied" in project.run("apply", "--target", str(site), "--force").stdout
    # And git am reproduces the same tree from the exported file (CRLF kept).
    from tools.series.apply import am_one

    project.git("checkout", "--quiet", "-b", "round-trip", "gdn-ucache~1")
    applied, output = am_one(project.vllm, project.patches / sorted_names[-1])
    assert applied, output
    assert project.tree("round-trip") == project.tree("gdn-ucache")


def test_populate_from_git_remote(tmp_path: Path) -> None:
    """The online path, with a local repository standing in for GitHub."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    for name, text in release_files("1.0.0").items():
        (upstream / name).parent.mkdir(parents=True, exist_ok=True)
        (upstream / name).write_text(text)

    def run_git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(upstream), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    run_git("init", "--quiet")
    run_git("add", "--all", "--force")
    run_git("-c", "user.name=U", "-c", "user.email=u@x", "commit", "--quiet", "-m", "release")
    run_git("tag", "v1.0.0")
    upstream_sha = run_git("rev-parse", "HEAD")
    project = make_project(tmp_path)
    (project.root / "vllm.pin").write_text(
        f"VLLM_VERSION=1.0.0\nVLLM_UPSTREAM_COMMIT={upstream_sha[:9]}\n"
    )
    env = {**project.env(), "GDN_UCACHE_VLLM_URL": str(upstream)}
    del env["GDN_UCACHE_OFFLINE"]
    from tests.fixtures.synthetic_upstream import REPO_ROOT

    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "setup.sh")],  # --source auto: git is reachable
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "fetching v1.0.0" in result.stdout
    assert project.git("rev-parse", "vllm-1.0.0") == upstream_sha
    assert project.git("rev-parse", "gdn-ucache") == upstream_sha
    # A pin naming another upstream commit is refused.
    other = make_project(tmp_path, name="other")
    env["GDN_UCACHE_ROOT"] = str(other.root)
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "populate-vllm.sh"), "--source", "git"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and "vllm.pin says abc1000" in result.stderr


def test_lint_without_precommit_config_names_the_file(tmp_path: Path) -> None:
    """A vLLM base without .pre-commit-config.yaml gets a SeriesError naming the file, not a
    bare FileNotFoundError (the version matrix lints old bases)."""
    from tools.series.errors import SeriesError
    from tools.series.lint import hook_versions

    with pytest.raises(SeriesError, match=r"\.pre-commit-config\.yaml not found"):
        hook_versions(tmp_path)
