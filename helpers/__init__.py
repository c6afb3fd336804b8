"""Plumbing shared by the notebooks of "ONNX, the PDF for neural networks".

Only plumbing lives here: paths, verified downloads, the MNIST data, plots, timing and machine
description. What a notebook teaches (``torch.onnx.export``, ``tf2onnx``, ``InferenceSession``,
``quantize_*``, the generation loop) is written out in that notebook.

This package must never import torch or tensorflow at import time: notebook 03 proves inference
works without them, and ``tests/test_helpers_imports.py`` checks it.
"""
from helpers.paths import NOTEBOOKS, REPO_ROOT, artifacts_dir, cache_dir

__all__ = ["NOTEBOOKS", "REPO_ROOT", "artifacts_dir", "cache_dir"]
