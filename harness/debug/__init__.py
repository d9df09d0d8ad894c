"""Debugging tools that localise a regression inside an exported graph (``harness bisect``)."""
