"""Notebook 09's Serve application: the digit model behind a FastAPI ingress on Ray Serve.

A module, as Serve's config files need (``import_path: helpers.ray_apps.digits_service:build``); notebook 09
deploys it with ``serve.run(build({...}))`` and prints this source. What each part does:

- ``Digit``: the request, a pydantic model (28 rows of 28 integers 0..255). FastAPI validates the body
  against it and answers anything else with **422** and a ``detail`` list whose ``msg`` says what was
  expected and whose ``input`` shows what came (malformed JSON included: FastAPI's ``json_invalid``).
- ``limit_body``: a middleware that answers a body over ``MAX_BODY`` bytes with **413** before reading it,
  and one without a ``Content-Length`` with **411**.
- ``Digits``: the deployment; ``session.run`` runs in a worker thread (``asyncio.to_thread``), off the
  replica's event loop, with or without ``@serve.batch``. Each answer names the batch it ran in (``batch``:
  its size, ``batch_id``: this replica's id and the batch's number, counted in ``score_batch``), so a client
  can count the batches the replica actually ran. ``max_ongoing_requests`` bounds each replica,
  ``max_queued_requests`` the requests waiting at the proxy (more get **503**), ``autoscaling_config`` sets
  1 to 2 replicas with delays shortened from Serve's defaults (upscale 30 s, downscale 600 s, look-back 30 s).
- ``gate``: for the notebook's overload demonstration only: while it names a file that does not exist,
  each request waits (asynchronously) before scoring, so that requests are *held* at a known moment."""

import asyncio
from pathlib import Path
from typing import Annotated

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from ray import serve

MAX_BODY = 64 * 1024  # bytes; one digit's JSON is about 3 kB
MAX_ONGOING, MAX_QUEUED = 8, 16  # per replica; per proxy
# a replica holds at most MAX_ONGOING requests, so a batch larger than that never fills (Serve's
# batching.py warns when max_batch_size * max_concurrent_batches exceeds max_ongoing_requests)
MAX_BATCH = 8
AUTOSCALING = {
    "min_replicas": 1,
    "max_replicas": 2,
    "target_ongoing_requests": 2,
    "metrics_interval_s": 0.5,
    "look_back_period_s": 2,
    "upscale_delay_s": 1,
    "downscale_delay_s": 5,
}

Byte = Annotated[int, Field(strict=True, ge=0, le=255)]
Row = Annotated[list[Byte], Field(min_length=28, max_length=28)]


class Digit(BaseModel):
    """One digit as MNIST stores it: 28 rows of 28 integers 0..255."""

    pixels: Annotated[list[Row], Field(min_length=28, max_length=28)]


api = FastAPI(title="digits", description="The series' MNIST file behind Ray Serve")


@api.middleware("http")
async def limit_body(request: Request, call_next):
    size = request.headers.get("content-length")
    if request.method == "POST" and size is None:
        return JSONResponse(
            {"detail": "expected a Content-Length header, got a body without one"}, 411
        )
    if size is not None and not size.isdigit():
        return JSONResponse({"detail": f"expected a Content-Length in digits, got {size!r}"}, 400)
    if size is not None and int(size) > MAX_BODY:
        message = f"expected a body of at most {MAX_BODY:,} bytes, got {int(size):,} bytes"
        return JSONResponse({"detail": message}, 413)
    return await call_next(request)


@serve.deployment(
    ray_actor_options={"num_cpus": 1},
    max_ongoing_requests=MAX_ONGOING,
    max_queued_requests=MAX_QUEUED,
    autoscaling_config=AUTOSCALING,
    logging_config={"enable_access_log": False},
)
@serve.ingress(api)
class Digits:
    """POST / with {"pixels": ...} -> {"digit", "logits", "batch", "batch_id"} (batch: requests in its
    session.run; batch_id: which of this replica's batches)."""

    def __init__(self, model: str, batched: bool = True, gate: str | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.batched, self.gate = batched, Path(gate) if gate else None
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.batches = 0  # session.run calls so far, counted in score_batch

    def run(self, images: np.ndarray) -> np.ndarray:
        """uint8 [N, 28, 28] -> logits [N, 10]; blocking, called in a worker thread."""
        return self.session.run(["logits"], {"image": images[:, None].astype(np.float32) / 255})[0]

    @api.post("/")
    async def predict(self, digit: Digit) -> dict:
        while self.gate is not None and not self.gate.exists():
            await asyncio.sleep(0.05)  # held (overload demonstration), the event loop stays free
        image = np.array(digit.pixels, dtype=np.uint8)
        if self.batched:
            logits, batch, batch_id = await self.score_batch(image)
        else:
            logits, batch, batch_id = (await asyncio.to_thread(self.run, image[None]))[0], 1, None
        return {
            "digit": int(logits.argmax()),
            "logits": logits.tolist(),
            "batch": batch,
            "batch_id": batch_id,
        }

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.005)
    async def score_batch(self, images: list[np.ndarray]) -> list:
        self.batches += 1
        batch_id = f"{self.replica}:{self.batches}"
        logits = await asyncio.to_thread(self.run, np.stack(images))
        return [(row, len(images), batch_id) for row in logits]


def build(args: dict) -> serve.Application:
    """The application from its arguments: ``model`` (a path every node can read), ``batched``,
    ``gate``; what a Serve config file's ``args`` hold."""
    model = Path(args["model"])
    if not model.is_file():
        raise FileNotFoundError(f"expected the model file at {model}, found nothing there")
    return Digits.bind(str(model), bool(args.get("batched", True)), args.get("gate"))
