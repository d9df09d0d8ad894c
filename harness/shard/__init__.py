"""Splitting a run across machines (``harness run --shard K/N``) and combining the shards
(``harness merge``). ``plan``: which cases a shard runs; ``merge``: checks and the merged run."""
