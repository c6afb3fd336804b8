"""Notebook 09's exercises, run without Ray as Ray Data would call them, on digits and jobs the learner never saw."""

from __future__ import annotations

from unittest import mock

import numpy as np

from helpers.grading.examiner import (
    Case,
    Exercise,
    Mistake,
    Requirement,
    fresh_folder,
    numbers_in,
    same,
)

# --- 09.1 Top two digits ---------------------------------------------------------------------------------------

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
    # not sorted, not contiguous
    ids = rng.choice(10**9, len(images), replace=False).astype(np.int64)
    table = shard_table(images, rng.integers(0, 10, len(images)), ids)
    table = table.select(["pixels", "label", "id"])  # another column order
    # a batch of several chunks
    return [table.slice(0, 433), table.slice(433, 1), table.slice(434)] + [
        pa.Table.from_batches(table.slice(0, 50).to_batches(max_chunksize=20))
    ]


def _expected(model: bytes, batch) -> dict:
    """The probabilities of every digit of each row, computed apart from any answer (ties judged on them)."""
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    pixels = np.asarray(batch.column("pixels").to_pylist(), np.uint8).reshape(-1, 1, 28, 28)
    logits = session.run(["logits"], {"image": pixels.astype(np.float32) / 255})[0]
    logits = logits.astype(np.float64)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    return {"ids": batch.column("id").to_numpy(), "probs": probs / probs.sum(1, keepdims=True)}


def top2_cases(rng):
    """A model and a file name of the check's own, and 4 batches of 433, 1, 266 and 50 rows (that one in several
    chunks) of shifted test digits with shuffled ids: all new with each seed."""
    model = random_mlp_bytes(int(rng.integers(1 << 30)))
    batches = unseen_batches(int(rng.integers(1 << 30)))
    # a path, as the notebook passes it: fn_constructor_args=(str(model_path),)
    path = fresh_folder("model-") / f"checker_{int(rng.integers(1 << 30))}.onnx"
    path.write_bytes(model)
    return [
        Case(
            f"a batch of {batch.num_rows} row(s)"
            + (
                f" in {batch['pixels'].num_chunks} chunks" if batch["pixels"].num_chunks > 1 else ""
            ),
            (str(path), batch),
            _expected(model, batch),
        )
        for batch in batches
    ]


def run_top2(answer, case: Case) -> dict:
    """``answer(model_path)`` then its call on the case's batch, as an actor of Ray Data makes and calls it, the
    InferenceSessions it makes counted. A constructor that raises is an outcome of its own (what the path is)."""
    import onnxruntime as ort

    if not isinstance(answer, type):
        kind = type(answer).__name__
        return {
            "class": f"an instance of {kind}"
            if callable(answer) and kind != "function"
            else f"a {kind}"
        }
    path, batch = case.args
    sessions, original = [], ort.InferenceSession.__init__

    def counted(session, *args, **kwargs):  # the real InferenceSession, counted
        sessions.append(session)
        return original(session, *args, **kwargs)

    with mock.patch.object(ort.InferenceSession, "__init__", counted):
        try:
            predictor = answer(path)
        except Exception as err:  # the learner's constructor: what it raised is its outcome
            return {"class": None, "init raised": f"{type(err).__name__}: {str(err)[:200]}"}
        made = len(sessions)
        out = predictor(batch)
        return {
            "class": None,
            "init raised": None,
            "made": made,
            "per call": len(sessions) - made,
            "out": out,
        }


def _a_class(case, got, want):
    return (
        None
        if got["class"] is None
        else f"got {got['class']}: pass the class itself, as map_batches takes it"
    )


def _opens_the_path(case, got, want):
    if got["init raised"] is None:
        return None
    return (
        f"Top2(model_path), given the path of an .onnx file as a str, raised {got['init raised']}"
    )


def _one_session(case, got, want):
    if got["made"] != 1:
        return f"expected __init__ to make one InferenceSession, it made {got['made']}"
    if got["per call"]:
        return f"__call__ made {got['per call']} new InferenceSession(s) on one batch"
    return None


