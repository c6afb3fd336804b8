"""A Ray job: score Parquet shards of digits with an ONNX file, write ``id, digit, node`` as Parquet.

Submitted with its ``.onnx`` file in the job's ``runtime_env`` ``working_dir``, which Ray unpacks on every
node as the current folder of the job's processes: an actor restarted on any node opens the file there.

    ray job submit --address http://127.0.0.1:8265 --working-dir job/ -- \\
        python score_digits_job.py --model mnist_mlp_pytorch.onnx --out /shared/scores /shared/shard*.parquet

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
    parser.add_argument("--actors", type=int, default=2)
    args = parser.parse_args()

    ray.init()  # inside a job: joins the cluster that runs it
    print(f"cluster: {len(ray.nodes())} nodes, {ray.cluster_resources().get('CPU', 0):.0f} CPUs")
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
            compute=ray.data.ActorPoolStrategy(size=args.actors),
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
