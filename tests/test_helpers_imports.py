"""helpers must stay importable without torch or tensorflow (notebook 03 relies on it)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import helpers
from helpers.pipeline.save_cells import FRAMEWORK_MODULES


def test_importing_every_helper_module_loads_no_framework():
    framework_lessons = set(
        FRAMEWORK_MODULES.values()
    )  # generated from torch cells: they import torch, by design
    modules = ["helpers"] + [
        m.name
        for m in pkgutil.walk_packages(helpers.__path__, "helpers.")
        if m.name.rsplit(".", 1)[1] not in framework_lessons
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = sorted(m for m in ('torch', 'tensorflow', 'keras', 'transformers') if m in sys.modules)\n"
        "print(heavy)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout
    assert len(modules) >= 30  # every module of every role package, the checks included