def _a_dict(case, got, want):
    out = got["out"]
    if not isinstance(out, dict):
        return f"expected __call__ to return a dict of numpy arrays, got {type(out).__name__}"
    missing = [k for k in TOP2_KEYS if k not in out]
    return f"expected the keys {list(TOP2_KEYS)}, missing {missing}" if missing else None


def _one_per_row(case, got, want):
    n = case.args[1].num_rows
    for key in TOP2_KEYS:
        try:
            shape = np.asarray(got["out"][key]).shape
        except Exception:  # a value numpy cannot take
            return f"expected {key!r} as a numpy array, got {type(got['out'][key]).__name__}"
        if shape != (n,):
            return f"expected {key!r} with one value per row ({n} rows), got shape {list(shape)}"
    return None


def _column(got, key):
    return np.asarray(got["out"][key])


def _batch_ids(case, got, want):
    ids, wanted = _column(got, "id"), case.data["ids"]
    if np.array_equal(ids, wanted):
        return None
    if np.array_equal(np.sort(ids), np.sort(wanted)):
        return "the batch's ids, in another order"
    return "ids that are not the batch's"


def _probabilities(case, got, want):
    for key in ("p1", "p2"):
        values = _column(got, key).astype(np.float64)
        if not ((values >= 0) & (values <= 1)).all():
            return f"{key} holds values outside 0..1"
    return None


def _digits(got, key):
    values = _column(got, key)
    if not np.isin(values, np.arange(10)).all():
        return None, f"expected {key} as digits 0..9, got other values (dtype {values.dtype})"
    return values.astype(np.int64), None


def _top1(case, got, want):
    top1, differs = _digits(got, "top1")
    if differs:
        return differs
    probs = case.data["probs"]
    rows = np.arange(len(probs))
    # a digit is right when its probability is the highest (ties between equal probabilities accepted)
    wrong = probs[rows, top1] < probs.max(axis=1) - 1e-9
    return (
        f"top1 is not the most probable digit on {wrong.mean():.0%} of the rows"
        if wrong.any()
        else None
    )


def _top2(case, got, want):
    top2, differs = _digits(got, "top2")
    if differs:
        return differs
    if (top2 == _column(got, "top1")).any():
        return "top2 equals top1 on some rows"
    probs = case.data["probs"]
    second = np.sort(probs, axis=1)[:, -2]
    wrong = np.abs(probs[np.arange(len(probs)), top2] - second) > 1e-9
    return (
        f"top2 is not the second most probable digit on {wrong.mean():.0%} of the rows"
        if wrong.any()
        else None
    )


def _softmax_per_row(case, got, want):
    """p1 and p2 each the probability of one of the row's two most probable digits."""
    ordered = np.sort(case.data["probs"], axis=1)
    first, second = ordered[:, -1], ordered[:, -2]
    for key in ("p1", "p2"):
        value = _column(got, key).astype(np.float64)
        near = np.isclose(value, first, rtol=1e-4, atol=1e-6) | np.isclose(
            value, second, rtol=1e-4, atol=1e-6
        )
        if not near.all():
            return f"{key} differs from a softmax over each row's 10 logits on {1 - near.mean():.0%} of the rows"
    return None


def _paired(case, got, want):
    ordered = np.sort(case.data["probs"], axis=1)
    for key, column, label in (("p1", -1, "top1"), ("p2", -2, "top2")):
        if not np.allclose(
            _column(got, key).astype(np.float64), ordered[:, column], rtol=1e-4, atol=1e-6
        ):
            return f"{key} is not the probability of {label} on some rows"
    return None


def _top2_secrets(outcomes) -> list[str]:
    """The first probabilities of each batch, however printed."""
    return [text for o in outcomes for text in numbers_in([float(p) for p in o["out"]["p1"][:10]])]


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


def _pixels(batch):
    return np.asarray(batch.column("pixels").to_pylist(), np.float32).reshape(-1, 1, 28, 28) / 255


