"""Plumbing for notebook 09's *Serving* part (Ray Serve): a bounded load test on 127.0.0.1, a free port,
and the Ray processes a run started and their sockets. The application is ``helpers.ray_apps.digits_service``
(what a request must hold is its pydantic model); the Serve calls are written out in the notebook."""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time

LOOPBACK = "127.0.0.1"


def load_test(
    port: int,
    path: str,
    bodies: list[bytes],
    clients: int = 16,
    max_seconds: float = 60.0,
    progress: dict | None = None,
) -> dict:
    """Each body POSTed once to 127.0.0.1 from ``clients`` threads, stopping itself at ``max_seconds``.

    ``progress["answered"]``, when given, counts the answers so far (another thread may watch it)."""
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
                # counted as unanswered, reported
                except (
                    OSError,
                    http.client.HTTPException,
                ) as error:
                    answer[i] = f"{type(error).__name__}: {error}"
                    connection.close()
                    continue
                latency[i], status[i], answer[i] = (
                    time.perf_counter() - start,
                    response.status,
                    text,
                )
                if progress is not None:
                    with lock:
                        progress["answered"] = progress.get("answered", 0) + 1
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
