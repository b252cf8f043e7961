"""Project tooling for gdn-ucache (not shipped into vLLM)."""
