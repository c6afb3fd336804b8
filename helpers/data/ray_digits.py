"""Plumbing for notebook 09 (Ray): the digit dataset as Parquet shards (one per shift of MNIST's 70,000 images,
checked against a manifest), Ray's folders and token, the Ray processes of this project."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import numpy as np

from helpers.data.atomic import cached_dir
from helpers.data.paths import cache_dir

# (rows down, columns right): 3 x 5 = 15 shifts of 70,000 images = 1,050,000 rows; (0, 0) is MNIST itself
SHIFTS = [(dy, dx) for dy in (-1, 0, 1) for dx in (-2, -1, 0, 1, 2)]
IMAGES = 70_000  # 60,000 training images, then the 10,000 test images
TEST_START = 60_000  # image index of the first test image


def shift_images(images: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """uint8 images [N, 28, 28] moved ``dy`` rows down and ``dx`` columns right, black coming in (no wrap)."""
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise ValueError(
            f"expected uint8 images [N, 28, 28], got {images.dtype} {list(images.shape)}"
        )
    out = np.zeros_like(images)
    h, w = 28 - abs(dy), 28 - abs(dx)
    out[:, max(dy, 0) : max(dy, 0) + h, max(dx, 0) : max(dx, 0) + w] = images[
        :, max(-dy, 0) : max(-dy, 0) + h, max(-dx, 0) : max(-dx, 0) + w
    ]
    return out


def row_id(shift_index: int, image_index) -> np.ndarray:
    """The id of (shift, image): shift_index * 70,000 + image index (test images are 60,000..69,999)."""
    return np.int64(shift_index) * IMAGES + np.asarray(image_index, dtype=np.int64)


def unshifted_test_ids() -> np.ndarray:
    """Ids of the rows that are MNIST's 10,000 test images, unshifted, in test-set order."""
    return row_id(SHIFTS.index((0, 0)), np.arange(TEST_START, IMAGES))


def shard_table(images: np.ndarray, labels: np.ndarray, ids: np.ndarray):
    """A pyarrow table of ``id``, ``label`` and ``pixels`` (784 uint8 per row, a fixed-size list)."""
    import pyarrow as pa

    flat = np.ascontiguousarray(images, dtype=np.uint8).reshape(len(images), 784)
    pixels = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), 784)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "label": pa.array(labels, pa.uint8()), "pixels": pixels}
    )


def _shard_name(i: int) -> str:
    dy, dx = SHIFTS[i]
    return f"shift{i:02d}_dy{dy:+d}_dx{dx:+d}.parquet"


def _complete(folder: Path) -> bool:
    """Every shard of the manifest is there with its row count (read from the Parquet footer)."""
    import pyarrow.parquet as pq

    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        rows = json.loads(manifest.read_text())["rows"]
        return sorted(rows) == sorted(map(_shard_name, range(len(SHIFTS)))) and all(
            pq.ParquetFile(folder / name).metadata.num_rows == n for name, n in rows.items()
        )
    except (OSError, ValueError, KeyError):  # a missing or truncated shard
        return False


def _build(folder: Path) -> None:
    import pyarrow.parquet as pq

    from helpers.data.mnist import load_mnist

    data = load_mnist()
    images, labels = (
        np.concatenate([data.x_train, data.x_test]),
        np.concatenate([data.y_train, data.y_test]),
    )
    rows = {}
    for i, (dy, dx) in enumerate(SHIFTS):
        table = shard_table(shift_images(images, dy, dx), labels, row_id(i, np.arange(IMAGES)))
        pq.write_table(table, folder / _shard_name(i), row_group_size=10_000)
        rows[_shard_name(i)] = table.num_rows
    (folder / "manifest.json").write_text(json.dumps({"shifts": SHIFTS, "rows": rows}, indent=1))


def digit_shards() -> Path:
    """The folder of Parquet shards (built once; rebuilt when missing or incomplete)."""
    return cached_dir(cache_dir() / "ray_digits", _build, _complete)


def shard_paths(folder: Path) -> list[Path]:
    return [folder / _shard_name(i) for i in range(len(SHIFTS))]


def ray_folders() -> dict[str, Path]:
    """Ray's ``RAY_TMPDIR``, ``temp`` (one ``session_*`` folder, with logs, per cluster) and ``spill`` folders."""
    root = cache_dir("ray")
    folders = {
        "RAY_TMPDIR": root,
        "temp": cache_dir("ray", "ray"),
        "spill": cache_dir("ray", "spill"),
    }
    if len(str(folders["temp"])) > 50:
        raise ValueError(
            f"Ray's temp folder {folders['temp']} is too long for its socket paths; set "
            "ONNX_PDF_CACHE to a shorter folder"
        )
    return folders


def auth_token_file() -> Path:
    """The cluster's token (256 random bits, hex), created once, readable by its owner only."""
    path = cache_dir("ray") / "auth_token"
    if not path.is_file():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path


def quick_ray_imports() -> str:
    """A ``PYTHONPATH`` folder hiding ``rfc3987_syntax`` (jsonschema's optional IRI check) from Ray's processes."""
    # its import builds a grammar, seconds on a busy 2-core machine, and a node's agents must report within 15 s
    folder = cache_dir("ray", "pythonpath")
    shim = folder / "rfc3987_syntax.py"
    text = 'raise ImportError("rfc3987_syntax is left out of Ray processes (helpers.data.ray_digits)")\n'
    if not shim.is_file() or shim.read_text() != text:
        shim.write_text(text)
    return str(folder)


def with_quick_ray_imports(python_path: str) -> str:
    """``python_path`` (a ``PYTHONPATH`` value) with ``quick_ray_imports()`` first, once; the rest kept in order."""
    folder = quick_ray_imports()
    rest = [p for p in python_path.split(os.pathsep) if p and p != folder]
    return os.pathsep.join([folder, *rest])


def ray_processes() -> list:
    """Live processes of this project's Ray clusters: their environment names our token file, or their command
    line our temp folder."""
    import psutil

    token, temp = str(auth_token_file()), str(ray_folders()["temp"])
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            ours = (
                temp in " ".join(proc.info["cmdline"] or [])
                or proc.environ().get("RAY_AUTH_TOKEN_PATH") == token
            )
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if ours:
            found.append(proc)
    return found
