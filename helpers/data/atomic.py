"""Files and folders that are complete or absent, never half-written, even after a crash or with two builders.

A file is written under a temporary name beside it, synced, then renamed onto its name (``atomic_path``). A
folder (an LLM build, the bare environment, the HTML copy) is built in ``.NAME.tmp``, renamed ``.NAME.new``
once complete, then swapped in (``NAME`` -> ``.NAME.old``, ``.NAME.new`` -> ``NAME``) under a lock on
``.NAME.lock``; the next holder of the lock finishes an interrupted swap and deletes the leftovers. A folder
that is already built is returned without taking the lock, so a class may share a read-only cache.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Callable, Iterator


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; rename it onto ``dest`` only if the block succeeds."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.part")
    # usual permissions (umask applies)
    os.close(os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp_path
        with open(tmp_path, "rb") as written:
            os.fsync(written.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp_path, dest)
    finally:
        tmp_path.unlink(missing_ok=True)


def _staging(dest: Path) -> tuple[Path, Path, Path]:
    return tuple(dest.with_name(f".{dest.name}.{state}") for state in ("tmp", "new", "old"))


def _remove(folder: Path) -> None:
    if folder.is_dir():
        shutil.rmtree(folder)


def _swap_in(new: Path, dest: Path, old: Path) -> None:
    _remove(old)
    if dest.exists():
        os.rename(dest, old)
    os.rename(new, dest)
    _remove(old)


@contextlib.contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """Hold the lock on ``.NAME.lock`` (deleted on release), after tidying a killed builder's leftovers."""
    from filelock import FileLock  # imported here: most users of this module never build a folder

    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = dest.with_name(f".{dest.name}.lock")
    with FileLock(lock):
        try:
            tmp, new, old = _staging(dest)
            _remove(tmp)
            if new.is_dir():  # complete, but its swap was interrupted: finish it
                _swap_in(new, dest, old)
            _remove(old)
            for legacy in dest.parent.glob(f".{dest.name}.old-*"):  # .NAME.old-<pid>: leftovers too
                _remove(legacy)
            yield
        finally:  # deleted while still held: a waiter that locks the deleted file sees that and locks anew
            lock.unlink(missing_ok=True)


@contextlib.contextmanager
def _staged(dest: Path, ready: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    tmp, new, old = _staging(dest)
    tmp.mkdir()
    try:
        yield tmp
        if ready is not None and not ready(tmp):
            raise RuntimeError(
                f"building {dest} finished without what {getattr(ready, '__name__', ready)} needs"
            )
    except BaseException:
        _remove(tmp)
        raise
    os.rename(tmp, new)
    _swap_in(new, dest, old)


@contextlib.contextmanager
def atomic_dir(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``dest``; it replaces ``dest`` whole only if the block succeeds."""
    dest = Path(dest)
    with _locked(dest), _staged(dest) as tmp:
        yield tmp


def cached_dir(
    dest: str | os.PathLike,
    build: Callable[[Path], None],
    ready: Callable[[Path], bool] = Path.is_dir,
) -> Path:
    """``dest``, built once with ``build(empty_folder)`` unless ``ready(dest)``; a second process waits for it."""
    dest = Path(dest)
    if ready(dest) and not any(
        p.exists() for p in (*_staging(dest), dest.with_name(f".{dest.name}.lock"))
    ):
        return dest  # the usual case, which needs no write access (a class may share a read-only cache)
    with _locked(dest):
        if not ready(dest):
            with _staged(dest, ready) as tmp:
                build(tmp)
    return dest
