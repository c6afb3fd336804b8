"""Where the series keeps things: notebooks, ``ONNX_PDF_ARTIFACTS`` and ``ONNX_PDF_CACHE`` folders."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"


def artifacts_dir() -> Path:
    """Folder for files produced by the notebooks (created on demand)."""
    path = Path(os.environ.get("ONNX_PDF_ARTIFACTS", REPO_ROOT / "artifacts")).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(*parts: str) -> Path:
    """Folder for verified downloads, optionally a sub-folder of it (created on demand)."""
    path = (
        Path(os.environ.get("ONNX_PDF_CACHE", REPO_ROOT / ".cache")).expanduser().joinpath(*parts)
    )
    path.mkdir(parents=True, exist_ok=True)
    return path
