"""A Ray cluster started the way a user starts one: ``ray start --head`` and ``ray start --address=...``
workers, each a separate ``ray start --block`` process of this one, on this machine, with their own ports, a
temp folder under the project's cache, token authentication on and metrics off. Ended by signalling only the
processes it started (never ``ray stop``, which ends every Ray process of the user on the machine).

Used by ``tests/test_ray_cluster.py``; notebook 09's *Going deeper* shows the same commands."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers.data.paths import cache_dir
from helpers.data.ray_digits import auth_token_file, with_quick_ray_imports
from helpers.measure.ray_serve import free_port, listening_sockets, wait_gone

START_TIMEOUT_S = 180.0  # three nodes start in 35-40 s on an idle 2-core machine


def cluster_env(token_file: Path | None = None) -> dict[str, str]:
    """The environment of every process that talks to the cluster: nodes, drivers and the ``ray`` CLI.

    Token authentication on (``ray start`` turns it on only when told), metrics collection off (no
    Prometheus port), the venv's ``bin`` first on ``PATH`` (a job's ``python`` is the head's), the
    ``rfc3987_syntax`` shim prepended to ``PYTHONPATH``; no ``RAY_ADDRESS`` inherited."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN_PATH"] = str(token_file or auth_token_file())
    env["RAY_enable_metrics_collection"] = "0"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = with_quick_ray_imports(env.get("PYTHONPATH", ""))
    return env


def _ray_cli() -> str:
    return str(Path(sys.executable).parent / "ray")


@dataclass
class LocalRayCluster:
    """A head and ``workers`` nodes of ``cpus`` CPUs each, started with ``ray start --block``."""

    workers: int = 2
    cpus: int = 1
    memory_mb: int = 1500
    object_store_mb: int = 150
    temp_dir: Path = field(default_factory=lambda: cache_dir("ray", "cluster"))
    gcs_port: int = 0
    dashboard_port: int = 0
    commands: list[list[str]] = field(default_factory=list)
    nodes: list[subprocess.Popen] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=cluster_env)

    @property
    def address(self) -> str:
        """What ``RAY_ADDRESS`` is set to for a driver, and ``ray start --address`` for a worker."""
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        """The head's dashboard and job server (bound to 127.0.0.1)."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def _node_args(self) -> list[str]:
        return [
            f"--num-cpus={self.cpus}",
            f"--memory={self.memory_mb * 2**20}",
            f"--object-store-memory={self.object_store_mb * 2**20}",
            f"--temp-dir={self.temp_dir}",
            f"--dashboard-agent-listen-port={free_port()}",  # fixed 52365 otherwise: nodes collide
            "--disable-usage-stats",
            "--block",
        ]

    def start(self) -> LocalRayCluster:
        if len(str(self.temp_dir)) > 50:
            raise ValueError(f"Ray's temp folder {self.temp_dir} is too long for its socket paths")
        shutil.rmtree(self.temp_dir, ignore_errors=True)  # a fresh session folder per cluster
        self.temp_dir.mkdir(parents=True)
        self.gcs_port, self.dashboard_port = free_port(), free_port()
        head = [
            _ray_cli(),
            "start",
            "--head",
            f"--port={self.gcs_port}",
            f"--ray-client-server-port={free_port()}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            *self._node_args(),
        ]
        self._launch(head, "head")
        self._wait_for_nodes(1)
        for _ in range(self.workers):  # one at a time: node start-ups compete for 2 cores
            self.add_worker()
        return self

    def add_worker(self) -> None:
        """One more worker node (``ray start --address=...``), waited for until ``ray status`` lists it."""
        name = f"worker{len(self.nodes) - 1}"
        self._launch([_ray_cli(), "start", f"--address={self.address}", *self._node_args()], name)
        self._wait_for_nodes(len(self.nodes))

    def _launch(self, command: list[str], name: str) -> None:
        log = open(self.temp_dir / f"ray_start_{name}.log", "wb")  # noqa: SIM115 (the child keeps it)
        self.commands.append(command)
        self.nodes.append(
            subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        )
        log.close()

    def status(self, timeout_s: float = 60.0) -> str:
        """``ray status`` of this cluster (nodes, CPUs in use, pending demands)."""
        out = subprocess.run(
            [_ray_cli(), "status", f"--address={self.address}"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if out.returncode != 0:
            raise RuntimeError(f"ray status failed ({out.returncode}): {out.stderr[-2000:]}")
        return out.stdout

    def _wait_for_nodes(self, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            dead = [c for c, p in zip(self.commands, self.nodes) if p.poll() is not None]
            if dead:
                logs = "\n".join(
                    p.read_text()[-1500:] for p in sorted(self.temp_dir.glob("ray_start_*.log"))
                )
                raise RuntimeError(f"`{' '.join(dead[0][:3])} ...` exited:\n{logs}")
            try:
                text = self.status(timeout_s=30)
            except (RuntimeError, subprocess.TimeoutExpired):
                text = ""
            active = text.split("Active:", 1)[-1].split("Pending:", 1)[0] if text else ""
            if active.count("node_") >= n:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} nodes not up after {START_TIMEOUT_S:.0f} s:\n{text}")
            time.sleep(1)

    def processes(self) -> list:
        """The ``ray start`` processes and every process they started (raylets, GCS, workers...)."""
        import psutil

        found = []
        for popen in self.nodes:
            try:
                parent = psutil.Process(popen.pid)
                found += [parent, *parent.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return found

    def listening(self) -> list[tuple[str, str, int]]:
        """Sorted (process, address, port) of the TCP sockets the cluster's processes listen on."""
        return listening_sockets(self.processes())

    def stop(self, timeout_s: float = 30.0) -> list:
        """SIGTERM to everything but the GCS, then to the GCS and the ``ray start`` processes, SIGKILL to
        whatever still runs after ``timeout_s``; the processes still alive after that (none expected)."""
        import psutil

        everything = self.processes()
        starters = {popen.pid for popen in self.nodes}
        gcs = [p for p in everything if _name(p) == "gcs_server"]
        first = [p for p in everything if p.pid not in starters and p not in gcs]
        gone = contextlib.suppress(psutil.NoSuchProcess)  # it may end by itself meanwhile
        for group in (first, gcs + [p for p in everything if p.pid in starters]):
            for p in group:
                with gone:
                    p.send_signal(signal.SIGTERM)
            for p in wait_gone(group, timeout_s):
                with gone:
                    p.kill()
        for popen in self.nodes:
            try:
                popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                popen.kill()
        return wait_gone(everything, timeout_s)

    def __enter__(self) -> LocalRayCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def _name(process) -> str:
    import psutil

    try:
        return process.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # gone: not a GCS to stop
        return ""
