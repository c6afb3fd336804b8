"""Plumbing for notebook 09's *Serving* part (Ray Serve): what a request must hold, a bounded load test on
127.0.0.1, and the Ray processes a run started. The Serve calls themselves are written out in the notebook."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time

import numpy as np

MAX_BODY = 64 * 1024  # bytes; one digit's JSON is about 3 kB
EXPECTED = 'a JSON object {"pixels": 28 rows of 28 integers 0..255}'
LOOPBACK = "127.0.0.1"


class BadRequest(ValueError):
    """A request the service refuses: ``status`` (4xx) and a message naming what was expected and what came."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _too_large(size: int) -> BadRequest:
    return BadRequest(
        413, f"expected a body of at most {MAX_BODY:,} bytes ({EXPECTED}), got {size:,} bytes"
    )


async def read_body(request, limit: int = MAX_BODY) -> bytes:
    """A starlette request's body; ``BadRequest`` (413) as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared))
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(len(body))
    return body


def _describe(value) -> str:
    """What a ``pixels`` value is, in words: its type, or its rows' lengths."""
    if not isinstance(value, list):
        return f"a JSON {type(value).__name__}"
    lengths = sorted({len(row) if isinstance(row, list) else -1 for row in value})
    rows = ", ".join("not a list" if n < 0 else str(n) for n in lengths)
    return f"{len(value)} rows of {rows} values" if value else "an empty list"


def digit_from_json(body: bytes) -> np.ndarray:
    """A request body -> uint8 ``[1, 28, 28]``; ``BadRequest`` (400, 413 or 422) saying what was expected."""
    if len(body) > MAX_BODY:
        raise _too_large(len(body))
    try:
        data = json.loads(body)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadRequest(
            400, f"expected {EXPECTED}, got a body that is not JSON ({error})"
        ) from None
    if not isinstance(data, dict) or "pixels" not in data:
        got = (
            f"an object with keys {sorted(data)}"
            if isinstance(data, dict)
            else f"a JSON {type(data).__name__}"
        )
        raise BadRequest(422, f"expected {EXPECTED}, got {got}")
    pixels = data["pixels"]
    if not (
        isinstance(pixels, list)
        and len(pixels) == 28
        and all(isinstance(row, list) and len(row) == 28 for row in pixels)
    ):
        raise BadRequest(
            422,
            f"expected pixels of shape [28, 28] (28 rows of 28 integers 0..255), "
            f"got {_describe(pixels)}",
        )
    bad = next((v for row in pixels for v in row if type(v) is not int or not 0 <= v <= 255), None)
    if bad is not None:
        raise BadRequest(
            422,
            f"expected pixels as integers 0..255 (uint8, as MNIST stores them), got "
            f"{json.dumps(bad)} (a JSON {type(bad).__name__})",
        )
    return np.array(pixels, dtype=np.uint8).reshape(1, 28, 28)


def load_test(
    port: int, path: str, bodies: list[bytes], clients: int = 16, max_seconds: float = 60.0
) -> dict:
    """Each body POSTed once to 127.0.0.1 from ``clients`` threads, stopping itself at ``max_seconds``."""
    if not 1 <= clients <= 64 or not 0 < max_seconds <= 120:
        raise ValueError(
            f"expected 1..64 clients and 0..120 s, got {clients} clients and {max_seconds} s"
        )
    status, answer, latency = [None] * len(bodies), [None] * len(bodies), [None] * len(bodies)
    lock, todo = threading.Lock(), iter(range(len(bodies)))
    deadline = time.monotonic() + max_seconds

    def client():
        connection = http.client.HTTPConnection(LOOPBACK, port, timeout=max_seconds)
        try:
            while time.monotonic() < deadline:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                start = time.perf_counter()
                try:
                    connection.request(
                        "POST", path, bodies[i], {"Content-Type": "application/json"}
                    )
                    response = connection.getresponse()
                    text = response.read()
                except (
                    OSError,
                    http.client.HTTPException,
                ) as error:  # counted as unanswered, reported
                    answer[i] = f"{type(error).__name__}: {error}"
                    connection.close()
                    continue
                latency[i], status[i], answer[i] = (
                    time.perf_counter() - start,
                    response.status,
                    text,
                )
        finally:
            connection.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 5)
    return {
        "status": status,
        "answer": answer,
        "latency_s": latency,
        "seconds": time.perf_counter() - start,
    }


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for Serve's HTTP proxy)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def ray_children() -> list:
    """The Ray processes this process started (its descendants that ``ray_processes()`` recognises)."""
    import psutil

    from helpers.data.ray_digits import ray_processes

    mine = {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}
    return [p for p in ray_processes() if p.pid in mine]


def listening_sockets(processes: list) -> list[tuple[str, str, int]]:
    """Sorted (process, address, port) of the TCP sockets ``processes`` listen on (Python ones named by script)."""
    import psutil

    found = set()
    for p in processes:
        try:
            name, scripts = p.name(), [a for a in p.cmdline() if a.endswith(".py")]
            label = os.path.basename(scripts[0]) if name.startswith("python") and scripts else name
            found |= {
                (label, c.laddr.ip, c.laddr.port)
                for c in p.net_connections("tcp")
                if c.status == "LISTEN"
            }
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return sorted(found)


def wait_gone(processes: list, timeout_s: float = 60.0) -> list:
    """Wait up to ``timeout_s`` for ``processes`` (psutil) to exit; the ones still running (zombies excluded)."""
    import psutil

    deadline = time.monotonic() + timeout_s

    def running(p) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    while True:
        alive = [p for p in processes if running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def http_answer(port: int, timeout_s: float = 5.0) -> str:
    """What ``GET /`` without any token gets from 127.0.0.1:``port``: "HTTP <status>", or why there was none."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout_s)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        first_line = response.read(200).decode("utf-8", "replace").splitlines()[:1]
        return f"HTTP {response.status}" + "".join(f": {line[:40]}..." for line in first_line)
    except http.client.BadStatusLine:
        return "no HTTP/1.1 answer (a gRPC port)"
    except (OSError, http.client.HTTPException) as error:
        return f"no HTTP answer ({type(error).__name__})"
    finally:
        connection.close()
