"""Where the series keeps things.

Three folders, all outside git's view except the notebooks:

* ``NOTEBOOKS``  - the ordered notebooks.
* ``ARTIFACTS``  - files the notebooks produce (``.onnx`` models, benchmark JSON).
  Override with ``ONNX_PDF_ARTIFACTS``.
* ``CACHE``      - verified downloads (wheels, datasets, model builds), reused between runs.
  Override with ``ONNX_PDF_CACHE`` (a teacher can point a whole class at one shared, pre-filled folder).
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO_ROOT / "notebooks"


def artifacts_dir() -> Path:
    """Folder for files produced by the notebooks (created on demand)."""
    path = Path(os.environ.get("ONNX_PDF_ARTIFACTS", REPO_ROOT / "artifacts")).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(*parts: str) -> Path:
    """Folder for verified downloads, optionally a sub-folder of it (created on demand)."""
    path = Path(os.environ.get("ONNX_PDF_CACHE", REPO_ROOT / ".cache")).expanduser().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
