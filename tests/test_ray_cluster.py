"""Notebook 09's promises: a job outlives a killed worker node (every row once, plain ONNX Runtime's digits), a
driver without the cluster's token is refused, no Ray process outlives its cluster. No speed is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from helpers.data.ray_digits import ray_processes, shard_table
from helpers.measure.ray_serve import wait_gone

ROWS, FILES, BATCH, KILL_AFTER = 24_000, 6, 500, 6


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


def test_a_node_killed_mid_job_loses_no_row_and_a_stranger_is_refused(
    ray_env, digit_files, tmp_path
):
    import onnxruntime as ort
    import pyarrow.parquet as pq
    import ray
    from ray.cluster_utils import Cluster

    from helpers.pipeline.artifacts import built_artifact

    paths, ids, digits = digit_files
    model_bytes = built_artifact("mnist_mlp_pytorch.onnx").read_bytes()
    marker_dir = tmp_path / "marks"
    marker_dir.mkdir()
    node_args = dict(
        num_cpus=1,
        object_store_memory=150 * 2**20,
        include_dashboard=False,
        object_spilling_directory=str(ray_env["spill"]),
    )

    class Scorer:  # defined here so that Ray pickles it by value
        def __init__(self, model, head, folder):
            import onnxruntime as ort

            self.session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
            self.node = ray.get_runtime_context().get_node_id()
            self.head, self.folder = head, folder

        def __call__(self, batch):
            pixels = batch["pixels"].combine_chunks().flatten().to_numpy().reshape(-1, 1, 28, 28)
            digit = self.session.run(["logits"], {"image": pixels.astype(np.float32) / 255})[
                0
            ].argmax(1)
            if self.node != self.head:  # only worker nodes count batches and may be killed
                import uuid

                (self.folder / f"batch-{uuid.uuid4().hex}").touch()
                if len(list(self.folder.glob("batch-*"))) >= KILL_AFTER:
                    try:
                        os.close(os.open(self.folder / "fired", os.O_CREAT | os.O_EXCL))
                    except FileExistsError:
                        pass
                    else:
                        (self.folder / "node.tmp").write_text(self.node)
                        os.replace(self.folder / "node.tmp", self.folder / "node")
                        threading.Event().wait()  # until this node is killed
            return {
                "id": batch["id"].to_numpy(),
                "digit": digit,
                "node": np.full(len(digit), self.node),
            }

    removed, written = [], []

    def job():  # in a thread: the main thread kills the node (Ray starts nodes from the main thread only)
        context = ray.data.DataContext.get_current()
        context.max_errored_blocks, context.wait_for_min_actors_s = 0, 600
        (
            ray.data.read_parquet(paths, num_cpus=0.25)
            .repartition(target_num_rows_per_block=2_000)
            .map_batches(
                Scorer,
                fn_constructor_args=(model_bytes, cluster.head_node.node_id, marker_dir),
                batch_size=BATCH,
                batch_format="pyarrow",
                num_cpus=1,
                compute=ray.data.ActorPoolStrategy(size=2, max_tasks_in_flight_per_actor=1),
                max_restarts=3,
                max_task_retries=-1,
            )
            .write_parquet(str(tmp_path / "out"), ray_remote_args={"num_cpus": 0.25})
        )
        written.append(True)

    cluster = Cluster(initialize_head=True, head_node_args=node_args)
    try:
        for _ in range(2):
            cluster.add_node(**node_args)
        ray.init(address=cluster.address)
        assert sum(n["Alive"] for n in ray.nodes()) == 3

        stranger = subprocess.run(  # a driver with another token cannot join
            [sys.executable, "-c", f"import ray; ray.init(address={cluster.address!r})"],
            env={**os.environ, "RAY_AUTH_TOKEN": "0" * 64, "RAY_AUTH_TOKEN_PATH": ""},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert stranger.returncode != 0, "a driver with a wrong token joined the cluster"
        assert "AuthenticationError" in stranger.stderr or "token" in stranger.stderr.lower(), (
            stranger.stderr[-2000:]
        )

        worker = threading.Thread(target=job)
        worker.start()
        marker = marker_dir / "node"
        while not marker.exists() and worker.is_alive():  # the marker, not a timer, decides
            time.sleep(0.05)
        if marker.exists():
            node = next(n for n in cluster.worker_nodes if n.node_id == marker.read_text())
            cluster.remove_node(node, allow_graceful=False)
            removed.append(node.node_id)
            cluster.add_node(**node_args)  # a replacement, as an autoscaler would start
        worker.join(timeout=600)
        assert written, "the job did not finish (its error is printed above)"
    finally:
        ray.shutdown()
        cluster.shutdown()

    assert removed, "the marker was never written: no worker node scored a batch"
    table = pq.read_table(tmp_path / "out").sort_by("id")
    got_ids = table["id"].to_numpy()
    assert len(got_ids) == ROWS, f"{len(got_ids)} rows written for {ROWS}"
    assert np.array_equal(got_ids, np.sort(ids)), "ids lost or repeated"
    plain = (
        ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        .run(["logits"], {"image": digits[:, None].astype(np.float32) / 255})[0]
        .argmax(1)
    )
    assert np.array_equal(table["digit"].to_numpy(), plain[np.argsort(ids)])
    nodes = set(
        table["node"].to_pylist()
    )  # the batch that wrote the marker never returned: another node
    assert removed[0] not in nodes or len(nodes) >= 2, (
        "rows credited to the killed node only"
    )  # redid it
    left = wait_gone(ray_processes(), timeout_s=60)
    assert not left, f"Ray processes alive 60 s after shutdown: {left}"
