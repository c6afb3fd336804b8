"""A small local web server for the digit-drawing page of notebook 04 (standard library only).

It serves, on 127.0.0.1 only and on a free port:

* ``/`` and ``/<file>``: the page itself, from the repository's ``web/`` folder;
* ``/ort/<file>``: ONNX Runtime Web from ``node_modules/onnxruntime-web/dist/`` (installed by ``npm ci``;
  no CDN), with ``.wasm`` as ``application/wasm`` (browsers refuse to compile WebAssembly served otherwise);
* ``/models.json`` and ``/models/<file>``: the model picker's list and the ``.onnx`` files it names, from
  ``artifacts/`` (only the files in the list are served).

Notebook 04 starts and stops it (``with PageServer(models) as server: ...``). To open the page outside Jupyter::

    python -m helpers.webserver            # prints the URL; Ctrl+C stops it
"""
from __future__ import annotations

import argparse
import json
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers.paths import REPO_ROOT, artifacts_dir

WEB_DIR = REPO_ROOT / "web"
ORT_DIST = REPO_ROOT / "node_modules" / "onnxruntime-web" / "dist"
MODEL_LIST = "web_models.json"  # written by notebook 04 into artifacts/: the files that ran in ONNX Runtime Web
FP32_MODELS = [("PyTorch MLP", "mnist_mlp_pytorch.onnx"), ("Keras MLP", "mnist_mlp_keras.onnx"),
               ("PyTorch CNN", "mnist_cnn_pytorch.onnx")]
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".json": "application/json", ".wasm": "application/wasm", ".onnx": "application/octet-stream",
         ".png": "image/png", ".map": "application/json"}


def default_models() -> list[dict]:
    """The picker's list: ``artifacts/web_models.json`` if notebook 04 wrote it, else the fp32 files present."""
    listed = artifacts_dir() / MODEL_LIST
    if listed.is_file():
        return json.loads(listed.read_text())
    return [{"label": label, "file": name} for label, name in FP32_MODELS if (artifacts_dir() / name).is_file()]


class _Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args, models: list[dict], **kwargs):
        self.models = models
        super().__init__(*args, directory=str(WEB_DIR), **kwargs)

    def log_message(self, format, *args):  # quiet: a notebook cell is not a server log
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = unquote(urlsplit(self.path).path)
        if path in ("/", "/index.html"):
            path = "/index.html"
        if path == "/models.json":
            body = json.dumps([{"label": m["label"], "url": f"models/{m['file']}"} for m in self.models])
            return self._send(200, body.encode(), TYPES[".json"])
        if path.startswith("/models/"):
            wanted = path[len("/models/"):]
            if wanted not in {m["file"] for m in self.models}:
                return self._send(404, f"no model {wanted} here".encode(), "text/plain")
            return self._file(artifacts_dir() / wanted)
        if path.startswith("/ort/"):
            return self._file(ORT_DIST / path[len("/ort/"):], root=ORT_DIST)
        return self._file(WEB_DIR / path.lstrip("/"), root=WEB_DIR)

    def _file(self, path: Path, root: Path | None = None) -> None:
        path = path.resolve()
        if root is not None and root.resolve() not in path.parents:
            return self._send(404, b"not found", "text/plain")
        if not path.is_file():
            hint = " (run `npm ci` in the repository)" if root == ORT_DIST else ""
            return self._send(404, f"not found: {path.name}{hint}".encode(), "text/plain")
        self._send(200, path.read_bytes(), TYPES.get(path.suffix, "application/octet-stream"))


class PageServer:
    """The page on ``http://127.0.0.1:<free port>/``, served from a background thread until ``stop()``."""

    def __init__(self, models: list[dict] | None = None, port: int = 0):
        self.models = default_models() if models is None else models
        for model in self.models:
            if not (artifacts_dir() / model["file"]).is_file():
                raise FileNotFoundError(f"model {model['label']!r}: no file artifacts/{model['file']}")
        self.port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> "PageServer":
        if not (ORT_DIST / "ort.wasm.min.mjs").is_file():
            raise FileNotFoundError(f"ONNX Runtime Web is not installed ({ORT_DIST} is missing): run `npm ci` "
                                    f"in {REPO_ROOT} (make setup does)")
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), partial(_Handler, models=self.models))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="page-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self) -> "PageServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.webserver",
                                     description="Serve the digit-drawing page (notebook 04) on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8004, help="port to listen on (default 8004; 0 = any free port)")
    args = parser.parse_args(argv)
    server = PageServer(port=args.port).start()
    print(f"serving the page at {server.url} with {len(server.models)} models "
          f"({', '.join(m['label'] for m in server.models) or 'none: run notebooks 01, 02 and 05 first'}); "
          f"Ctrl+C stops", flush=True)
    try:
        server._thread.join()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
