"""Rebase CI for the gdn-ucache series (issue #8).

Judges the series against vLLM bases other than the pinned one, without touching ``vllm/``'s
checkout: the version matrix (``version-matrix.sh``), the upstream bisect
(``bisect-upstream.sh``), the paste-ready report (``report.sh``) and the upstream PR
branches (``pr-prep.sh``). Entry point: ``python -m tools.rebase_ci <command> --help``.
Applying, exporting and rebasing stay in :mod:`tools.series`; this package only calls it.
"""
