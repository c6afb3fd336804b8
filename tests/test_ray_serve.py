"""Notebook 09's serving promises: Ray Serve on 127.0.0.1, with and without ``@serve.batch``, answers a bounded load
test as plain ONNX Runtime, refuses bad requests with a 4xx naming what was expected; nothing outlives the run."""

from __future__ import annotations

import json
import socket
import time

import numpy as np
import pytest

from helpers.measure.ray_serve import MAX_BODY, BadRequest, digit_from_json, load_test

DIGIT = np.arange(784, dtype=np.int64).reshape(28, 28) % 256


def body(pixels) -> bytes:
    return json.dumps({"pixels": pixels}).encode()


@pytest.mark.parametrize(
    "raw, status, names",
    [
        (body(DIGIT[:27].tolist()), 422, ["shape [28, 28]", "27 rows"]),
        (
            body([row[:20] for row in DIGIT.tolist()]),
            422,
            ["shape [28, 28]", "28 rows of 20 values"],
        ),
        (body(DIGIT.reshape(-1).tolist()), 422, ["shape [28, 28]", "784 rows of not a list"]),
        (body((DIGIT / 255).tolist()), 422, ["integers 0..255", "(a JSON float)"]),
        (body([[300] * 28] * 28), 422, ["integers 0..255", "got 300"]),
        (body([["7"] * 28] * 28), 422, ["integers 0..255", '"7" (a JSON str)']),
        (body([[True] * 28] * 28), 422, ["integers 0..255", "true (a JSON bool)"]),
        (json.dumps({"image": DIGIT.tolist()}).encode(), 422, ['{"pixels"', "keys ['image']"]),
        (json.dumps([1, 2]).encode(), 422, ['{"pixels"', "a JSON list"]),
        (b"pixels=0,0,0", 400, ['{"pixels"', "not JSON"]),
        (b"\xff\xfe", 400, ["not JSON"]),
        (
            b" " * (MAX_BODY + 1),
            413,
            [f"at most {MAX_BODY:,} bytes", f"got {MAX_BODY + 1:,} bytes"],
        ),
    ],
)
def test_a_bad_body_is_refused_saying_what_was_expected_and_what_came(raw, status, names):
    with pytest.raises(BadRequest) as refused:
        digit_from_json(raw)
    assert refused.value.status == status
    message = str(refused.value)
    assert message.startswith("expected "), message
    for name in names:
        assert name in message, (name, message)


def test_a_good_body_becomes_the_uint8_digit():
    image = digit_from_json(body(DIGIT.tolist()))
    assert image.dtype == np.uint8 and image.shape == (1, 28, 28)
    assert np.array_equal(image[0], DIGIT)


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


def test_serve_answers_as_plain_onnxruntime_refuses_bad_requests_and_leaves_nothing(ray_env):
    import http.client

    import onnxruntime as ort
    import ray
    from ray import serve
    from starlette.responses import JSONResponse

    from helpers.data.mnist import load_mnist
    from helpers.measure.ray_serve import (
        free_port,
        listening_sockets,
        ray_children,
        read_body,
        wait_gone,
    )
    from helpers.pipeline.artifacts import built_artifact

    model_bytes = built_artifact("mnist_mlp_pytorch.onnx").read_bytes()
    images = load_mnist().x_test[-400:]  # other digits than the notebook's
    bodies = [body(image.tolist()) for image in images]
    plain = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"]).run(
        ["logits"], {"image": images[:, None].astype(np.float32) / 255}
    )[0]

    @serve.deployment(
        ray_actor_options={"num_cpus": 1},
        max_ongoing_requests=32,
        logging_config={"enable_access_log": False},
    )
    class Digits:  # defined here so that Ray pickles it by value
        def __init__(self, model, batched):
            self.session, self.batched = (
                ort.InferenceSession(model, providers=["CPUExecutionProvider"]),
                batched,
            )

        async def __call__(self, request):
            try:
                image = digit_from_json(await read_body(request))
            except BadRequest as error:
                return JSONResponse({"error": str(error)}, status_code=error.status)
            logits = await (self.batch(image) if self.batched else self.one(image))
            return {"digit": int(logits.argmax()), "logits": logits.tolist()}

        async def one(self, image):
            return self.session.run(["logits"], {"image": image[None].astype(np.float32) / 255})[0][
                0
            ]

        @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)
        async def batch(self, batch):
            return list(
                self.session.run(["logits"], {"image": np.stack(batch).astype(np.float32) / 255})[0]
            )

    port = free_port()

    def post(path, raw, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.request(
                "POST", path, raw, {"Content-Type": "application/json", **(headers or {})}
            )
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    ray.init(
        address="local",
        num_cpus=2,
        object_store_memory=80 * 2**20,
        include_dashboard=False,
        object_spilling_directory=str(ray_env["spill"]),
    )
    started = ray_children()
    try:
        serve.start(
            http_options={"host": "127.0.0.1", "port": port},
            logging_config={"log_level": "WARNING"},
        )
        serve.run(Digits.bind(model_bytes, False), name="one", route_prefix="/one")
        serve.run(Digits.bind(model_bytes, True), name="batched", route_prefix="/batched")
        started = ray_children()
        refused = {
            name: post("/one", raw)
            for name, raw in {
                "shape": body(images[0][:, :27].tolist()),
                "dtype": body((images[0] / 255).tolist()),
                "not json": b'{"pixels": [',
                "too large": b"[" * 3_000_000,
            }.items()
        }
        right_after = post("/one", bodies[0], {"Authorization": "Bearer not-the-token"})
        load = {
            path: load_test(port, path, bodies, clients=16, max_seconds=60)
            for path in ("/one", "/batched")
        }
        sockets = listening_sockets(ray_children())
    finally:
        serve.shutdown()
        ray.shutdown()
    left = wait_gone(started, timeout_s=60)
    assert not left, f"Ray processes alive after shutdown: {left}"

    expected = {
        "shape": (422, "shape [28, 28]"),
        "dtype": (422, "integers 0..255"),
        "not json": (400, "not JSON"),
        "too large": (413, f"at most {MAX_BODY:,} bytes"),
    }
    for name, (status, answer) in refused.items():
        assert status == expected[name][0], (name, status, answer)
        assert answer["error"].startswith("expected ") and expected[name][1] in answer["error"], (
            name,
            answer,
        )
    status, answer = (
        right_after  # a wrong token in the header changes nothing: the proxy does not check it
    )
    assert status == 200 and answer["digit"] == plain[0].argmax(), right_after
    np.testing.assert_allclose(answer["logits"], plain[0], atol=1e-4)

    for path, result in load.items():
        dropped = sum(status != 200 for status in result["status"])
        assert dropped == 0, (
            f"{path}: {dropped} of {len(bodies)} requests unanswered: {result['answer'][:3]}"
        )
        answers = [json.loads(text) for text in result["answer"]]
        assert np.array_equal([a["digit"] for a in answers], plain.argmax(axis=1)), (
            f"{path}: digits differ"
        )
        np.testing.assert_allclose([a["logits"] for a in answers], plain, atol=1e-4, err_msg=path)
        print(f"{path}: {len(bodies) / result['seconds']:.0f} requests/s (printed, not asserted)")

    http_addresses = {ip for _, ip, p in sockets if p == port}
    assert http_addresses == {"127.0.0.1"}, f"the HTTP proxy listens on {http_addresses}"


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
