"""One dependency list with exact pins, and the README / CI commands kept true."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata

import nbformat
import yaml
from packaging.utils import canonicalize_name

from helpers.data.paths import REPO_ROOT

PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9_.\-]+)(?P<extras>\[[A-Za-z0-9_.,\-]+\])?"  # ray[data,serve]
    r"==(?P<version>[^\s#]+)\s+#\s*(?P<why>\S.*)$"
)


def requirement_lines():
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            yield line


def test_every_requirement_is_pinned_exactly_and_says_who_needs_it():
    names = []
    for line in requirement_lines():
        match = PIN.match(line)
        assert match, (
            f"requirements.txt line must be 'name==version  # notebooks that need it': {line!r}"
        )
        names.append(match["name"].lower())
    assert len(names) == len(set(names)), "a package is listed twice"
    declared = {
        "jupyterlab",
        "torch",
        "torchvision",
        "tensorflow",
        "tf2onnx",
        "onnx",
        "onnxruntime",
        "onnxruntime-genai",
        "huggingface-hub",
        "matplotlib",
        "nbval",
    }
    assert declared <= set(names), f"missing declared packages: {declared - set(names)}"


def test_torch_pins_are_the_ones_on_disk():
    pins = {PIN.match(line)["name"]: PIN.match(line)["version"] for line in requirement_lines()}
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    from helpers.measure.machine import tested_versions

    # what show_versions compares
    assert tested_versions() == {canonicalize_name(n): v for n, v in pins.items()}


def test_installed_versions_match_the_pins():
    for line in requirement_lines():
        match = PIN.match(line)
        assert metadata.version(match["name"]) == match["version"], (
            f"installed {match['name']} differs from {line!r}"
        )


def test_environment_yml_points_at_requirements_instead_of_repeating_them():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    conda_pkgs = [d for d in deps if isinstance(d, str)]
    assert sorted(conda_pkgs) == ["pip", "python=3.11"], (
        f"conda packages must live in requirements.txt: {conda_pkgs}"
    )
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    assert "-r requirements.txt" in pip_section
    assert all(p.startswith("-") for p in pip_section), (
        f"pip packages must live in requirements.txt: {pip_section}"
    )


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO_ROOT / "README.md").read_text()
    commands = re.findall(
        r"^\s*(make \w+)\s*$", readme.split("## Two commands")[1].split("\n## ")[0], re.M
    )
    assert commands == ["make lab", "make test"], commands
    ci = [
        line.strip()
        for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert ci == ["make test"], ci


def test_a_non_editable_install_carries_every_helpers_package(tmp_path):
    """Build the wheel `pip install .` would install and compare it with the packages in the source tree."""
    source = tmp_path / "src"  # a copy: building in the repository would leave build/ behind
    shutil.copytree(
        REPO_ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO_ROOT / "pyproject.toml", source)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("onnx_pdf_helpers-*.whl")
    packaged = {
        n.rsplit("/", 1)[0] for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/__init__.py")
    }
    in_tree = {
        p.parent.relative_to(REPO_ROOT).as_posix()
        for p in (REPO_ROOT / "helpers").rglob("__init__.py")
    }
    assert packaged == in_tree, f"missing from the wheel: {sorted(in_tree - packaged)}"
    assert "helpers/grading/checks" in packaged


def imported_modules() -> dict[str, set[str]]:
    """{third-party top-level module: {files importing it}} over helpers, tests and notebooks."""
    sources = {
        p: p.read_text()
        for folder in ("helpers", "tests")
        for p in (REPO_ROOT / folder).rglob("*.py")
    }
    for path in (REPO_ROOT / "notebooks").glob("*.ipynb"):
        cells = [
            c.source
            for c in nbformat.read(path, as_version=4).cells  # a %%writefile cell is not Python
            if c.cell_type == "code" and not c.source.startswith("%%")
        ]
        sources[path] = "\n".join(
            line
            for cell in cells
            for line in cell.splitlines()
            if not line.lstrip().startswith(("%", "!"))
        )
    own = {"helpers", "tests", "conftest"} | {p.stem for p in (REPO_ROOT / "tests").glob("*.py")}
    found: dict[str, set[str]] = {}
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - own - set(sys.stdlib_module_names):
                found.setdefault(top, set()).add(path.relative_to(REPO_ROOT).as_posix())
    return found


def test_every_imported_package_is_pinned_in_requirements():
    pinned = {canonicalize_name(PIN.match(line)["name"]) for line in requirement_lines()}
    providers = metadata.packages_distributions()
    unpinned = {
        module: sorted(files)
        for module, files in imported_modules().items()
        if not {canonicalize_name(d) for d in providers.get(module, [])} & pinned
    }
    assert not unpinned, f"imported but not pinned in requirements.txt (module: files): {unpinned}"