# argpartition and a float64 softmax, InferenceSession imported by name, the file read then parsed, an extra key
class Top2WithPartition:
    def __init__(self, model_path):
        from pathlib import Path

        from onnxruntime import InferenceSession

        self.session = InferenceSession(Path(model_path).read_bytes())
        self.output = self.session.get_outputs()[0].name

    def __call__(self, batch):
        logits = self.session.run(
            [self.output], {self.session.get_inputs()[0].name: _pixels(batch)}
        )[0]
        logits = logits.astype(np.float64)
        p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
        rows = np.arange(len(p))
        two = np.argpartition(-p, 1, axis=1)[:, :2]
        first = np.where(p[rows, two[:, 0]] >= p[rows, two[:, 1]], two[:, 0], two[:, 1])
        second = np.where(first == two[:, 0], two[:, 1], two[:, 0])
        return {
            "id": np.array(batch.column("id").to_pylist()),
            "top1": first,
            "top2": second,
            "p1": p[rows, first],
            "p2": p[rows, second],
            "extra": np.zeros(len(p)),
        }


# a Python loop over the rows, lists instead of arrays
class Top2RowByRow:
    def __init__(self, model_path):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])

    def __call__(self, batch):
        logits = self.session.run(None, {"image": _pixels(batch)})[0]
        out = {"id": [], "top1": [], "top2": [], "p1": [], "p2": []}
        for row_id, row in zip(batch.column("id").to_pylist(), logits):
            p = np.exp(row - row.max())
            p /= p.sum()
            a, b = np.argsort(p)[-1], np.argsort(p)[-2]
            for key, value in zip(out, (row_id, a, b, p[a], p[b])):
                out[key].append(value)
        return out


def _broken(name: str, change, init=Top2.__init__) -> type:
    """Top2 with one requirement broken by ``change(out, batch, self)``."""

    def call(self, batch):
        return change(dict(Top2.__call__(self, batch)), batch, self)

    return type(name, (Top2,), {"__init__": init, "__call__": call})


def _softmax_over_batch(out, batch, self):
    logits = self.session.run(["logits"], {"image": _pixels(batch)})[0]
    p = np.exp(logits - logits.max(0)) / np.exp(logits - logits.max(0)).sum(0)
    rows = np.arange(len(p))
    return {**out, "p1": p[rows, out["top1"]], "p2": p[rows, out["top2"]]}


def _new_session_per_batch(out, batch, self):
    import onnxruntime as ort

    ort.InferenceSession(self.model_path)
    return out


def _keep_path(self, model_path):
    Top2.__init__(self, model_path)
    self.model_path = model_path


def _wants_bytes(self, model_bytes):  # the model expected as bytes, not as a path
    import onnxruntime as ort

    self.session = ort.InferenceSession(bytes(model_bytes))


CLASS, PATH, SESSION = (
    "the class Top2 itself",
    "Top2(model_path) opens the file at model_path",
    "one InferenceSession per actor, made in __init__",
)
DICT, ROWS, IDS = (
    "a dict of id, top1, top2, p1, p2",
    "one value per row of the batch",
    "the batch's ids, in the batch's order",
)
PROBABILITIES, TOP1, TOP2 = (
    "p1, p2 probabilities",
    "top1 the most probable digit",
    "top2 the second most probable digit",
)
SOFTMAX, PAIRED = "a softmax over each row's 10 logits", "p1 the probability of top1, p2 of top2"

