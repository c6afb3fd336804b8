"""A Ray cluster as a user starts one (``ray start --head``, two ``ray start --address`` workers, token on):
notebook 09's own cells join it through ``RAY_ADDRESS``, a job ships the ``.onnx`` file in its ``runtime_env``
``working_dir``, a driver with another token is refused, and only the processes the test started are ended.
No speed is asserted. (Notebook 09 proves the faults; this file proves the user's cluster.)"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO_ROOT
from helpers.data.ray_digits import ray_processes, shard_table
from helpers.measure.ray_serve import wait_gone

# starts Ray clusters, alone: they need both cores
pytestmark = [pytest.mark.ray, pytest.mark.solo]

ROWS, FILES = 24_000, 4
JOB_TIMEOUT_S = 600  # a job that has not ended by then hangs: the test fails
REFUSAL_TIMEOUT_S = 240  # the refusal comes after ray.init() in the job, before any work
NOTEBOOK = REPO_ROOT / "notebooks" / "09_score_digits_on_ray.ipynb"
JOB_SCRIPT = REPO_ROOT / "helpers" / "ray_apps" / "score_digits_job.py"


def test_no_ray_process_left_behind_by_an_earlier_run():
    """`make test` runs notebook 09 before this file: its clusters must be gone."""
    left = wait_gone(ray_processes(), timeout_s=30)
    assert not left, f"Ray processes alive after 30 s: {left}"


@pytest.fixture
def digit_files(tmp_path):
    import pyarrow.parquet as pq

    from helpers.data.mnist import load_mnist

    digits = load_mnist().x_train[:ROWS]
    ids = np.random.default_rng(9).permutation(10**7)[:ROWS].astype(np.int64)
    paths = []
    for i, part in enumerate(np.array_split(np.arange(ROWS), FILES)):
        path = tmp_path / f"part{i}.parquet"
        pq.write_table(shard_table(digits[part], np.zeros(len(part), np.uint8), ids[part]), path)
        paths.append(str(path))
    return paths, ids, digits


def notebook_code(cell_id: str, definitions_only: bool = False) -> str:
    """The source of one code cell of notebook 09, by id; only its imports, defs and classes if asked."""
    import nbformat

    cell = next(c for c in nbformat.read(NOTEBOOK, 4).cells if c.get("id") == cell_id)
    if not definitions_only:
        return cell.source
    tree = ast.parse(cell.source)
    kept = (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return "\n\n".join(ast.unparse(node) for node in tree.body if isinstance(node, kept))


def plain_digits(model_path, digits) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return session.run(["logits"], {"image": digits[:, None].astype(np.float32) / 255})[0].argmax(1)


def run(command, env, timeout=300):
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(command[:4])}... failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_a_cluster_started_with_ray_start_runs_the_notebooks_code_and_a_submitted_job(
    digit_files, tmp_path, monkeypatch
):
    import pyarrow.parquet as pq

    from helpers.data.ray_digits import ray_folders
    from helpers.pipeline.artifacts import existing_artifact
    from helpers.ray_cluster import LocalRayCluster

    paths, ids, digits = digit_files
    model_path = existing_artifact("mnist_mlp_pytorch.onnx")
    plain = plain_digits(model_path, digits)[np.argsort(ids)]
    started = []
    cluster = LocalRayCluster(workers=2, cpus=1)
    try:
        cluster.start()
        started = cluster.processes()
        env = cluster.env
        print("\nstarted with:")
        for command in cluster.commands:
            print("  ray", " ".join(command[1:]))
        print("listening (process, address, port):")
        for name, ip, port in cluster.listening():
            print(f"  {name:28s} {ip}:{port}")
        assert not [
            (n, ip, p)
            for n, ip, p in cluster.listening()
            if p == cluster.dashboard_port and ip != "127.0.0.1"
        ], "the dashboard and job server listen beyond 127.0.0.1"

        # a driver with another token is refused
        stranger = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address={cluster.address!r})"],
            env={**env, "RAY_AUTH_TOKEN": "0" * 64, "RAY_AUTH_TOKEN_PATH": ""},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert stranger.returncode != 0, "a driver with a wrong token joined the cluster"
        assert "AuthenticationError" in stranger.stderr or "token" in stranger.stderr.lower(), (
            stranger.stderr[-2000:]
        )

        # notebook 09's cells, unchanged, joined through RAY_ADDRESS (with the cluster's token)
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "PYTHONPATH", "PATH"):
            monkeypatch.setenv(name, env[name])
        monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
        monkeypatch.setenv("RAY_ADDRESS", cluster.address)
        import numpy
        import onnxruntime
        import pyarrow
        import ray
        from ray._raylet import Config

        # Ray reads RAY_AUTH_MODE into its config at first import (an earlier test file may have
        # imported ray): re-read it, as Ray's own _enable_token_auth does
        Config.initialize("")

        namespace = {
            "__name__": "__main__",  # as in a notebook: Ray pickles the classes by value
            "np": numpy,
            "ort": onnxruntime,
            "pa": pyarrow,
            "pq": pq,
            "ray": ray,
            "os": os,
            "time": time,
            "shutil": shutil,
            "model_path": model_path,
            "BATCH": 1024,
            "folders": ray_folders(),
            "paths": paths,
            "out_dir": tmp_path / "notebook",
        }
        exec(notebook_code("nb09-06", definitions_only=True), namespace)  # make_session, predict...
        exec(notebook_code("nb09-08"), namespace)  # Predictor, scores, score_on_ray
        jobs_before = _drivers(cluster)
        exec(notebook_code("nb09-10"), namespace)  # ray.init() with RAY_ADDRESS, the run, shutdown
        table = namespace["scored_table"]
        assert np.array_equal(table["id"].to_numpy(), np.sort(ids)), (
            "notebook code: ids lost or repeated"
        )
        assert np.array_equal(table["digit"].to_numpy(), plain), "notebook code: digits differ"
        assert _drivers(cluster) == jobs_before + 1, (
            "the notebook's ray.init() did not join the cluster"
        )
        print(
            f"notebook 09's cells through RAY_ADDRESS={cluster.address}: {len(ids):,} ids once, digits as plain"
        )
        monkeypatch.delenv("RAY_ADDRESS")

        # a job: the script and the .onnx file in its runtime_env working_dir
        out = tmp_path / "job_scores"
        submission = submit_job(cluster, job_folder(tmp_path, model_path), out, paths)
        status_while_running, done = "", threading.Event()

        def watch():  # `ray status` once the job's actors hold CPUs
            nonlocal status_while_running
            while not done.is_set():
                text = cluster.status()
                if "Pending" in text and "0.0/3.0 CPU" not in text:
                    status_while_running = text
                    return
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        logs = follow_job(cluster, submission, JOB_TIMEOUT_S)
        done.set()
        watcher.join(timeout=60)
        state = job_state(cluster, submission)
        print("ray status while the job ran:\n" + status_while_running)
        own = [line for line in logs.splitlines() if "logging_progress" not in line]
        print("the job's logs (Ray Data's progress lines left out):\n" + "\n".join(own[-20:]))
        assert "succeeded" in state.lower(), state
        assert status_while_running, "ray status never showed the job's CPUs in use"
        scored = scored_ids_once(out, ids, plain, "job")
        print(
            f"the job: {scored.num_rows:,} ids, each once, digits as plain ONNX Runtime; nodes: {len(set(scored['node'].to_pylist()))}"
        )
    finally:
        import ray

        ray.shutdown()
        left = cluster.stop()
    assert not left, f"processes the cluster started still run: {left}"
    assert not wait_gone(started, 30), "processes outlived the cluster's stop"


def ray_cli() -> str:
    return str(Path(sys.executable).parent / "ray")


def job_folder(tmp_path, model_path) -> Path:
    """The job's runtime_env working_dir: the script and the .onnx file, nothing else."""
    job_dir = tmp_path / "job"
    job_dir.mkdir(exist_ok=True)
    shutil.copy(JOB_SCRIPT, job_dir)
    shutil.copy(model_path, job_dir)
    return job_dir


