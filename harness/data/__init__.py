"""Fixed, versioned inputs: the corpora under ``datasets/`` with their sha256 manifest."""
