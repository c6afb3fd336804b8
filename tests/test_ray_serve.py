"""Notebook 09's Serve application without starting Ray: its request model refuses every wrong digit saying
what was expected and what came, its middleware refuses oversized bodies with 413, its config file passes
Serve's own schema and says what the code says, and the load test is bounded. (Serving itself, its 503s
and its replica counts are proven by notebook 09.)"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.measure.ray_serve import load_test

# Serve's application and the load test's bounds, without starting Ray
pytestmark = pytest.mark.ray

DIGIT = np.arange(784, dtype=np.int64).reshape(28, 28) % 256
CONFIG = Path(__file__).parents[1] / "helpers" / "ray_apps" / "digits_serve.yaml"


def with_pixel(value):
    pixels = DIGIT.tolist()
    pixels[3][5] = value
    return pixels


@pytest.mark.parametrize(
    "pixels, expected",
    [
        (DIGIT[:27].tolist(), "at least 28 items"),
        (DIGIT.tolist() + [[0] * 28], "at most 28 items"),
        ([row[:20] for row in DIGIT.tolist()], "at least 28 items"),
        (DIGIT.reshape(-1).tolist(), "at most 28 items"),
        (with_pixel(0.5), "valid integer"),
        (with_pixel(1.0), "valid integer"),
        (with_pixel(300), "less than or equal to 255"),
        (with_pixel(-1), "greater than or equal to 0"),
        (with_pixel("7"), "valid integer"),
        (with_pixel(True), "valid integer"),
        ("not a list", "valid list"),
    ],
)
def test_the_request_model_refuses_each_wrong_digit_saying_what_was_expected(pixels, expected):
    from pydantic import ValidationError

    from helpers.ray_apps.digits_service import Digit

    with pytest.raises(ValidationError) as refused:
        Digit.model_validate({"pixels": pixels})
    errors = refused.value.errors()
    assert any(expected in error["msg"] for error in errors), errors[:3]
    assert all("input" in error for error in errors)  # FastAPI's 422 shows what came


def test_the_request_model_takes_a_digit_and_names_a_missing_field():
    from pydantic import ValidationError

    from helpers.ray_apps.digits_service import Digit

    assert np.array_equal(np.array(Digit(pixels=DIGIT.tolist()).pixels), DIGIT)
    with pytest.raises(ValidationError, match="pixels\n  Field required"):
        Digit.model_validate({"image": DIGIT.tolist()})


@pytest.mark.parametrize(
    "headers, status, expected",
    [
        ({"content-length": str(10**6)}, 413, "at most 65,536 bytes, got 1,000,000 bytes"),
        ({"content-length": "12a"}, 400, "in digits, got '12a'"),
    ],
)
def test_the_middleware_refuses_a_body_it_should_not_read(headers, status, expected):
    import asyncio

    from starlette.requests import Request

    from helpers.ray_apps.digits_service import limit_body

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }

    async def call_next(request):  # the route: must not be reached
        raise AssertionError("the body was passed on")

    response = asyncio.run(limit_body(Request(scope), call_next))
    assert response.status_code == status
    detail = json.loads(response.body)["detail"]
    assert detail.startswith("expected ") and expected in detail, detail


def test_the_config_file_passes_serves_schema_and_says_what_the_code_says():
    import yaml
    from ray.serve.schema import ServeDeploySchema

    from helpers.ray_apps import digits_service

    raw = yaml.safe_load(CONFIG.read_text())
    config = ServeDeploySchema.model_validate(raw)
    (app,) = config.applications
    assert app.import_path == "helpers.ray_apps.digits_service:build"
    assert config.http_options.host == "127.0.0.1"
    (deployment,) = app.deployments
    assert deployment.max_ongoing_requests == digits_service.MAX_ONGOING
    assert deployment.max_queued_requests == digits_service.MAX_QUEUED
    assert deployment.autoscaling_config == digits_service.AUTOSCALING
    options = digits_service.Digits._deployment_config
    assert options.max_ongoing_requests == digits_service.MAX_ONGOING
    assert options.max_queued_requests == digits_service.MAX_QUEUED
    # a batch can fill: a replica holds at least max_batch_size requests at once
    batch_size = digits_service.Digits.func_or_class.score_batch._get_max_batch_size()
    assert batch_size == digits_service.MAX_BATCH
    assert deployment.max_ongoing_requests >= batch_size, (
        "the config file's replica never fills a batch"
    )
    assert options.max_ongoing_requests >= batch_size, "the app's replica never fills a batch"
    wrong = {**raw, "applications": [{**raw["applications"][0], "route_prefix": 8000}]}
    with pytest.raises(Exception, match="route_prefix"):  # the schema is not a rubber stamp
        ServeDeploySchema.model_validate(wrong)
    root = CONFIG.parents[2]
    digits_service.build({**app.args, "model": str(root / app.args["model"])})
    with pytest.raises(FileNotFoundError, match="expected the model file"):
        digits_service.build({"model": str(root / "no-such.onnx")})


def test_the_load_test_is_bounded_and_stops_by_itself():
    with pytest.raises(ValueError, match="expected 1..64 clients"):
        load_test(1, "/", [b"{}"], clients=1000)
    with pytest.raises(ValueError, match="0..120 s"):
        load_test(1, "/", [b"{}"], max_seconds=3600)
    silent = socket.socket()  # accepts connections (the backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    try:
        start = time.monotonic()
        result = load_test(silent.getsockname()[1], "/x", [b"{}"] * 50, clients=4, max_seconds=2)
        assert time.monotonic() - start < 30, "the load test did not stop by itself"
    finally:
        silent.close()
    assert all(status is None for status in result["status"]), (
        "answers from a server that never answers"
    )
    assert len(result["status"]) == 50


def test_helpers_import_no_ray_or_starlette_at_module_level():
    import subprocess
    import sys

    code = (
        "import sys, helpers.measure.ray_serve; "
        "print(sorted(m for m in ('ray', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
