"""What an environment costs: a cached bare inference venv, installed sizes, import times.

Introduced in notebook 03 (``notebooks/03_run_with_onnxruntime.ipynb``) and used by
``tests/test_bare_env.py``. Plumbing only: nothing here imports torch or tensorflow; their sizes are read
from the installed distributions' file lists (``importlib.metadata``) and their import time is measured in
a fresh subprocess.

* ``bare_env()`` - a virtual environment holding only ``requirements-inference.txt`` (no pip, no helpers),
  built once in a temporary folder, checked with ``pip check``, then renamed into
  ``.cache/venv-inference-<hash>`` (``helpers.atomic.cached_dir``); the hash covers the requirements file and
  the base Python, so editing the pins builds a new one. Always call its ``bin/python`` directly
  (``activate`` scripts hold the temporary path).
* ``closure_size(names)`` - bytes installed by distributions and everything they require, in this env.
* ``environment_size(python)`` - bytes installed in any environment, measured by that env's own Python.
* ``import_seconds(python, module)`` - wall-clock time of ``import module`` in fresh processes.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

from helpers.atomic import cached_dir
from helpers.paths import REPO_ROOT, cache_dir
from helpers.timing import bench_scale

INFERENCE_REQUIREMENTS = REPO_ROOT / "requirements-inference.txt"
# Installers a venv may carry that are not part of what it runs.
TOOLING = {"pip", "setuptools", "wheel"}


def clean_environ() -> dict:
    """``os.environ`` without variables that would let another environment's packages leak in."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def python_of(env_dir: Path) -> Path:
    return Path(env_dir) / "bin" / "python"


def bare_env_key(requirements: Path = INFERENCE_REQUIREMENTS) -> str:
    """12 hex digits identifying the requirements text and the base interpreter the venv is built on."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    text = Path(requirements).read_text()
    return hashlib.sha256(f"{text}\n{sys.version}\n{base}".encode()).hexdigest()[:12]


def bare_env(requirements: Path = INFERENCE_REQUIREMENTS, log=print) -> Path:
    """Folder of the cached bare inference venv, building it first if needed (about 20 s, ~160 MB)."""
    requirements = Path(requirements)

    def build(folder: Path) -> None:
        log(f"building the bare inference environment from {requirements.name} ...")
        venv.EnvBuilder(with_pip=False, clear=True).create(folder)  # no pip inside: only what we install
        pip = [sys.executable, "-m", "pip", "--python", str(python_of(folder)), "--disable-pip-version-check"]
        for step in (["install", "--no-deps", "--quiet", "-r", str(requirements)], ["check"]):
            result = subprocess.run(pip + step, capture_output=True, text=True, env=clean_environ())
            if result.returncode != 0:
                raise RuntimeError(f"`pip {' '.join(step)}` failed for the bare environment "
                                   f"(exit {result.returncode}):\n{result.stdout}\n{result.stderr}")

    return cached_dir(cache_dir() / f"venv-inference-{bare_env_key(requirements)}", build,
                      ready=lambda folder: python_of(folder).exists())


def run_python(python: Path | str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``python args...`` with a clean environment (no PYTHONPATH leaking in), capturing text output."""
    kwargs.setdefault("env", clean_environ())
    return subprocess.run([str(python), *args], capture_output=True, text=True, **kwargs)


# --------------------------------------------------------------------------------------------- sizes
def _dist_files(dist) -> set[Path]:
    return {Path(f.locate()).resolve() for f in (dist.files or [])}


def closure(names: list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` and, recursively, every installed one they require
    (environment markers evaluated, extras not followed)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo, found = set(), list(names), []
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional or platform-specific requirement that is not installed
        found.append(dist)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def closure_size(names: list[str]) -> dict:
    """``{"total_bytes", "packages": {name: bytes}}`` of ``names`` and their dependency closure here."""
    packages, counted = {}, set()
    for dist in closure(names):
        files = {f for f in _dist_files(dist) if f not in counted and f.is_file()}
        counted |= files
        packages[dist.metadata["Name"]] = sum(f.stat().st_size for f in files)
    return {"total_bytes": sum(packages.values()), "packages": dict(sorted(packages.items(), key=lambda kv: -kv[1]))}


_ENV_SIZE_SCRIPT = r"""
import json, os, site, sys
from importlib import metadata
tooling = set(sys.argv[1].split(","))
packages = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name.lower() in tooling:
        continue
    size = 0
    for f in dist.files or []:
        path = f.locate()
        if os.path.isfile(path):
            size += os.path.getsize(path)
    packages[name] = [dist.version, size]
site_bytes = 0
for folder in site.getsitepackages():
    for base, _dirs, files in os.walk(folder):
        site_bytes += sum(os.path.getsize(os.path.join(base, f)) for f in files
                          if not os.path.islink(os.path.join(base, f)))
print(json.dumps({"packages": packages, "site_packages_bytes": site_bytes, "prefix": sys.prefix}))
"""


def environment_size(python: Path | str) -> dict:
    """Measured by the environment's own Python (stdlib only): ``packages`` {name: [version, bytes]} without
    pip/setuptools/wheel, ``total_bytes`` their sum, and ``site_packages_bytes`` (every file, like ``du``)."""
    # -I (isolated): no current directory on sys.path, so a project's *.egg-info there is not counted
    result = run_python(python, ["-I", "-c", _ENV_SIZE_SCRIPT, ",".join(sorted(TOOLING))])
    if result.returncode != 0:
        raise RuntimeError(f"could not measure {python}: {result.stderr}")
    info = json.loads(result.stdout)
    info["total_bytes"] = sum(size for _version, size in info["packages"].values())
    return info


# --------------------------------------------------------------------------------------- import time
def import_seconds(python: Path | str, module: str, repeat: int = 3, warmup: int = 1) -> dict:
    """Wall-clock seconds of ``import module``, each in a fresh process; ``warmup`` runs are discarded
    (they fill the OS file cache). ``ONNX_PDF_BENCH_SCALE`` scales ``repeat`` (at least 1)."""
    scale = bench_scale()
    code = ("import time; t0 = time.perf_counter(); import {m}; "
            "print(repr(time.perf_counter() - t0))").format(m=module)
    env = clean_environ() | {"TF_CPP_MIN_LOG_LEVEL": "2"}
    samples = []
    for i in range(warmup + max(1, round(repeat * scale))):
        result = run_python(python, ["-I", "-c", code], env=env)
        if result.returncode != 0:
            raise RuntimeError(f"`import {module}` failed in {python}:\n{result.stderr[-2000:]}")
        if i >= warmup:
            samples.append(float(result.stdout.strip().splitlines()[-1]))
    return {"median_s": statistics.median(samples), "samples_s": samples}
