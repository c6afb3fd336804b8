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
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers.atomic import atomic_path
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
    models = (json.loads(listed.read_text()) if listed.is_file()
              else [{"label": label, "file": name} for label, name in FP32_MODELS])
    return [m for m in models if (artifacts_dir() / m["file"]).is_file()]  # files deleted since are left out


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


def find_chromium() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are on PATH (``make browser`` installs them from Debian), else None."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def drive_page(url: str, drawing_rgba, screenshot: Path, timing_blocks: int = 20) -> dict:
    """Open the page in headless Chromium, paint ``drawing_rgba`` (uint8 [H, W, 4]) onto its canvas as if drawn
    there, and return what the page computed: its 28x28 ``input``, ``probabilities``, ``prediction``, the canvas'
    own PNG export (``png`` bytes) and its batch-1 ``latency_us`` (median of block means); saves a screenshot.

    Plumbing for notebook 04 (selenium drives the browser); ``find_chromium()`` must not be None.
    """
    import base64
    import time

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = find_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--window-size=900,640"):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        browser.set_script_timeout(120)
        browser.get(url)
        deadline = time.monotonic() + 60
        while not browser.execute_script("return window.digitPage && (window.digitPage.ready || window.digitPage.error)"):
            if time.monotonic() > deadline:
                raise TimeoutError("the page did not open its first model within 60 s")
            time.sleep(0.2)
        error = browser.execute_script("return window.digitPage.error")
        if error:
            raise RuntimeError(f"the page says: {error}")
        height, width = drawing_rgba.shape[:2]
        shown = browser.execute_async_script("""
            const [pixels, width, height, blocks, done] = arguments;
            const pad = document.getElementById('pad'), context = pad.getContext('2d');
            context.clearRect(0, 0, pad.width, pad.height);
            context.putImageData(new ImageData(new Uint8ClampedArray(pixels), width, height), 0, 0);
            window.digitPage.classifyNow().then(async () => {
              const s = window.digitPage;
              const result = {input: s.input, probabilities: s.probabilities, prediction: s.prediction,
                              model: s.model, png: pad.toDataURL('image/png')};
              result.latency_us = await s.timeRuns(blocks, 20);
              done(result);
            });
        """, drawing_rgba.ravel().tolist(), width, height, timing_blocks)
        with atomic_path(screenshot) as tmp:
            tmp.write_bytes(browser.get_screenshot_as_png())
        shown["png"] = base64.b64decode(shown["png"].split(",", 1)[1])
        return shown
    finally:
        browser.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.webserver",
                                     description="Serve the digit-drawing page (notebook 04) on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8004, help="port to listen on (default 8004; 0 = any free port)")
    args = parser.parse_args(argv)
    try:
        server = PageServer(port=args.port).start()
    except (OSError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
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
