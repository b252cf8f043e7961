"""The serving image: build arguments and labels, the ``docker run`` line, the in-image install
step, and the offline check of that step against the real vllm wheel.

Entry point: ``python -m tools.container <command> ...`` (``scripts/build-container.sh`` and
``scripts/check-container-install.sh`` call it; the Dockerfile runs its ``install`` command).
"""
