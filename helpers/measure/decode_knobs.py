"""Decode knobs measured side by side (notebook 08): one child process per setting, timed in interleaved rounds.

Each setting (a genai model folder and the overlay of its ``genai_config.json``) runs in its own process, so
its thread pool, spinning included, is its own, and the process's CPU time is that setting's alone. The parent
asks one process at a time to generate (interleaved rounds, the order rotated every round), or several at
once to measure contention. A run reports its time to first token, its decode rate and the process CPU
seconds per generated token, read after a short pause so that threads still spinning after the run count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# after each run: spinning threads' tail is counted, and the next process is not disturbed
PAUSE_S = 0.1


def matmulnbits_attributes(model_dir: str | os.PathLike) -> Counter:
    """How many ``MatMulNBits`` nodes the folder's ``model.onnx`` has per ``(block_size, accuracy_level)``."""
    import onnx

    graph = onnx.load(Path(model_dir) / "model.onnx", load_external_data=False).graph
    found = Counter()
    for node in graph.node:
        if node.op_type == "MatMulNBits":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            found[(attrs.get("block_size"), attrs.get("accuracy_level", 0))] += 1
    return found


def check_build(model_dir: str | os.PathLike, block_size: int, accuracy_level: int) -> int:
    """The number of ``MatMulNBits`` nodes, all of them built as requested, else ``ValueError`` saying what came."""
    found = matmulnbits_attributes(model_dir)
    if not found or set(found) != {(block_size, accuracy_level)}:
        raise ValueError(
            f"{Path(model_dir).name}: expected every MatMulNBits with block_size={block_size} and "
            f"accuracy_level={accuracy_level}, got {dict(found) or 'no MatMulNBits node'} "
            "((block_size, accuracy_level): nodes); the builder ignored an option"
        )
    return sum(found.values())


class Generator:
    """A child process holding one model loaded with one overlay; it generates when asked."""

    def __init__(self, name: str, model_dir: str | os.PathLike, overlay: dict):
        self.name, self.model_dir, self.overlay = name, Path(model_dir), overlay
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "helpers.measure.decode_knobs",
                str(model_dir),
                json.dumps(overlay),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self._read()  # {"ready": ...} once the model is loaded

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=30)
            raise RuntimeError(
                f"generator {self.name!r} ({self.model_dir.name}, {self.overlay}) exited with code "
                f"{self.process.returncode}:\n{self.process.stderr.read()[-2000:]}"
            )
        return json.loads(line)

    def send(self, **command) -> None:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def ask(self, **command) -> dict:
        self.send(**command)
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()


def start(settings: dict[str, tuple], log=print) -> dict[str, Generator]:
    """One :class:`Generator` per ``{name: (model_dir, overlay)}``, started one after the other."""
    generators = {}
    log(f"starting {len(settings)} processes, one per setting: {', '.join(settings)}")
    try:
        for name, (model_dir, overlay) in settings.items():
            generators[name] = Generator(name, model_dir, overlay)
    except BaseException:
        stop(generators)
        raise
    return generators


def stop(generators: dict[str, Generator]) -> None:
    for generator in generators.values():
        generator.close()


def interleaved(
    generators: dict[str, Generator],
    prompt_ids,
    new_tokens: int,
    rounds: int,
    warmup: int = 1,
    bar=None,
) -> dict[str, list[dict]]:
    """Every generator runs once per round, one at a time, the order rotated each round; warm-up rounds dropped."""
    names, runs = list(generators), {name: [] for name in generators}
    ids = [int(i) for i in prompt_ids]
    for r in range(warmup + rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            result = generators[name].ask(run=ids, new_tokens=new_tokens)
            if r >= warmup:
                runs[name].append(result)
            if bar is not None:
                bar.update(1)
    return runs


# contention: all generate at once
def together(generators: list[Generator], prompt_ids, new_tokens: int) -> list[dict]:
    ids = [int(i) for i in prompt_ids]
    for generator in generators:
        generator.send(run=ids, new_tokens=new_tokens)
    return [generator._read() for generator in generators]


def summary(runs: list[dict]) -> dict:
    """Best decode rate (with the slowest), best time to first token, median CPU seconds per generated token."""
    import numpy as np

    rates = [r["decode_tok_s"] for r in runs]
    return {
        "decode_tok_s": max(rates),
        "decode_tok_s_min": min(rates),
        "spread": (max(rates) - min(rates)) / max(rates),  # (best - slowest) / best
        "ttft_ms": 1e3 * min(r["ttft_s"] for r in runs),
        "cpu_s_per_token": float(np.median([r["cpu_s_per_token"] for r in runs])),
        "runs": len(runs),
    }


# ---------------------------------------------------------------- the child process
def _run(model, og, ids: list[int], new_tokens: int) -> dict:
    import numpy as np

    params = og.GeneratorParams(model)
    length = len(ids) + new_tokens
    params.set_search_options(max_length=length, min_length=length, do_sample=False)
    generator = og.Generator(model, params)
    cpu0, t0, stamps, tokens = time.process_time(), time.perf_counter(), [], []
    generator.append_tokens(np.array(ids, dtype=np.int32))
    while not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
        stamps.append(time.perf_counter() - t0)
    del generator
    time.sleep(PAUSE_S)
    cpu = time.process_time() - cpu0
    return {
        "ttft_s": stamps[0],
        "decode_tok_s": (len(stamps) - 1) / (stamps[-1] - stamps[0]),
        "cpu_s_per_token": cpu / len(tokens),
        "tokens": tokens,
    }


def _profile(model, og, ids: list[int], steps: int) -> dict:
    """Kernel µs per decode step per operator type, from the runtime's profiler (one file per model run)."""
    import numpy as np

    params = og.GeneratorParams(model)
    length = len(ids) + steps + 1
    params.set_search_options(max_length=length, min_length=length, do_sample=False)
    per_op, home = Counter(), os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            generator = og.Generator(model, params)
            generator.append_tokens(np.array(ids, dtype=np.int32))
            generator.generate_next_token()
            generator.set_runtime_option("enable_profiling", "knob")
            for _ in range(steps):
                generator.generate_next_token()
            del generator
            files = sorted(Path(folder).glob("knob_*.json"))
            for file in files:
                for e in json.loads(file.read_text()):
                    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                        per_op[e["args"]["op_name"]] += e["dur"] / steps
        finally:
            os.chdir(home)
    if len(files) != steps:
        raise RuntimeError(f"expected one profile file per decode step ({steps}), got {len(files)}")
    return dict(per_op)


def _serve(model_dir: str, overlay: str) -> None:
    import onnxruntime_genai as og

    config = og.Config(model_dir)
    config.overlay(overlay)
    model = og.Model(config)
    print(json.dumps({"ready": model_dir}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "run" in command:
            answer = _run(model, og, command["run"], command["new_tokens"])
        else:
            answer = {"per_op_us": _profile(model, og, command["profile"], command["steps"])}
        print(json.dumps(answer), flush=True)


# python -m helpers.measure.decode_knobs MODEL_DIR OVERLAY_JSON (a Generator)
if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
