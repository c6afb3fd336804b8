"""What an environment costs: a cached bare inference venv, installed sizes, import times (notebook 03).

The bare venv holds only ``requirements-inference.txt``; it is built once and cached under
``.cache/venv-inference-<hash>`` (the hash of the requirements and the base interpreter, ``bare_env_key``).
``tests/test_bare_env.py`` runs ``helpers.predict`` there and checks that ``import torch`` and
``import tensorflow`` fail, so "needs only numpy, onnxruntime and Pillow" is tested, not claimed.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

from helpers.data.atomic import cached_dir
from helpers.data.paths import REPO_ROOT, cache_dir
from helpers.measure.timing import bench_scale

INFERENCE_REQUIREMENTS = REPO_ROOT / "requirements-inference.txt"


def clean_environ() -> dict:
    """``os.environ`` without the variables that would let another environment's packages leak in."""
    leaks = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in leaks} | {"PYTHONNOUSERSITE": "1"}


def python_of(env_dir: Path) -> Path:
    return Path(env_dir) / "bin" / "python"


def run_python(python: Path | str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``python args...`` with a clean environment, capturing text output."""
    kwargs.setdefault("env", clean_environ())
    return subprocess.run([str(python), *args], capture_output=True, text=True, **kwargs)


def bare_env_key(requirements: Path = INFERENCE_REQUIREMENTS) -> str:
    """12 hex digits identifying the requirements text and the base interpreter the venv is built on."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    return hashlib.sha256(
        f"{Path(requirements).read_text()}\n{sys.version}\n{base}".encode()
    ).hexdigest()[:12]


def bare_env(requirements: Path = INFERENCE_REQUIREMENTS, log=print) -> Path:
    """Folder of the cached bare inference venv, building it first if needed (about 20 s, ~160 MB)."""

    def build(folder: Path) -> None:
        log(f"building the bare inference environment from {Path(requirements).name} ...")
        # no pip inside: only what we install
        venv.EnvBuilder(with_pip=False, clear=True).create(folder)
        pip = [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python_of(folder)),
            "--disable-pip-version-check",
        ]
        for step in (["install", "--no-deps", "--quiet", "-r", str(requirements)], ["check"]):
            result = run_python(pip[0], [*pip[1:], *step])
            if result.returncode != 0:
                raise RuntimeError(
                    f"`pip {' '.join(step)}` failed for the bare environment:\n{result.stdout}\n"
                    f"{result.stderr}"
                )

    return cached_dir(
        cache_dir() / f"venv-inference-{bare_env_key(requirements)}",
        build,
        ready=lambda folder: python_of(folder).exists(),
    )


def site_packages(env_dir: Path) -> Path:
    (folder,) = Path(env_dir).glob("lib/python*/site-packages")
    return folder


def installed(env_dir: Path) -> dict[str, str]:
    """{distribution name (lower case): version} of every package installed in the venv at ``env_dir``."""
    return {
        d.metadata["Name"].lower(): d.version
        for d in metadata.distributions(path=[str(site_packages(env_dir))])
    }


def closure_size(names: list[str]) -> int:
    """Bytes installed by ``names`` and everything they require (markers evaluated), each file counted once."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo, files = set(), list(names), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional or platform-specific requirement that is not installed
        files |= {Path(f.locate()).resolve() for f in dist.files or []}
        requires = map(Requirement, dist.requires or [])
        todo += [r.name for r in requires if not r.marker or r.marker.evaluate({"extra": ""})]
    return sum(f.stat().st_size for f in files if f.is_file())


def import_seconds(python: Path | str, module: str, repeat: int = 3) -> float:
    """Median seconds of ``import module`` in fresh processes after a discarded warm-up (``repeat`` scaled)."""
    code = (
        f"import time; t0 = time.perf_counter(); import {module}; print(time.perf_counter() - t0)"
    )
    samples = []
    for _ in range(1 + max(1, round(repeat * bench_scale()))):
        result = run_python(
            python, ["-I", "-c", code], env=clean_environ() | {"TF_CPP_MIN_LOG_LEVEL": "2"}
        )
        if result.returncode != 0:
            raise RuntimeError(f"`import {module}` failed in {python}:\n{result.stderr[-2000:]}")
        samples.append(float(result.stdout.strip().splitlines()[-1]))
    return statistics.median(samples[1:])


#: Engines that read the same files with code of their own (notebook 04), measured like the training stacks.
ENGINES = {
    "onnxruntime + numpy": "onnxruntime",
    "openvino + numpy": "openvino",
    "tract + numpy": "tract",
}


def stack_costs(env_dir: Path) -> dict[str, tuple[float, float]]:
    """{stack: (installed MB, median import seconds)}: the bare venv, torch and tensorflow, then each engine.

    The bare venv is measured whole (its ``site-packages``); the others by what they install here with everything
    they require (``closure_size``), so the engines' rows, ONNX Runtime's included, compare with one another.
    """
    site = site_packages(env_dir)
    bare_bytes = sum(
        f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink()
    )
    here = sys.executable
    return {
        "onnxruntime + numpy + Pillow (bare env)": (
            bare_bytes / 1e6,
            import_seconds(python_of(env_dir), "onnxruntime"),
        ),
        "torch + torchvision": (
            closure_size(["torch", "torchvision"]) / 1e6,
            import_seconds(here, "torch"),
        ),
        "tensorflow": (closure_size(["tensorflow"]) / 1e6, import_seconds(here, "tensorflow")),
    } | {
        stack: (closure_size([package, "numpy"]) / 1e6, import_seconds(here, package))
        for stack, package in ENGINES.items()
    }