def submit_job(cluster, job_dir, out, paths, *options) -> str:
    """``ray job submit --no-wait`` of the job script with its defaults (and ``options``); its id."""
    submission = f"digits-{os.getpid()}-{time.monotonic_ns()}"
    command = [ray_cli(), "job", "submit", "--address", cluster.dashboard_url]
    command += ["--submission-id", submission, "--working-dir", str(job_dir), "--no-wait", "--"]
    command += ["python", JOB_SCRIPT.name, "--model", "mnist_mlp_pytorch.onnx", "--out", str(out)]
    run([*command, *options, *paths], cluster.env)
    return submission


def follow_job(cluster, submission, timeout_s) -> str:
    """``ray job logs --follow`` until the job ends; a job still running after ``timeout_s`` fails the test."""
    command = [ray_cli(), "job", "logs", "--address", cluster.dashboard_url, "--follow", submission]
    try:
        out = subprocess.run(
            command, env=cluster.env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as hang:
        tail = hang.stdout or b""  # bytes so far, even with text=True
        tail = (tail.decode(errors="replace") if isinstance(tail, bytes) else tail)[-3000:]
        status = cluster.status()
        pytest.fail(f"the job had not ended after {timeout_s} s:\n{tail}\nray status:\n{status}")
    return out.stdout + out.stderr


def job_state(cluster, submission) -> str:
    return run(
        [ray_cli(), "job", "status", "--address", cluster.dashboard_url, submission], cluster.env
    )


def scored_ids_once(out, ids, plain, what: str):
    import pyarrow.parquet as pq

    scored = pq.read_table(out).sort_by("id")
    assert np.array_equal(scored["id"].to_numpy(), np.sort(ids)), f"{what}: ids lost or repeated"
    assert np.array_equal(scored["digit"].to_numpy(), plain), (
        f"{what}: digits differ from plain ONNX Runtime"
    )
    return scored


def test_a_one_cpu_cluster_refuses_the_job_and_a_head_with_one_worker_runs_it_to_the_end(
    digit_files, tmp_path
):
    """The smallest cluster notebook 09 describes (a head and one worker, 1 CPU each) runs the job with its
    defaults (--actors 2); a head alone is refused before any work, in bounded time."""
    from helpers.pipeline.artifacts import existing_artifact
    from helpers.ray_cluster import LocalRayCluster

    paths, ids, digits = digit_files
    model_path = existing_artifact("mnist_mlp_pytorch.onnx")
    plain = plain_digits(model_path, digits)[np.argsort(ids)]
    job_dir, started = job_folder(tmp_path, model_path), []
    cluster = LocalRayCluster(workers=0, cpus=1)
    try:
        cluster.start()
        started = cluster.processes()
        out = tmp_path / "refused_scores"
        start = time.monotonic()
        submission = submit_job(cluster, job_dir, out, paths)
        logs = follow_job(cluster, submission, REFUSAL_TIMEOUT_S)
        refused_after = time.monotonic() - start
        state = job_state(cluster, submission)
        print(
            f"\na head alone (1 CPU), after {refused_after:.0f} s, {state.strip().splitlines()[-1]}"
        )
        said = [line for line in logs.splitlines() if line.startswith(("cluster:", "this cluster"))]
        print("\n".join(dict.fromkeys(said)))  # the job's own lines, once each
        assert "failed" in state.lower(), state
        assert (
            "this cluster cannot run the job: it has 1 CPU(s), the job needs at least 2" in logs
        ), logs[-3000:]
        assert not out.exists(), "the refused job wrote scores"

        cluster.add_worker()
        started = cluster.processes()
        out = tmp_path / "minimal_scores"
        start = time.monotonic()
        submission = submit_job(cluster, job_dir, out, paths)
        logs = follow_job(cluster, submission, JOB_TIMEOUT_S)
        seconds = time.monotonic() - start
        state = job_state(cluster, submission)
        said = [line for line in logs.splitlines() if line.startswith(("cluster:", "  node "))]
        said += [line for line in logs.splitlines() if " rows scored in " in line]
        print(
            f"a head and one worker (1 CPU each), the job's defaults, {seconds:.0f} s end to end:"
        )
        print("\n".join(dict.fromkeys(said)))
        assert "succeeded" in state.lower(), state
        scored = scored_ids_once(out, ids, plain, "minimal cluster")
        print(f"{scored.num_rows:,} ids, each once, digits as plain ONNX Runtime")
    finally:
        left = cluster.stop()
    assert not left, f"processes the cluster started still run: {left}"
    assert not wait_gone(started, 30), "processes outlived the cluster's stop"


def _drivers(cluster) -> int:
    """How many driver jobs (``ray.init`` connections) the cluster has seen."""
    from ray.job_submission import JobSubmissionClient

    token = Path(cluster.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
    client = JobSubmissionClient(
        cluster.dashboard_url, headers={"Authorization": f"Bearer {token}"}
    )
    return sum(1 for job in client.list_jobs() if str(job.type).upper().endswith("DRIVER"))
