"""Patch-series tooling: populate the vLLM base, apply/export/rebase/check the series.

Entry point: ``python -m tools.series <command> ...`` (the ``scripts/*.sh`` wrappers call it).
"""
