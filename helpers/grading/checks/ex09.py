"""Checks for notebook 09's exercises without Ray: each callable run as Ray Data would, on unseen digits."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from helpers.grading.checks import _common
from helpers.grading.checks._common import Wrong, require_callable

TOP2_KEYS = ("id", "top1", "top2", "p1", "p2")


def random_mlp_bytes(seed: int) -> bytes:
    """A small MLP under the series' contract (``image`` [N, 1, 28, 28] -> ``logits`` [N, 10]), random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.08, (784, 64)).astype(np.float32)
    w2 = rng.normal(0, 0.4, (64, 10)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Flatten", ["image"], ["flat"]),
            helper.make_node("MatMul", ["flat", "w1"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["logits"]),
        ],
        "checker_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model.SerializeToString()


def unseen_batches(seed: int) -> list:
    """pyarrow batches of shifted test digits: shuffled, gapped ids, an extra column, sizes that differ."""
    import pyarrow as pa

    from helpers.data.mnist import load_mnist
    from helpers.data.ray_digits import shard_table, shift_images

    rng = np.random.default_rng(seed)
    digits = load_mnist().x_test[rng.choice(10_000, 700, replace=False)]
    images = shift_images(digits, int(rng.integers(-2, 3)), int(rng.integers(-3, 4)))
    ids = rng.choice(10**9, len(images), replace=False).astype(
        np.int64
    )  # not sorted, not contiguous
    table = shard_table(images, rng.integers(0, 10, len(images)), ids)
    table = table.select(["pixels", "label", "id"])  # another column order
    return [table.slice(0, 433), table.slice(433, 1), table.slice(434)] + [
        pa.Table.from_batches(table.slice(0, 50).to_batches(max_chunksize=20))
    ]  # a batch of several chunks


def _expected(model: bytes, batch) -> dict:
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    pixels = np.asarray(batch.column("pixels").to_pylist(), np.uint8).reshape(-1, 1, 28, 28)
    logits = session.run(["logits"], {"image": pixels.astype(np.float32) / 255})[0].astype(
        np.float64
    )
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    order = np.argsort(-probs, axis=1, kind="stable")
    rows = np.arange(len(probs))
    return {
        "id": batch.column("id").to_numpy(),
        "top1": order[:, 0],
        "top2": order[:, 1],
        "p1": probs[rows, order[:, 0]],
        "p2": probs[rows, order[:, 1]],
        "logits": logits,
        "probs": probs,
    }


def _column(answer: dict, key: str, n: int) -> np.ndarray:
    try:
        values = np.asarray(answer[key])
    except Exception as err:  # a value numpy cannot take
        raise Wrong(
            f"expected {key!r} as a numpy array, got {type(answer[key]).__name__} ({err})"
        ) from err
    if values.shape != (n,):
        raise Wrong(
            f"expected {key!r} with one value per row of the batch ({n} rows), got shape "
            f"{list(values.shape)}"
        )
    return values


def _judge_top2(out, want: dict, n: int) -> None:
    if not isinstance(out, dict):
        raise Wrong(f"expected __call__ to return a dict of numpy arrays, got {type(out).__name__}")
    missing = [k for k in TOP2_KEYS if k not in out]
    if missing:
        raise Wrong(
            f"expected the keys {list(TOP2_KEYS)} in the returned dict, missing {missing}: "
            + ("keep the id column" if "id" in missing else "return every column asked for")
        )
    got = {k: _column(out, k, n) for k in TOP2_KEYS}
    if not np.array_equal(got["id"], want["id"]):
        same_set = np.array_equal(np.sort(got["id"]), np.sort(want["id"]))
        raise Wrong(
            "the ids are the batch's but in another order: keep the batch's order, row by row"
            if same_set
            else "the ids are not the batch's ids: return batch['id'] as it came"
        )
    p1, p2 = got["p1"].astype(np.float64), got["p2"].astype(np.float64)
    if np.any(p1 < 0) or np.any(p1 > 1) or np.any(p2 < 0) or np.any(p2 > 1):
        raise Wrong(
            "p1 and p2 must be probabilities between 0 and 1: a softmax over each row's 10 logits"
        )
    probs, rows = want["probs"], np.arange(n)
    for key in ("top1", "top2"):
        if not np.isin(got[key], np.arange(10)).all():
            raise Wrong(f"expected {key} as digits 0..9, got other values (dtype {got[key].dtype})")
    if np.any(got["top2"] == got["top1"]):
        raise Wrong(
            "top2 equals top1 on some rows: top2 is the second most probable digit, another one"
        )
    # a digit is right when its probability is the one asked for (ties between equal probabilities accepted)
    wrong1 = probs[rows, got["top1"]] < want["p1"] - 1e-9
    if wrong1.any():
        if np.array_equal(got["top1"], want["top2"]):
            raise Wrong("top1 holds the second most probable digits: top1 is the most probable one")
        raise Wrong(f"top1 is not the most probable digit on {wrong1.mean():.0%} of the rows")
    wrong2 = np.abs(probs[rows, got["top2"]] - want["p2"]) > 1e-9
    if wrong2.any():
        raise Wrong(
            f"top2 is not the second most probable digit on {wrong2.mean():.0%} of the rows"
        )
    if n > 1:
        logits = want["logits"]
        over_batch = np.exp(logits - logits.max(0)) / np.exp(logits - logits.max(0)).sum(0)
        if np.allclose(
            p1, over_batch[rows, want["top1"]], rtol=1e-4, atol=1e-7
        ) and not np.allclose(p1, want["p1"], rtol=1e-4, atol=1e-7):
            raise Wrong(
                "the probabilities are a softmax over the batch (axis 0): take it over each row's "
                "10 logits (axis 1)"
            )
    for key, label, value, other in (
        ("p1", "top1", p1, want["p2"]),
        ("p2", "top2", p2, want["p1"]),
    ):
        if not np.allclose(value, want[key], rtol=1e-4, atol=1e-6):
            if np.allclose(value, other, rtol=1e-4, atol=1e-6):
                raise Wrong(
                    f"{key} holds the probability of the other digit: {key} goes with {label}"
                )
            raise Wrong(
                f"{key} is not the probability of {label} (a softmax over each row's 10 logits)"
            )


def check_top2(answer):
    if not isinstance(answer, type):
        raise Wrong(
            f"expected your class Top2 (the class itself, as map_batches takes it), got "
            f"{type(answer).__name__}"
        )
    rng = _common.rng()  # the model, its file name and the shards, new with each seed
    model = random_mlp_bytes(int(rng.integers(1 << 30)))
    batches = unseen_batches(int(rng.integers(1 << 30)))
    wants = [_expected(model, batch) for batch in batches]  # before counting the learner's sessions
    with tempfile.TemporaryDirectory() as folder:
        # a path, as the notebook passes it: fn_constructor_args=(str(model_path),)
        path = Path(folder) / f"checker_{int(rng.integers(1 << 30))}.onnx"
        path.write_bytes(model)
        return _run_top2(answer, str(path), batches, wants)


def _run_top2(answer, model_path: str, batches: list, wants: list) -> list:
    from unittest import mock

    import onnxruntime as ort

    sessions, original = [], ort.InferenceSession.__init__

    def counted(
        session, *args, **kwargs
    ):  # InferenceSession as the learner makes it: counted, then the real one
        sessions.append(session)
        return original(session, *args, **kwargs)

    with mock.patch.object(ort.InferenceSession, "__init__", counted):
        try:
            predictor = answer(model_path)
        except Exception as err:  # the learner's constructor, reported as it failed
            raise Wrong(
                "expected Top2(model_path), given a path to an .onnx file as a str, to make one "
                f"session from it; it raised {type(err).__name__}: {str(err)[:200]}"
            ) from err
        made = len(sessions)
        for batch, want in zip(batches, wants):
            try:
                out = predictor(batch)
            except Exception as err:  # the learner's __call__
                raise Wrong(
                    f"on a batch of {batch.num_rows} rows, __call__ raised {type(err).__name__}: "
                    f"{str(err)[:200]}"
                ) from err
            _judge_top2(out, want, batch.num_rows)
        per_batch = len(sessions) - made
    if made != 1:
        raise Wrong(f"expected __init__ to make one InferenceSession, it made {made}")
    if per_batch:
        raise Wrong(
            f"__call__ made {per_batch} new InferenceSession(s) over {len(batches)} batches: make it "
            "once in __init__ and reuse it"
        )
    return [
        f"top-2 digits and probabilities right on {sum(b.num_rows for b in batches)} rows in "
        f"{len(batches)} batches you had not seen, with a model of the checker's own",
        "the ids kept in the batch's order; one session for the actor's whole life",
    ]


def made_up_job(rng) -> tuple[np.ndarray, np.ndarray, dict]:
    """(expected ids, written ids, the right audit) with rows lost, duplicated and unexpected."""
    expected = rng.choice(10**6, int(rng.integers(200, 400)), replace=False).astype(np.int64)
    lost = rng.choice(expected, int(rng.integers(1, 6)), replace=False)
    kept = expected[~np.isin(expected, lost)]
    twice = rng.choice(kept, int(rng.integers(1, 5)), replace=False)
    thrice = rng.choice(twice, 1)
    strangers = np.setdiff1d(rng.choice(10**6, 4, replace=False), expected)[
        : int(rng.integers(1, 4))
    ]
    written = np.concatenate([kept, twice, thrice, strangers])
    rng.shuffle(written)
    audit = {
        "missing": sorted(map(int, lost)),
        "duplicated": sorted(map(int, twice)),
        "unexpected": sorted(map(int, strangers)),
    }
    return expected, written, audit


def _as_int_list(value, key: str) -> list:
    if isinstance(value, (set, frozenset)):
        raise Wrong(
            f"expected {key!r} as a sorted list of ints, got a {type(value).__name__}: it has no order"
        )
    try:
        items = list(value)
    except TypeError as err:
        raise Wrong(f"expected {key!r} as a list of ints, got {type(value).__name__}") from err
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        raise Wrong(
            f"expected {key!r} as a list of ints, got items of type "
            f"{sorted({type(v).__name__ for v in items})}"
        )
    return [int(v) for v in items]


def check_audit(answer):
    require_callable(answer, "audit(expected_ids, written_ids)")
    rng = _common.rng(1)  # the jobs, new with each seed
    cases = [made_up_job(rng) for _ in range(3)]
    clean = rng.choice(10**6, 50, replace=False).astype(np.int64)
    cases.append(
        (clean, rng.permutation(clean), {"missing": [], "duplicated": [], "unexpected": []})
    )
    for kind in (np.asarray, list):  # numpy arrays and plain lists both
        for expected, written, truth in cases:
            try:
                got = answer(kind(expected), kind(written))
            except Exception as err:  # the learner's function
                raise Wrong(f"audit raised {type(err).__name__}: {str(err)[:200]}") from err
            if not isinstance(got, dict) or any(k not in got for k in truth):
                raise Wrong(
                    f"expected a dict with the keys {list(truth)}, got "
                    f"{list(got) if isinstance(got, dict) else type(got).__name__}"
                )
            what = (
                "a job with nothing wrong"
                if not any(truth.values())
                else "a job with rows lost, repeated and unexpected"
            )
            for key, want in truth.items():
                value = _as_int_list(got[key], key)
                if value == want:
                    continue
                if sorted(set(value)) == want:
                    raise Wrong(
                        f"{key!r} on {what}: the right ids, but "
                        + (
                            "listed more than once"
                            if len(value) > len(set(value))
                            else "not sorted"
                        )
                    )
                extra, short = sorted(set(value) - set(want)), sorted(set(want) - set(value))
                raise Wrong(
                    f"{key!r} on {what}: {len(extra)} id(s) that do not belong there, "
                    f"{len(short)} missing from it"
                )
    return [
        f"missing, duplicated and unexpected ids right on {len(cases)} made-up jobs, from numpy arrays "
        "and from lists"
    ]


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {"09.1": check_top2, "09.2": check_audit}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)
# The checks run them without starting Ray, as Ray Data would call them.