TOP_TWO = Exercise(
    id="09.1",
    expects="your class Top2 (the class itself, as map_batches takes it)",
    reference=Top2,
    cases=top2_cases,
    run=run_top2,
    requirements=[
        Requirement(CLASS, _a_class),
        Requirement(PATH, _opens_the_path),
        Requirement(SESSION, _one_session),
        Requirement(DICT, _a_dict),
        Requirement(ROWS, _one_per_row),
        Requirement(IDS, _batch_ids),
        Requirement(PROBABILITIES, _probabilities),
        Requirement(TOP1, _top1),
        Requirement(TOP2, _top2),
        Requirement(SOFTMAX, _softmax_per_row),
        Requirement(PAIRED, _paired),
    ],
    mistakes=[
        Mistake(
            "an instance, not the class",
            Top2.__new__(Top2),
            "got an instance of Top2: pass the class itself, as map_batches takes it (Ray makes one per actor)",
            CLASS,
        ),
        Mistake(
            "the model given as bytes",
            _broken("Top2FromBytes", lambda o, b, s: o, _wants_bytes),
            "your __init__ raised on the path it was given: Top2 gets the path of the .onnx file, as a str, and "
            "opens the session from it",
            PATH,
        ),
        Mistake(
            "a new session per batch",
            _broken("Top2NewSessions", _new_session_per_batch, _keep_path),
            "__call__ makes a new InferenceSession on each batch: make it once in __init__ and reuse it",
            SESSION,
        ),
        Mistake(
            "a list returned",
            _broken("Top2List", lambda o, b, s: list(o.values())),
            "__call__ returns a list: return a dict of numpy arrays, one per column",
            DICT,
        ),
        Mistake(
            "the id column dropped",
            _broken("Top2NoIds", lambda o, b, s: {k: v for k, v in o.items() if k != "id"}),
            "the dict has no 'id': keep the id column",
            DICT,
        ),
        Mistake(
            "one value for the whole batch",
            _broken("Top2OneValue", lambda o, b, s: {**o, "p1": o["p1"][:1]}),
            "p1 holds one value, not one per row of the batch",
            ROWS,
        ),
        Mistake(
            "ids in another order",
            _broken("Top2Reversed", lambda o, b, s: {**o, "id": o["id"][::-1]}),
            "the batch's ids, in another order: keep the batch's order, row by row",
            IDS,
        ),
        Mistake(
            "ids numbered anew",
            _broken("Top2Numbered", lambda o, b, s: {**o, "id": np.arange(len(o["id"]))}),
            "the ids are not the batch's: return batch['id'] as it came",
            IDS,
        ),
        Mistake(
            "logits, not probabilities",
            _broken("Top2Logits", lambda o, b, s: {**o, "p1": o["p1"] * 40 - 3}),
            "p1 holds values outside 0..1: probabilities are a softmax over each row's 10 logits",
            PROBABILITIES,
        ),
        Mistake(
            "top1 and top2 swapped",
            _broken("Top2Swapped", lambda o, b, s: {**o, "top1": o["top2"], "top2": o["top1"]}),
            "top1 holds the second most probable digits: top1 is the most probable one",
            TOP1,
        ),
        Mistake(
            "top2 the same digit as top1",
            _broken("Top2Twice", lambda o, b, s: {**o, "top2": o["top1"]}),
            "top2 equals top1: top2 is the second most probable digit, another one",
            TOP2,
        ),
        Mistake(
            "top2 the next digit",
            _broken("Top2Next", lambda o, b, s: {**o, "top2": (o["top1"] + 1) % 10}),
            "top2 is not the second most probable digit: sort each row's probabilities",
            TOP2,
        ),
        Mistake(
            "a softmax over the batch",
            _broken("Top2OverBatch", _softmax_over_batch),
            "the probabilities are a softmax over the batch (axis 0): take it over each row's 10 logits (axis 1)",
            SOFTMAX,
        ),
        Mistake(
            "p2 the probability of top1",
            _broken("Top2SameP", lambda o, b, s: {**o, "p2": o["p1"]}),
            "p2 holds the probability of top1: p2 goes with top2",
            PAIRED,
        ),
        Mistake(
            "p1 the probability of top2",
            _broken("Top2OtherP", lambda o, b, s: {**o, "p1": o["p2"]}),
            "p1 holds the probability of top2: p1 goes with top1",
            PAIRED,
        ),
    ],
    alternatives=[Top2WithPartition, Top2RowByRow],
    secrets=_top2_secrets,
    setup="import numpy as np",
)


# --- 09.2 Audit a job ------------------------------------------------------------------------------------------

AUDIT_KEYS = ("missing", "duplicated", "unexpected")


def made_up_job(rng) -> tuple[np.ndarray, np.ndarray]:
    """(expected ids, written ids) with rows lost, duplicated and unexpected, counts and ids new with each seed."""
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
    return expected, written


def stopped_job(rng) -> tuple[np.ndarray, np.ndarray]:
    """(expected ids, written ids) of a job that stopped early: row ids in a row, the last ones never written
    (the largest ids: the edge of "expected but never written"), one row written twice, in the order written."""
    start, count = int(rng.integers(0, 10**5)), int(rng.integers(50, 150))
    expected = np.arange(start, start + count, dtype=np.int64)
    written = expected[: -int(rng.integers(1, 6))]
    again = written[int(rng.integers(len(written)))]
    return expected, np.append(written, again)


