"""One dependency list with exact pins, and the README / CI commands kept true."""
from __future__ import annotations

import re
from importlib import metadata

import yaml

from helpers.paths import REPO_ROOT

PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.\-\[\]]+)==(?P<version>[^\s#]+)\s+#\s*(?P<why>\S.*)$")


def requirement_lines():
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            yield line


def test_every_requirement_is_pinned_exactly_and_says_who_needs_it():
    names = []
    for line in requirement_lines():
        match = PIN.match(line)
        assert match, f"requirements.txt line must be 'name==version  # notebooks that need it': {line!r}"
        names.append(match["name"].lower())
    assert len(names) == len(set(names)), "a package is listed twice"
    declared = {"jupyterlab", "torch", "torchvision", "tensorflow", "tf2onnx", "onnx", "onnxruntime",
                "onnxruntime-genai", "huggingface-hub", "matplotlib", "nbval"}
    assert declared <= set(names), f"missing declared packages: {declared - set(names)}"


def test_torch_pins_are_the_ones_on_disk():
    pins = {PIN.match(l)["name"]: PIN.match(l)["version"] for l in requirement_lines()}
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"


def test_installed_versions_match_the_pins():
    for line in requirement_lines():
        match = PIN.match(line)
        assert metadata.version(match["name"]) == match["version"], f"installed {match['name']} differs from {line!r}"


def test_environment_yml_points_at_requirements_instead_of_repeating_them():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    conda_pkgs = [d for d in deps if isinstance(d, str)]
    assert sorted(conda_pkgs) == ["pip", "python=3.11"], f"conda packages must live in requirements.txt: {conda_pkgs}"
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    assert "-r requirements.txt" in pip_section
    assert all(p.startswith("-") for p in pip_section), f"pip packages must live in requirements.txt: {pip_section}"


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO_ROOT / "README.md").read_text()
    commands = re.findall(r"^\s*(make \w+)\s*$", readme.split("## Two commands")[1].split("\n## ")[0], re.M)
    assert commands == ["make lab", "make test"], commands
    ci = [l.strip() for l in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
          if l.strip() and not l.startswith("#") and not l.startswith(("set ", "cd "))]
    assert ci == ["make test"], ci
