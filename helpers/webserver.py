"""Serves notebook 04's page, ONNX Runtime Web and the listed models on 127.0.0.1: ``python -m helpers.webserver``.

Everything the page loads comes from this repository (``web/``, ``node_modules/onnxruntime-web/dist``, the
model files of ``artifacts/``), never from a CDN. ONNX Runtime Web (WebAssembly) is the one package that
serves both Node.js and the browser, and ``npm ci`` installs it without downloading a native binary
(``onnxruntime-node``'s install script fetches one from a host a class machine may not reach). The server
listens on 127.0.0.1 only; ``--port 0`` picks a free port.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers.data.paths import REPO_ROOT, artifacts_dir

WEB_DIR = REPO_ROOT / "web"
ORT_DIST = REPO_ROOT / "node_modules" / "onnxruntime-web" / "dist"
FP32_MODELS = [
    ("PyTorch MLP", "mnist_mlp_pytorch.onnx"),
    ("Keras MLP", "mnist_mlp_keras.onnx"),
    ("PyTorch CNN", "mnist_cnn_pytorch.onnx"),
]
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
}


def default_models() -> list[dict]:
    """The picker's list: ``artifacts/web_models.json`` if notebook 04 wrote it, else the fp32 files present."""
    # written by notebook 04: the files that ran in ONNX Runtime Web
    listed = artifacts_dir() / "web_models.json"
    models = (
        json.loads(listed.read_text())
        if listed.is_file()
        else [{"label": label, "file": name} for label, name in FP32_MODELS]
    )
    # files deleted since are left out
    return [m for m in models if (artifacts_dir() / m["file"]).is_file()]


class _Handler(BaseHTTPRequestHandler):
    log_message = staticmethod(lambda *args: None)  # quiet: a notebook cell is not a server log

    def _send(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path, models = unquote(urlsplit(self.path).path), self.server.page.models
        if path == "/models.json":
            body = json.dumps([{"label": m["label"], "url": f"models/{m['file']}"} for m in models])
            return self._send(200, body.encode(), TYPES[".json"])
        if path.startswith("/models/"):
            wanted = path[len("/models/") :]
            if wanted not in {m["file"] for m in models}:
                return self._send(404, f"no model {wanted} here".encode())
            return self._file(artifacts_dir() / wanted, artifacts_dir())
        if path.startswith("/ort/"):
            return self._file(ORT_DIST / path[len("/ort/") :], ORT_DIST)
        return self._file(WEB_DIR / (path.lstrip("/") or "index.html"), WEB_DIR)

    def _file(self, path: Path, root: Path) -> None:
        path = path.resolve()
        if root.resolve() not in path.parents or not path.is_file():
            hint = " (run `npm ci` in the repository)" if root == ORT_DIST else ""
            return self._send(404, f"not found: {path.name}{hint}".encode())
        self._send(200, path.read_bytes(), TYPES.get(path.suffix, "application/octet-stream"))


class PageServer:
    """The page from a daemon thread until ``stop()``; ``models`` None: ``default_models()`` read per request."""

    def __init__(self, models: list[dict] | None = None, port: int = 0):
        for model in models or []:
            if not (artifacts_dir() / model["file"]).is_file():
                raise FileNotFoundError(
                    f"model {model['label']!r}: no file artifacts/{model['file']}"
                )
        self._models, self.port, self._server = models, port, None

    @property
    def models(self) -> list[dict]:
        return default_models() if self._models is None else self._models

    def start(self) -> "PageServer":
        if not (ORT_DIST / "ort.wasm.min.mjs").is_file():
            raise FileNotFoundError(
                f"ONNX Runtime Web is not installed ({ORT_DIST} is missing): run `npm ci` "
                f"in {REPO_ROOT} (make setup does)"
            )
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        self._server.page = self  # what a request's handler reads as self.server.page
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.thread = threading.Thread(
            target=self._server.serve_forever, name="page-server", daemon=True
        )
        self.thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "PageServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.webserver",
        description="Serve the digit-drawing page (notebook 04) on 127.0.0.1.",
    )
    parser.add_argument(
        "--port", type=int, default=8004, help="port to listen on (default 8004; 0 = any free port)"
    )
    try:
        server = PageServer(port=parser.parse_args(argv).port).start()
    except OSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    labels = [m["label"] for m in server.models]
    print(
        f"serving the page at {server.url} with {len(labels)} models "
        f"({', '.join(labels) or 'none: run notebooks 01, 02 and 05 first'}); Ctrl+C stops",
        flush=True,
    )
    try:
        server.thread.join()
    except KeyboardInterrupt:
        print("stopped")
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