def audit_cases(rng):
    """Three made-up jobs with rows lost, repeated and unexpected, one that stopped early (its last ids lost), and
    one with nothing wrong: each given as numpy arrays and as plain lists."""
    jobs = [("a job with rows lost, repeated and unexpected", *made_up_job(rng)) for _ in range(3)]
    jobs.append(("a job that stopped early, its last ids never written", *stopped_job(rng)))
    clean = rng.choice(10**6, int(rng.integers(30, 80)), replace=False).astype(np.int64)
    jobs.append(("a job with nothing wrong", clean, rng.permutation(clean)))
    return [
        Case(
            f"{what} ({len(written)} ids written, as {kind})", (convert(expected), convert(written))
        )
        for kind, convert in (("numpy arrays", np.asarray), ("lists", lambda ids: ids.tolist()))
        for what, expected, written in jobs
    ]


def _audit_dict(case, got, want):
    if isinstance(got, dict) and all(key in got for key in AUDIT_KEYS):
        return None
    return f"expected a dict with the keys {list(AUDIT_KEYS)}, got " + (
        f"the keys {list(got)}" if isinstance(got, dict) else type(got).__name__
    )


def _kind(value) -> str:
    if isinstance(value, np.ndarray):
        return "a numpy array"
    if isinstance(value, (set, frozenset)):
        return f"a {type(value).__name__} (it has no order)"
    return f"a {type(value).__name__}"


def _int_lists(case, got, want):
    for key in AUDIT_KEYS:
        value = got[key]
        if not isinstance(value, list):
            return f"expected {key!r} as a list of ints, got {_kind(value)}"
        kinds = sorted({type(v).__name__ for v in value if type(v) is not int})
        if kinds:
            return f"expected {key!r} as a list of Python ints, got items of type {kinds}"
    return None


def _typed(outcome):
    """What kinds an audit holds: the type of each value and of its items (numpy arrays and lists of numpy ints
    compare equal as values)."""
    if not isinstance(outcome, dict):
        return type(outcome).__name__
    return {
        key: (
            type(v).__name__,
            sorted({type(i).__name__ for i in v}) if hasattr(v, "__iter__") else None,
        )
        for key, v in outcome.items()
    }


def _alike_audits(a, b) -> bool:
    return _typed(a) == _typed(b) and same(a, b)


def _sorted(case, got, want):
    unsorted = [key for key in AUDIT_KEYS if got[key] != sorted(got[key])]
    return f"{', '.join(map(repr, unsorted))} not sorted" if unsorted else None


def _listed_once(case, got, want):
    repeated = [key for key in AUDIT_KEYS if len(set(got[key])) != len(got[key])]
    return f"{', '.join(map(repr, repeated))}: some ids listed more than once" if repeated else None


def _ids_of(key):
    def judge(case, got, want):
        if got[key] == want[key]:
            return None
        extra, short = set(got[key]) - set(want[key]), set(want[key]) - set(got[key])
        said = f"{len(extra)} id(s) that do not belong there, {len(short)} missing from it"
        written = list(case.args[1])
        if short and written and min(short) > max(written):
            said += ", each larger than every id written"
        return said

    return judge


def audit(expected_ids, written_ids) -> dict:
    """Ids expected but never written, written more than once, and written but never expected (sorted)."""
    expected = np.asarray(expected_ids, dtype=np.int64)
    written, counts = np.unique(np.asarray(written_ids, dtype=np.int64), return_counts=True)
    return {
        "missing": np.setdiff1d(expected, written).tolist(),
        "duplicated": written[counts > 1].tolist(),
        "unexpected": np.setdiff1d(written, expected).tolist(),
    }


# collections.Counter, sets, plain ints, an extra key
def audit_with_counter(expected_ids, written_ids):
    from collections import Counter

    counts = Counter(int(i) for i in written_ids)
    expected = {int(i) for i in expected_ids}
    return {
        "missing": sorted(expected - counts.keys()),
        "duplicated": sorted(i for i, n in counts.items() if n > 1),
        "unexpected": sorted(counts.keys() - expected),
        "note": "extra keys are fine",
    }


