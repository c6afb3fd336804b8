"""Plumbing shared by the notebooks (never a lesson); never imports torch or tensorflow at import time."""

from helpers.data.paths import NOTEBOOKS, REPO_ROOT, artifacts_dir, cache_dir

__all__ = ["NOTEBOOKS", "REPO_ROOT", "artifacts_dir", "cache_dir"]
