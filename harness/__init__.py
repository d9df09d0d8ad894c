"""model-harness: the regression gate for model deployments.

PyTorch FP32 is the reference; every exported variant (model x precision x provider)
is judged against it inside pytest, and every case leaves one JSON record behind.
"""

__version__ = "0.1.0"