def _numpy_arrays(e, w):  # the ids left as numpy arrays (the text asks for lists of ints)
    expected, written = np.asarray(e), np.asarray(w)
    ids, counts = np.unique(written, return_counts=True)
    return {
        "missing": np.setdiff1d(expected, ids),
        "duplicated": ids[counts >= 2],
        "unexpected": ids[~np.isin(ids, expected)],
    }


def _dup_every_time(e, w):
    ids, counts = np.unique(np.asarray(w), return_counts=True)
    return {
        **audit(e, w),
        "duplicated": sorted(int(i) for i, n in zip(ids, counts) for _ in range(n - 1)),
    }


def _swapped(e, w):
    right = audit(e, w)
    return {**right, "missing": right["unexpected"], "unexpected": right["missing"]}


DICT_KEYS, INT_LISTS, SORTED, ONCE = (
    "a dict with the keys missing, duplicated, unexpected",
    "each a list of ints",
    "each sorted",
    "each id listed once",
)
MISSING, DUPLICATED, UNEXPECTED = (
    "missing: the ids expected but never written",
    "duplicated: the ids written more than once",
    "unexpected: the ids written but never expected",
)

AUDIT = Exercise(
    id="09.2",
    expects="your function audit(expected_ids, written_ids)",
    reference=audit,
    cases=audit_cases,
    requirements=[
        Requirement(DICT_KEYS, _audit_dict),
        Requirement(INT_LISTS, _int_lists),
        Requirement(SORTED, _sorted),
        Requirement(ONCE, _listed_once),
        Requirement(MISSING, _ids_of("missing")),
        Requirement(DUPLICATED, _ids_of("duplicated")),
        Requirement(UNEXPECTED, _ids_of("unexpected")),
    ],
    mistakes=[
        Mistake(
            "one key only",
            lambda e, w: {"missing": audit(e, w)["missing"]},
            "the dict has 'missing' only: return all three keys",
            DICT_KEYS,
        ),
        Mistake(
            "sets",
            lambda e, w: {k: set(v) for k, v in audit(e, w).items()},
            "got sets: a set has no order; return sorted lists",
            INT_LISTS,
        ),
        Mistake(
            "numpy arrays",
            _numpy_arrays,
            "got numpy arrays: return lists of Python ints (an array's .tolist() gives them)",
            INT_LISTS,
        ),
        Mistake(
            "lists of numpy ints",
            lambda e, w: {k: [np.int64(i) for i in v] for k, v in audit(e, w).items()},
            "got lists of numpy int64: return Python ints (int(i), or an array's .tolist())",
            INT_LISTS,
        ),
        Mistake(
            "ids as strings",
            lambda e, w: {k: [str(i) for i in v] for k, v in audit(e, w).items()},
            "got ids as str: return them as ints",
            INT_LISTS,
        ),
        Mistake(
            "in reverse order",
            lambda e, w: {k: v[::-1] for k, v in audit(e, w).items()},
            "the ids in descending order: sort them from the smallest",
            SORTED,
        ),
        Mistake(
            "a duplicate listed once per extra copy",
            _dup_every_time,
            "'duplicated' lists an id once per extra copy: list each duplicated id once",
            ONCE,
        ),
        Mistake(
            "nothing missing",
            lambda e, w: {**audit(e, w), "missing": []},
            "'missing' is empty on a job that lost rows: list the expected ids never written",
            MISSING,
        ),
        Mistake(
            "missing and unexpected swapped",
            _swapped,
            "'missing' holds the ids written but never expected, 'unexpected' those never written: swapped",
            MISSING,
        ),
        Mistake(
            "nothing duplicated",
            lambda e, w: {**audit(e, w), "duplicated": []},
            "'duplicated' is empty on a job that wrote some ids twice: list the ids written more than once",
            DUPLICATED,
        ),
        Mistake(
            "nothing unexpected",
            lambda e, w: {**audit(e, w), "unexpected": []},
            "'unexpected' is empty on a job that wrote ids never expected: list them",
            UNEXPECTED,
        ),
    ],
    alternatives=[audit_with_counter],
    alike=_alike_audits,
    setup="import numpy as np",
)

EXERCISES = [TOP_TWO, AUDIT]
