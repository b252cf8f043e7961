"""Command line of the container tooling: ``python -m tools.container <command> --help``."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from tools.container.buildinfo import BuildInfo, build_info
from tools.container.serve import DEFAULT_MODEL, ServeOptions, render_docker_run
from tools.series.errors import SeriesError, run_cli
from tools.series.layout import Layout, default_layout

KERNELS = ("ours", "flashinfer")
DEFAULT_BASE_IMAGE = "vllm/vllm-openai"
OUR_KERNEL = "kernels/gdn_ucache_flush.py"


def docker_build_argv(
    layout: Layout,
    info: BuildInfo,
    tag: str,
    vllm_version: str,
    kernel: str,
    base_image: str,
    force: bool,
    extra: list[str],
) -> list[str]:
    build_args = {
        "BASE_IMAGE": base_image,
        "VLLM_VERSION": vllm_version,
        "UCACHE_KERNEL": kernel,
        "SERIES_VERSION": info.series_version,
        "SERIES_DIGEST": info.series_digest,
        "PATCH_COUNT": str(info.patch_count),
        "SOURCE_REVISION": info.source_revision,
        "SERIES_FORCE": "1" if force else "0",
    }
    argv = ["docker", "build", "--file", str(layout.root / "Dockerfile"), "--tag", tag]
    for key, value in build_args.items():
        argv += ["--build-arg", f"{key}={value}"]
    return [*argv, *extra, str(layout.root)]


def _cmd_build(args: argparse.Namespace) -> int:
    layout = default_layout(args.root)
    info = build_info(layout)
    version = args.vllm_version or info.vllm_version
    if version != info.vllm_version and not args.force:
        raise SeriesError(
            f"--vllm-version {version} differs from vllm.pin ({info.vllm_version}); the series "
            "is only known to apply to the pinned release. Pass --force to build anyway "
            "(the apply step then warns instead of refusing)."
        )
    if args.kernel == "ours" and not (layout.root / OUR_KERNEL).is_file():
        raise SeriesError(
            f"{OUR_KERNEL} does not exist in {layout.root}; build with --kernel flashinfer "
            "to serve flashinfer's ucache kernel instead"
        )
    tag = args.tag or info.default_tag(args.kernel)
    argv = docker_build_argv(
        layout, info, tag, version, args.kernel, args.base_image, args.force, args.docker_args
    )
    print(
        f"vLLM base: {args.base_image}:v{version}   series: {info.patch_count} patch(es), "
        f"version {info.series_version}, digest {info.series_digest[:12]}   kernel: {args.kernel}"
    )
    print("build command:\n  DOCKER_BUILDKIT=1 " + shlex.join(argv), flush=True)
    if not args.dry_run:
        if shutil.which("docker") is None:
            raise SeriesError("docker is not installed here; use --dry-run to print the commands")
        result = subprocess.run(argv, env={**os.environ, "DOCKER_BUILDKIT": "1"}, check=False)
        if result.returncode != 0:
            raise SeriesError(f"docker build failed (exit {result.returncode}); see above")
    print("\nserve Qwen3.5 with MTP speculative decoding on the ucache backend:")
    print(render_docker_run(ServeOptions(image=tag, model=args.model)))
    return 0


def _cmd_run_command(args: argparse.Namespace) -> int:
    layout = default_layout(args.root)
    image = args.image or build_info(layout).default_tag("ours")
    print(render_docker_run(ServeOptions(image=image, model=args.model, port=args.port)))
    return 0


def _cmd_install(args: argparse.Namespace) -> int:
    from tools.container.install import run_install

    site = Path(args.site) if args.site else None
    manifest = Path(args.manifest) if args.manifest else None
    return run_install(default_layout(args.root), site, manifest, force=args.force)


def _cmd_check_install(args: argparse.Namespace) -> int:
    from tools.container.check import check_install

    return check_install(default_layout(args.root), run_tests=not args.skip_tests)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.container", description=__doc__)
    wrapper = os.environ.get("CONTAINER_PROG")
    parser.add_argument("--root", help="project root (default: $GDN_UCACHE_ROOT or this checkout)")
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser(
        "build",
        prog=wrapper,
        help="docker build the serving image and print its docker run command",
        description="Build the gdn-ucache serving image (Dockerfile) with the labels computed "
        "from vllm.pin and patches/series, then print the docker run command that serves "
        "Qwen3.5 with MTP speculative decoding on the ucache backend. Needs BuildKit.",
    )
    build.add_argument("--tag", help="image tag (default: gdn-ucache:v<vllm>-<series version>)")
    build.add_argument("--vllm-version", help="vLLM release of the base image (default: vllm.pin)")
    build.add_argument(
        "--kernel",
        choices=KERNELS,
        default="ours",
        help="ucache kernel module: ours (kernels/gdn_ucache_flush.py, default) or "
        "flashinfer (the one shipped in the image's flashinfer-python)",
    )
    build.add_argument(
        "--base-image",
        default=DEFAULT_BASE_IMAGE,
        help=f"base image repository, tagged v<vllm version> (default: {DEFAULT_BASE_IMAGE})",
    )
    build.add_argument(
        "--force", action="store_true", help="allow a vLLM version other than the pin"
    )
    build.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    build.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"model in the printed docker run command: Hugging Face id or local directory "
        f"(default: {DEFAULT_MODEL})",
    )
    build.add_argument(
        "docker_args",
        nargs="*",
        metavar="-- DOCKER_BUILD_ARGS",
        help="extra arguments for docker build, after --",
    )
    build.set_defaults(func=_cmd_build)

    run_command = commands.add_parser(
        "run-command",
        help="print the docker run command (Qwen3.5, MTP, ucache backend)",
    )
    run_command.add_argument("--image", help="image tag (default: the build's default tag)")
    run_command.add_argument("--model", default=DEFAULT_MODEL, help="HF id or local directory")
    run_command.add_argument("--port", type=int, default=8000, help="host port (default 8000)")
    run_command.set_defaults(func=_cmd_run_command)

    install = commands.add_parser(
        "install",
        help="apply the series onto this interpreter's installed vllm (the image's step)",
    )
    install.add_argument("--site", help="site dir holding vllm (default: found via this python)")
    install.add_argument("--manifest", help="write the list of changed files here")
    install.add_argument(
        "--force", action="store_true", help="accept a vllm version other than the pin"
    )
    install.set_defaults(func=_cmd_install)

    check = commands.add_parser(
        "check-install",
        prog=os.environ.get("CHECK_PROG"),
        help="offline check of the image's install step against the real vllm wheel",
        description="In a cached virtualenv with the pinned vllm wheel (CPU machine): run the "
        "image's install step, import every module the series touches, parse the served "
        "command with the patched vllm serve parser, run the series' CPU tests.",
    )
    check.add_argument(
        "--skip-tests", action="store_true", help="skip the series' own tests (last step)"
    )
    check.set_defaults(func=_cmd_check_install)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_cli(build_parser(), argv)