class Top2:
    """A ``map_batches`` callable: one session per actor, the two most probable digits of each row."""

    def __init__(self, model_path):
        import onnxruntime as ort

        # the file, opened by this actor (again whenever Ray restarts it)
        self.session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])

    def __call__(self, batch):
        pixels = batch["pixels"].combine_chunks().flatten().to_numpy().reshape(-1, 1, 28, 28)
        logits = self.session.run(["logits"], {"image": pixels.astype(np.float32) / 255})[0]
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities = exp / exp.sum(axis=1, keepdims=True)  # a softmax over each row
        order = np.argsort(probabilities, axis=1)[:, ::-1]  # most probable first
        rows = np.arange(len(order))
        return {
            "id": batch["id"].to_numpy(),
            "top1": order[:, 0],
            "top2": order[:, 1],
            "p1": probabilities[rows, order[:, 0]],
            "p2": probabilities[rows, order[:, 1]],
        }


def audit(expected_ids, written_ids) -> dict:
    """Ids expected but never written, written more than once, and written but never expected (sorted)."""
    expected = np.asarray(expected_ids, dtype=np.int64)
    written, counts = np.unique(np.asarray(written_ids, dtype=np.int64), return_counts=True)
    return {
        "missing": np.setdiff1d(expected, written).tolist(),
        "duplicated": written[counts > 1].tolist(),
        "unexpected": np.setdiff1d(written, expected).tolist(),
    }


def solve_1(workdir: Path):
    return Top2


def solve_2(workdir: Path):
    return audit
