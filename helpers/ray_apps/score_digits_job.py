"""A Ray job: score Parquet shards of digits with an ONNX file, write ``id, digit, node`` as Parquet.

Submitted with its ``.onnx`` file in the job's ``runtime_env`` ``working_dir``, which Ray unpacks on every
node as the current folder of the job's processes: an actor restarted on any node opens the file there.

    ray job submit --address http://127.0.0.1:8265 --working-dir job/ -- \\
        python score_digits_job.py --model mnist_mlp_pytorch.onnx --out /shared/scores /shared/shard*.parquet

The scoring pool is sized by Ray (``ActorPoolStrategy(min_size=1, max_size=--actors)``): a cluster with
fewer CPUs than ``--actors`` asks for runs fewer actors, slower, never forever. A cluster that cannot run
even one actor beside Ray Data's file-listing task (each takes one whole CPU; listing is Ray Data's
``ListFiles`` operator, a map task with Ray Data's default of 1 CPU) is refused before any work, saying
what it has and what the job needs.

Standalone on purpose (numpy, pyarrow, onnxruntime and ray only): the working dir holds this file and the
model, nothing else."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import ray

BATCH = 1024
ACTOR_CPUS = 1  # each scoring actor
LIST_CPUS = 1  # Ray Data's ListFiles task (ray.data._internal.planner.plan_list_files_op: the default 1 CPU)


def check_cluster(resources: dict) -> None:
    """Refuse, before any work, a cluster that cannot hold one actor and the listing task at once."""
    has, needs = resources.get("CPU", 0), ACTOR_CPUS + LIST_CPUS
    if has < needs:
        raise SystemExit(
            f"this cluster cannot run the job: it has {has:g} CPU(s), the job needs at least {needs} "
            f"at once ({ACTOR_CPUS} for a scoring actor, {LIST_CPUS} for Ray Data's file listing); "
            "start a node with more CPUs or add a worker node (ray start --num-cpus=...)"
        )


class Scorer:
    """One ONNX Runtime session per actor, opened from the file in the job's working dir."""

    def __init__(self, model: str):
        import onnxruntime as ort

        path = Path(model).resolve()  # relative to the working dir Ray unpacked on this node
        if not path.is_file():
            raise FileNotFoundError(f"expected the model {model} in {Path.cwd()}, found no file")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.node = ray.get_runtime_context().get_node_id()

    def __call__(self, batch):
        pixels = batch["pixels"].combine_chunks().flatten().to_numpy().reshape(-1, 1, 28, 28)
        logits = self.session.run(["logits"], {"image": pixels.astype(np.float32) / 255})[0]
        digit = logits.argmax(axis=1).astype(np.uint8)
        return {
            "id": batch["id"].to_numpy(),
            "digit": digit,
            "node": np.full(len(digit), self.node),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shards", nargs="+", help="Parquet files with id and pixels columns")
    parser.add_argument("--model", required=True, help="the .onnx file, in the working dir")
    parser.add_argument("--out", required=True, help="output folder (emptied first)")
    parser.add_argument("--actors", type=int, default=2, help="at most this many scoring actors")
    args = parser.parse_args()
    if args.actors < 1:
        parser.error(f"expected --actors of at least 1, got {args.actors}")

    ray.init()  # inside a job: joins the cluster that runs it
    resources = ray.cluster_resources()
    alive = sum(node["Alive"] for node in ray.nodes())
    print(
        f"cluster: {alive} nodes, {resources.get('CPU', 0):g} CPUs; scoring actors: 1 to {args.actors}"
    )
    check_cluster(resources)
    start = time.perf_counter()
    shutil.rmtree(args.out, ignore_errors=True)  # write_parquet adds files: a re-run starts empty
    (
        ray.data.read_parquet(args.shards, num_cpus=0.25)
        .repartition(target_num_rows_per_block=5_000)
        .map_batches(
            Scorer,
            fn_constructor_args=(args.model,),
            batch_size=BATCH,
            batch_format="pyarrow",
            num_cpus=1,
            compute=ray.data.ActorPoolStrategy(min_size=1, max_size=args.actors),
        )
        .write_parquet(args.out, ray_remote_args={"num_cpus": 0.25})
    )
    table = pq.read_table(args.out)
    nodes = dict(zip(*np.unique(table["node"].to_numpy(), return_counts=True)))
    print(f"{table.num_rows:,} rows scored in {time.perf_counter() - start:.1f} s into {args.out}")
    for node, count in sorted(nodes.items()):
        print(f"  node {node[:12]}: {count:,} rows")


if __name__ == "__main__":
    main()
