"""What a reader needs to interpret a number: the CPU, its flags, and the package versions.

A speed is printed beside the CPU's instruction-set flags (AVX2, AVX-512 VNNI, ...) because int8 speed depends
on them. ``tested_versions`` reads the ``==`` pins of ``requirements.txt`` with ``packaging``, so
``show_versions`` compares the installed versions with the tested ones.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Iterable

from packaging.utils import canonicalize_name


def cpu_description() -> dict:
    """CPU model, logical cores and the instruction-set flags that matter for inference speed."""
    model, flags = platform.processor() or "unknown", set()
    ids = {}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "model name" and model in ("unknown", "", "x86_64"):
                model = value
            elif key == "flags":
                flags = set(value.split())
            elif key in ("vendor_id", "cpu family", "model", "stepping") and key not in ids:
                ids[key] = value
    interesting = [
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512_vnni",
        "avx_vnni",
        "avx512_bf16",
        "amx_int8",
    ]
    return {
        "model": model,
        "vendor": ids.get("vendor_id"),
        "family": ids.get("cpu family"),
        "model_number": ids.get("model"),
        "stepping": ids.get("stepping"),
        "logical_cores": os.cpu_count(),
        "machine": platform.machine(),
        "flags": [f for f in interesting if f in flags],
    }


def package_versions(names: Iterable[str]) -> dict:
    """Installed versions of the given distributions (``None`` when absent)."""
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    return {name: installed.get(canonicalize_name(name)) for name in names}


def machine_report(
    packages: Iterable[str] = ("numpy", "onnx", "onnxruntime"), threads: int | None = None
) -> dict:
    """Everything a reader needs to interpret a timing: CPU, flags, threads, Python and packages."""
    return {
        "cpu": cpu_description(),
        "threads": threads,
        "python": platform.python_version(),
        "os": platform.platform(),
        "packages": package_versions(packages),
    }


def tested_versions() -> dict:
    """``{canonical name: version}`` pinned with ``==`` in ``requirements.txt`` (the versions tested)."""
    from packaging.requirements import Requirement

    from helpers.data.paths import REPO_ROOT

    pins = {}
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            pinned = [s.version for s in requirement.specifier if s.operator == "=="]
            if pinned:
                pins[canonicalize_name(requirement.name)] = pinned[0]
    return pins


def show_versions(*names: str) -> dict:
    """Print each package's installed version beside the tested one, warn where they differ; ``{name: installed}``."""
    import warnings

    tested, found = tested_versions(), package_versions(names)
    for name in names:
        want = tested.get(canonicalize_name(name))
        mark = (
            "" if want is None or found[name] == want else "   <- differs from the tested version"
        )
        print(
            f"{name:<20} found {found[name] or 'not installed':<12} tested {want or '-':<10}{mark}"
        )
        if mark:
            warnings.warn(
                f"{name} {found[name]} is installed; the series was tested with {want} "
                f"(`pip install -r requirements.txt` restores it)",
                stacklevel=2,
            )
    return found
