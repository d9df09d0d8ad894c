"""Fixed, versioned inputs: the corpora under ``harness/data/corpora/`` with their sha256 manifest."""
