"""Notebook 00's exercises (inside an .onnx file): a classifier built by hand, a numpy interpreter, and which
tool notices a broken model first."""

from __future__ import annotations

import ast
import functools
import os
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

from helpers.grading.examiner import Case, Exercise, Mistake, Raised, Requirement, same

# --- 00.1 A linear classifier by hand ------------------------------------------------------------------------


def linear_classifier():
    """softmax(x @ W.T + b): Gemm reads W as stored [out, in] with transB=1, then Softmax over the last axis."""
    from onnx import TensorProto, helper, numpy_helper

    W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    b = np.array([0.1, -0.2, 0.3], np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W", "b"], ["scores"], transB=1),
            helper.make_node("Softmax", ["scores"], ["probabilities"]),
        ],
        "linear_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


def given_weights():
    """W and b as the exercise's text gives them (W stored [out, in], PyTorch's layout)."""
    W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    return W, np.array([0.1, -0.2, 0.3], np.float32)


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def classifier_cases(rng):
    """Fresh x (the learner never saw them): a batch of 1 and a batch of 2 to 8, new with each seed."""
    W, b = given_weights()
    n = int(rng.integers(2, 9))
    x = rng.standard_normal((n, 4)).astype(np.float32)
    return [
        Case(f"a fresh x, a batch of {len(rows)}", (rows,), _softmax(rows @ W.T + b))
        for rows in (x[:1], x)
    ]


def _a_model(answer) -> bool:
    from onnx import ModelProto

    return isinstance(answer, (ModelProto, str, os.PathLike))


def _declaration(value_info):
    """A value's declared type and dims: a name, a size, or None for a dynamic dimension without a name
    (dims None: no shape declared)."""
    from onnx import TensorProto

    tensor = value_info.type.tensor_type
    kind = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64"}.get(tensor.elem_type) or (
        TensorProto.DataType.Name(tensor.elem_type) if tensor.elem_type else "no type"
    )
    if not tensor.HasField("shape"):
        return {"type": kind, "dims": None}
    dims = [
        d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in tensor.shape.dim
    ]
    return {"type": kind, "dims": dims}


def _built(answer, case):
    """What the learner's model declares and holds, check_model's verdict, and ONNX Runtime's output on the case's
    x (its error, if it refuses the model)."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = answer if isinstance(answer, onnx.ModelProto) else onnx.load(Path(answer))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    gemms = [n for n in graph.node if n.op_type == "Gemm"]
    arrays = {name: numpy_helper.to_array(init) for name, init in inits.items()}
    gemm = None
    if gemms:
        node, W, b = gemms[0], *given_weights()
        B = arrays.get(node.input[1]) if len(node.input) > 1 else None
        C = arrays.get(node.input[2]) if len(node.input) > 2 else None
        gemm = {
            "B": None if B is None else list(B.shape),
            "transB": {a.name: a.i for a in node.attribute}.get("transB", 0),
            "C": None if C is None else list(C.shape),
            "W as given": B is not None and B.shape == W.shape and bool(np.allclose(B, W)),
            "b as given": C is not None and C.size == 3 and bool(np.allclose(C.reshape(3), b)),
        }
    try:
        onnx.checker.check_model(model, full_check=True)
        refused = None
    # ValidationError, InferenceError: what the checker says is the feedback
    except Exception as err:
        refused = " ".join(str(err).split())[:300]
    try:
        quiet = ort.SessionOptions()
        quiet.log_severity_level = 4  # what it says of the model is in the feedback, not on stderr
        session = ort.InferenceSession(
            model.SerializeToString(), quiet, providers=["CPUExecutionProvider"]
        )
        output = session.run(None, {inputs[0].name: case.args[0]})[0]
    except Exception as err:  # whatever ONNX Runtime says of a model it refuses or cannot run
        output = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
    return {
        "inputs": [i.name for i in inputs],
        "outputs": [o.name for o in graph.output],
        "x": _declaration(inputs[0]) if inputs else None,
        "y": _declaration(graph.output[0]) if graph.output else None,
        "stored as": {name: str(a.dtype) for name, a in arrays.items()},
        "ops": [n.op_type for n in graph.node],
        "gemm": gemm,
        "check_model": refused,
        "probabilities": output,
    }


def _shown(dims) -> str:
    """Dims as the learner declared them, a dynamic dimension without a name said so (never as a 0)."""
    if dims is None:
        return "no shape at all"
    return (
        "["
        + ", ".join("a dynamic dimension without a name" if d is None else repr(d) for d in dims)
        + "]"
    )


def _names(case, got, want):
    if got["inputs"] == ["x"] and got["outputs"] == ["probabilities"]:
        return None
    return (
        f"expected input 'x' and output 'probabilities', found inputs {got['inputs']} and outputs "
        f"{got['outputs']}"
    )


def _declared(got, key, what, width):
    declared = got[key]
    if declared["type"] != "float32":
        return f"expected the {what} declared float32 (TensorProto.FLOAT), found {declared['type']}"
    dims = declared["dims"]
    if dims is None or len(dims) != 2 or dims[1] != width:
        return f"expected the {what} of shape [batch, {width}], found {_shown(dims)}"
    if dims[0] is None:
        return (
            f"the batch dimension of the {what} is dynamic but has no name: name it (as in [batch, {width}]), "
            "the same name in the input and the output"
        )
    if not isinstance(dims[0], str):
        return (
            f"expected the {what} of shape [batch, {width}], its batch dimension a name (dynamic: any size); "
            f"found {_shown(dims)}"
        )
    return None


def _input_declared(case, got, want):
    return _declared(got, "x", "input 'x'", 4)


def _output_declared(case, got, want):
    differs = _declared(got, "y", "output 'probabilities'", 3)
    if differs is not None:
        return differs
    batch, theirs = got["x"]["dims"][0], got["y"]["dims"][0]
    if theirs == batch:
        return None
    return (
        f"the output declares its batch dimension {theirs!r} and the input {batch!r}: the same name says they "
        "are the same size, as in [batch, 4] -> [batch, 3]"
    )


def _float32_initializers(case, got, want):
    other = {name: kind for name, kind in got["stored as"].items() if kind != "float32"}
    if not other:
        return None
    return f"the initializers {other} are not float32; the task gives W and b as float32"


def _gemm_softmax(case, got, want):
    if sorted(got["ops"]) == ["Gemm", "Softmax"]:
        return None
    return f"expected one Gemm (no MatMul or Add) and one Softmax for the probabilities; your nodes are {got['ops']}"


def _w_as_stored(case, got, want):
    gemm = got["gemm"]
    if gemm["B"] == [3, 4] and gemm["transB"]:
        return None
    return (
        "Gemm computes A @ B (A @ B.T with transB=1): B should be the initializer W as given, stored [3, 4] "
        f"([out, in]), with transB=1; yours is {gemm['B']} with transB={gemm['transB']}"
    )


def _check_model(case, got, want):
    if got["check_model"] is None:
        return None
    return (
        f"onnx.checker.check_model(model, full_check=True) refuses the model: {got['check_model']}"
    )


def _values_given(case, got, want):
    gemm = got["gemm"]
    if not gemm["W as given"]:
        return "the initializer Gemm reads as W differs from the exercise's W: store it with exactly the values given"
    if gemm["C"] not in ([3], [1, 3]):
        shape = "none" if gemm["C"] is None else f"the shape {gemm['C']}"
        return f"Gemm's third input (C) should be the initializer b, shape [3]; yours has {shape}"
    if not gemm["b as given"]:
        return "Gemm's third input (C) should be the initializer b with exactly the values given; yours has other values"
    return None


def _rows_sum_to_one(case, got, want):
    output = got["probabilities"]
    if isinstance(output, str):
        return f"on {case.name}, ONNX Runtime cannot run your model: {output}"
    if np.shape(output) == np.shape(case.data) and np.allclose(output.sum(axis=-1), 1, atol=1e-5):
        return None
    return (
        f"on {case.name}, the output's rows do not each sum to 1: the Softmax should normalise each row's 3 scores "
        "(axis=-1, the default)"
    )


def _probabilities(case, got, want):
    if np.allclose(got["probabilities"], case.data, rtol=1e-5, atol=1e-6):
        return None
    row = int(
        np.argmax(~np.isclose(got["probabilities"], case.data, rtol=1e-5, atol=1e-6).all(axis=1))
    )
    return f"on {case.name}, the output differs from softmax(x @ W.T + b), first in row {row}"


def _classifier_secrets(outcomes):
    """The probabilities the reference computes, as feedback could print them."""
    return [
        text
        for outcome in outcomes
        for v in np.ravel(outcome["probabilities"])
        for text in (f"{v:.3f}", f"{v:.4f}")
    ]


def _file_hint(raised: Raised, case: Case) -> str:
    """For a path onnx.load cannot read: what 00.1 takes instead."""
    if raised.type in ("FileNotFoundError", "IsADirectoryError", "DecodeError", "PermissionError"):
        return "pass the ModelProto itself, or the path of an .onnx file onnx.load reads"
    return ""


def classifier(
    W=None,
    b=None,
    transB=1,
    ops=("Gemm", "Softmax"),
    output="probabilities",
    batch="batch",
    softmax_axis=None,
    x_name="x",
    x_type=None,
    x_shape=None,
    out_type=None,
    out_shape="default",
    out_batch=None,
    **gemm_attrs,
):
    """An answer to 00.1 built another way than the reference (the weights' inputs after the previous node's output),
    right by default; each argument makes one mistake a learner made."""
    from onnx import TensorProto, helper, numpy_helper

    W0, b0 = given_weights()
    W, b = W0 if W is None else W, b0 if b is None else b
    weights = {"Gemm": ["W", "b"], "MatMul": ["W"], "Add": ["b"]}
    attributes = {
        "Gemm": dict(transB=transB, **gemm_attrs),
        "Softmax": {} if softmax_axis is None else {"axis": softmax_axis},
    }
    nodes, last = [], x_name
    for i, op in enumerate(ops):
        out = output if i == len(ops) - 1 else f"t{i}"
        nodes.append(
            helper.make_node(op, [last, *weights.get(op, [])], [out], **attributes.get(op, {}))
        )
        last = out
    out_shape = [out_batch or batch, 3] if out_shape == "default" else out_shape
    graph = helper.make_graph(
        nodes,
        "answer",
        [helper.make_tensor_value_info(x_name, x_type or TensorProto.FLOAT, x_shape or [batch, 4])],
        [helper.make_tensor_value_info(output, out_type or TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


class Later:
    """An answer made by ``recipe`` on first use. Known answers to 00.1 are models, and some to 00.3 hold onnx's own
    functions: making them when this module is imported would load onnx in every kernel that checks any exercise
    (notebook 03's never loads it). ``check`` takes one as the answer it makes."""

    def __init__(self, recipe):
        self.recipe = recipe
        # how the tests and feedback name it
        self.__name__ = getattr(recipe, "__name__", "classifier")

    @functools.cached_property
    def value(self):
        return self.recipe()

    def __repr__(self):
        return repr(self.recipe)


def _made(answer):
    return answer.value if isinstance(answer, Later) else answer


def _changed(**changes) -> Later:
    return Later(functools.partial(classifier, **changes))


def _old_style():
    """Another batch name, opset 13 (whose Softmax also works on 2-D rows), the initializers listed as inputs too."""
    from onnx import TensorProto, helper

    model = classifier(batch="N", softmax_axis=-1)
    model.opset_import[0].version = 13
    model.graph.input.extend(
        [
            helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
        ]
    )
    return model


def _as_the_notebook_writes_it():
    """The notebook's own code (section 1) applied to the new case: other initializer and tensor names."""
    from onnx import TensorProto, helper, numpy_helper

    W, b = given_weights()
    graph = helper.make_graph(
        [
            helper.make_node(
                "Gemm", inputs=["x", "weight", "bias"], outputs=["xW_plus_b"], transB=1
            ),
            helper.make_node("Softmax", inputs=["xW_plus_b"], outputs=["probabilities"]),
        ],
        "linear_softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])],
        initializer=[
            numpy_helper.from_array(W, name="weight"),
            numpy_helper.from_array(b, name="bias"),
        ],
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])


DOUBLE = 11  # onnx.TensorProto.DOUBLE, spelt as a number: onnx stays out of this module's import
NAMES, INPUT = "input x and output probabilities", "input x float32 [batch, 4], batch a name"
OUTPUT, STORED = (
    "output probabilities float32 [batch, 3], the input's batch",
    "W and b stored float32",
)
NODES, READS = "one Gemm then one Softmax", "Gemm reads W as stored [3, 4], transB=1"
CHECKED, VALUES = "passes check_model(model, full_check=True)", "W and b with the values given"
ROWS, EQUALS = "a softmax over each row", "softmax(x @ W.T + b) on fresh x"


def _wrong_w():
    return Later(
        lambda: classifier(W=np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32))
    )


CLASSIFIER = Exercise(
    id="00.1",
    expects="your model (an onnx.ModelProto, or the path of its .onnx file)",
    reference=linear_classifier,
    answer="answer = linear_classifier()",
    accepts=lambda answer: isinstance(answer, Later) or _a_model(answer),
    run=lambda answer, case: _built(_made(answer), case),
    cases=classifier_cases,
    # the truth, softmax(x @ W.T + b), is in the cases: the reference is proved right by the tests, not trusted
    judged_alone=True,
    requirements=[
        Requirement(NAMES, _names),
        Requirement(INPUT, _input_declared),
        Requirement(OUTPUT, _output_declared),
        Requirement(STORED, _float32_initializers),
        Requirement(NODES, _gemm_softmax),
        Requirement(READS, _w_as_stored),
        Requirement(CHECKED, _check_model),
        Requirement(VALUES, _values_given),
        Requirement(ROWS, _rows_sum_to_one),
        Requirement(EQUALS, _probabilities),
    ],
    mistakes=[
        Mistake(
            "input named features",
            _changed(x_name="features"),
            "expected input 'x' and output 'probabilities', found inputs ['features'] and outputs ['probabilities']",
            NAMES,
        ),
        Mistake(
            "output named y",
            _changed(output="y"),
            "expected input 'x' and output 'probabilities', found inputs ['x'] and outputs ['y']",
            NAMES,
        ),
        Mistake(
            "input float64",
            _changed(x_type=DOUBLE),
            "expected the input 'x' declared float32 (TensorProto.FLOAT), found float64",
            INPUT,
        ),
        Mistake(
            "input [batch, 4, 1]",
            _changed(x_shape=["batch", 4, 1]),
            "expected the input 'x' of shape [batch, 4], found ['batch', 4, 1]",
            INPUT,
        ),
        Mistake(
            "input batch fixed to 1",
            _changed(x_shape=[1, 4]),
            "expected the input 'x' of shape [batch, 4], its batch dimension a name (dynamic: any size); found [1, 4]",
            INPUT,
        ),
        Mistake(  # found in a round of answers: it was shown as a fixed 0
            "input batch dynamic without a name",
            _changed(x_shape=[None, 4], out_shape=[None, 3]),
            "the batch dimension of the input 'x' is dynamic but has no name: name it (as in [batch, 4]), the "
            "same name in the input and the output",
            INPUT,
        ),
        Mistake(
            "output float64",
            _changed(out_type=DOUBLE),
            "expected the output 'probabilities' declared float32 (TensorProto.FLOAT), found float64",
            OUTPUT,
        ),
        Mistake(
            "output [batch, 4]",
            _changed(out_shape=["batch", 4]),
            "expected the output 'probabilities' of shape [batch, 3], found ['batch', 4]",
            OUTPUT,
        ),
        Mistake(
            "output batch fixed to 1",
            _changed(out_shape=[1, 3]),
            "expected the output 'probabilities' of shape [batch, 3], its batch dimension a name (dynamic: any "
            "size); found [1, 3]",
            OUTPUT,
        ),
        Mistake(
            "output batch another name",
            _changed(out_batch="N"),
            "the output declares its batch dimension 'N' and the input 'batch': the same name says they are the "
            "same size, as in [batch, 4] -> [batch, 3]",
            OUTPUT,
        ),
        Mistake(
            "output declared without a shape",
            _changed(out_shape=None),
            "expected the output 'probabilities' of shape [batch, 3], found no shape at all",
            OUTPUT,
        ),
        Mistake(
            "W stored float64",
            Later(lambda: classifier(W=given_weights()[0].astype(np.float64))),
            "the initializers {'W': 'float64'} are not float32; the task gives W and b as float32",
            STORED,
        ),
        Mistake(
            "MatMul and Add, not Gemm",
            Later(
                lambda: classifier(ops=("MatMul", "Add", "Softmax"), W=given_weights()[0].T.copy())
            ),
            "expected one Gemm (no MatMul or Add) and one Softmax for the probabilities; your nodes are "
            "['MatMul', 'Add', 'Softmax']",
            NODES,
        ),
        Mistake(
            "Relu kept from the notebook",
            _changed(ops=("Gemm", "Relu")),
            "expected one Gemm (no MatMul or Add) and one Softmax for the probabilities; your nodes are "
            "['Gemm', 'Relu']",
            NODES,
        ),
        Mistake(
            "no Softmax",
            _changed(ops=("Gemm",)),
            "expected one Gemm (no MatMul or Add) and one Softmax for the probabilities; your nodes are ['Gemm']",
            NODES,
        ),
        Mistake(
            "W stored [in, out], transB=0",
            Later(lambda: classifier(W=given_weights()[0].T.copy(), transB=0)),
            "Gemm reads B as stored: the exercise stores W [3, 4] ([out, in]), read with transB=1; yours is "
            "[4, 3] with transB=0",
            READS,
        ),
        Mistake(
            "W transposed, transB=1 kept",
            Later(lambda: classifier(W=given_weights()[0].T.copy())),
            "yours stores W transposed, [4, 3], and transposes it again with transB=1: store W as given, [3, 4]",
            READS,
        ),
        Mistake(
            "transB forgotten",
            _changed(transB=0),
            "W is stored [3, 4] ([out, in]): Gemm must read it with transB=1, yours has transB=0",
            READS,
        ),
        Mistake(
            "transB misspelt transb",
            _changed(transB=0, transb=1),
            "W is stored [3, 4] ([out, in]): Gemm must read it with transB=1, yours has transB=0",
            READS,
        ),
        Mistake(
            "alpha an int",
            _changed(alpha=1),
            "check_model refuses Gemm's attribute alpha given as an int: Gemm's alpha and beta are floats (1.0)",
            CHECKED,
        ),
        Mistake(
            "W other values",
            _wrong_w(),
            "the initializer Gemm reads as W differs from the exercise's W: store it with exactly the values given",
            VALUES,
        ),
        Mistake(
            "b zeros",
            Later(lambda: classifier(b=np.zeros(3, np.float32))),
            "Gemm's third input (C) should be the initializer b with exactly the values given; yours has other "
            "values",
            VALUES,
        ),
        Mistake(
            "b [2, 3]",
            Later(lambda: classifier(b=np.tile(given_weights()[1], (2, 1)))),
            "Gemm's third input (C) should be the initializer b, shape [3]; yours has the shape [2, 3]",
            VALUES,
        ),
        Mistake(
            "softmax over the batch",
            _changed(softmax_axis=0),
            "the output's rows do not each sum to 1: the Softmax normalises over the batch (axis=0); each row's "
            "3 scores are normalised with axis=-1, the default",
            ROWS,
        ),
        Mistake(
            "alpha 2.0",
            _changed(alpha=2.0),
            "the output differs from softmax(x @ W.T + b): Gemm's alpha scales x @ W.T; leave it 1.0",
            EQUALS,
        ),
    ],
    alternatives=[
        # every Gemm attribute spelt out, Softmax axis=1
        _changed(softmax_axis=1, alpha=1.0, beta=1.0, transA=0),
        Later(_old_style),
        Later(_as_the_notebook_writes_it),
        # b stored as a row [1, 3]: Gemm adds it to every row of x @ W.T just the same
        Later(lambda: classifier(b=given_weights()[1].reshape(1, 3))),
    ],
    secrets=_classifier_secrets,
    explain=_file_hint,
    setup="import numpy as np",
)


# --- 00.2 A numpy interpreter ---------------------------------------------------------------------------------


def interpret(model, image):
    """A numpy interpreter for the op types of the MLP."""
    from onnx import helper, numpy_helper

    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    values[model.graph.input[0].name] = image
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x = [values[name] for name in node.input]
        if node.op_type == "Sub":
            out = x[0] - x[1]
        elif node.op_type == "Div":
            out = x[0] / x[1]
        elif node.op_type == "Reshape":
            # a 0 in the target copies the input's dimension there (unless allowzero=1)
            keep = not attrs.get("allowzero")
            out = x[0].reshape(
                [x[0].shape[i] if d == 0 and keep else d for i, d in enumerate(x[1])]
            )
        elif node.op_type == "Gemm":
            a = x[0].T if attrs.get("transA") else x[0]
            b = x[1].T if attrs.get("transB") else x[1]
            out = attrs.get("alpha", 1.0) * (a @ b) + attrs.get("beta", 1.0) * (
                x[2] if len(x) > 2 else 0
            )
        elif node.op_type == "Relu":
            out = np.maximum(x[0], 0)
        else:
            raise NotImplementedError(f"this interpreter does not implement {node.op_type}")
        values[node.output[0]] = out.astype(np.float32)
    return values[model.graph.output[0].name]


def _perturbed(array, draw):  # the same shape, other values: a weight nobody can have memorised
    return (array * draw.uniform(0.8, 1.2, array.shape)).astype(array.dtype)


def _normalisation(draw, shape=()):
    """Other normalisation constants than the notebook's (0.1307, 0.3081): Sub's and Div's second inputs."""
    return (
        draw.uniform(0.02, 0.45, shape).astype(np.float32),
        draw.uniform(0.15, 0.6, shape).astype(np.float32),
    )


def _renamed_variant(exported, draw):
    """Every tensor renamed, the weights and the normalisation constants changed, the Reshape's target [0, -1]
    (0: "copy this dimension", the meaning the spec gives it while allowzero is 0, the default), one Gemm's
    weight stored [in, out] with transB=0."""
    import onnx
    from onnx import numpy_helper

    variant = onnx.compose.add_prefix(exported, "renamed_")
    sub, div = (next(n for n in variant.graph.node if n.op_type == op) for op in ("Sub", "Div"))
    mean, std = _normalisation(draw)
    for init in variant.graph.initializer:
        array = numpy_helper.to_array(init)
        changed = {sub.input[1]: mean, div.input[1]: std}.get(init.name)
        if changed is None and array.ndim == 2:  # the Gemm weights
            changed = _perturbed(array, draw)
        if changed is not None:
            init.CopyFrom(numpy_helper.from_array(np.asarray(changed, array.dtype), init.name))
    reshape = next(n for n in variant.graph.node if n.op_type == "Reshape")
    target = next(i for i in variant.graph.initializer if i.name == reshape.input[1])
    target.CopyFrom(numpy_helper.from_array(np.array([0, -1], np.int64), target.name))
    kept = [a for a in reshape.attribute if a.name != "allowzero"]
    del reshape.attribute[:]
    reshape.attribute.extend(kept)
    gemm = [n for n in variant.graph.node if n.op_type == "Gemm"][1]
    init = next(i for i in variant.graph.initializer if i.name == gemm.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).T.copy(), init.name))
    next(a for a in gemm.attribute if a.name == "transB").i = 0
    # the exporter's shapes of the weights; shape inference finds the new ones
    del variant.graph.value_info[:]
    return variant


def _reshaped_variant(exported, draw):
    """The MLP's five op types wired another way (Reshapes to two rows per image, transposed Gemms), weights and
    per-pixel normalisation constants of its own."""
    from onnx import TensorProto, helper, numpy_helper

    gemms = [node for node in exported.graph.node if node.op_type == "Gemm"]
    weights = {i.name: numpy_helper.to_array(i) for i in exported.graph.initializer}
    (w1, b1), (w2, b2), (w3, b3) = [(weights[g.input[1]], weights[g.input[2]]) for g in gemms]
    mean, std = _normalisation(draw, (1, 28, 28))
    tensors = {
        "pixel_mean": mean,
        "pixel_std": std,
        "half_rows": np.array([-1, 392], np.int64),
        "whole_rows": np.array([-1, 784], np.int64),
        "mix.w": np.eye(392, dtype=np.float32)
        + draw.normal(0, 0.05, (392, 392)).astype(np.float32),
        "mix.b": draw.normal(0, 0.1, 392).astype(np.float32),
        "fc1.w": _perturbed(w1, draw),
        "fc1.b": _perturbed(b1, draw)[:, None],
        "fc2.w": _perturbed(w2, draw),
        "fc2.b": _perturbed(b2, draw),
        "fc3.w": _perturbed(w3, draw),
        "fc3.b": _perturbed(b3, draw),
    }
    nodes = [
        helper.make_node("Sub", ["digits", "pixel_mean"], ["centred"]),
        helper.make_node("Div", ["centred", "pixel_std"], ["scaled"]),
        helper.make_node("Reshape", ["scaled", "half_rows"], ["halves"]),
        helper.make_node("Gemm", ["halves", "mix.w", "mix.b"], ["mixed"], transB=1),
        helper.make_node("Relu", ["mixed"], ["mixed_relu"]),
        helper.make_node("Reshape", ["mixed_relu", "whole_rows"], ["rows"]),
        helper.make_node("Gemm", ["fc1.w", "rows", "fc1.b"], ["h1_t"], transB=1),
        helper.make_node("Relu", ["h1_t"], ["a1_t"]),
        helper.make_node("Gemm", ["a1_t", "fc2.w", "fc2.b"], ["h2"], transA=1, transB=1),
        helper.make_node("Relu", ["h2"], ["a2"]),
        helper.make_node("Gemm", ["a2", "fc3.w", "fc3.b"], ["scores"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp_reshaped",
        [helper.make_tensor_value_info("digits", TensorProto.FLOAT, ["n", 1, 28, 28])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 10])],
        [numpy_helper.from_array(np.asarray(a), name) for name, a in tensors.items()],
    )
    return helper.make_model(
        graph, ir_version=exported.ir_version, opset_imports=exported.opset_import
    )


def _alone(model, k, inputs, output):
    """Node ``k`` of ``model`` alone, a model of its own: its data input (fed ONNX Runtime's value) the graph input,
    its other inputs the initializers they are; it must pass check_model, as the learner's code may check it."""
    import onnx
    from onnx import TensorProto, helper

    node, inits = model.graph.node[k], {i.name: i for i in model.graph.initializer}
    (data,) = [name for name in node.input if name not in inits]
    graph = helper.make_graph(
        [node],
        f"node_{k}",
        [helper.make_tensor_value_info(data, TensorProto.FLOAT, inputs.shape)],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, output.shape)],
        [inits[name] for name in node.input if name in inits],
    )
    alone = helper.make_model(graph, ir_version=model.ir_version, opset_imports=model.opset_import)
    onnx.checker.check_model(alone, full_check=True)
    return alone


def _interpreter_case(label, model, images):
    """The model and digits handed to the interpreter; ONNX Runtime's logits and, per node, the node alone with
    ONNX Runtime's value of its input and of its output (to find which node an interpreter gets wrong)."""
    import onnx
    from onnx import helper

    from helpers.grading.checks._common import session

    # handed to the learner's code: it must be a valid model
    onnx.checker.check_model(model, full_check=True)
    every = onnx.ModelProto.FromString(model.SerializeToString())
    known = {o.name for o in every.graph.output}
    every.graph.output.extend(
        helper.make_tensor_value_info(n.output[0], onnx.TensorProto.FLOAT, None)
        for n in every.graph.node
        if n.output[0] not in known
    )
    names = [o.name for o in every.graph.output]
    values = dict(
        zip(
            names,
            session(every.SerializeToString()).run(names, {model.graph.input[0].name: images}),
        )
    )
    values[model.graph.input[0].name] = images
    inits = {i.name for i in model.graph.initializer}
    nodes = []
    for k, node in enumerate(model.graph.node):
        (data,) = [name for name in node.input if name not in inits]
        given, want = values[data], values[node.output[0]]
        nodes.append((_alone(model, k, given, want), given, want))
    logits = values[model.graph.output[0].name]
    return Case(
        f"{label}, a batch of {len(images)}", (model, images), {"logits": logits, "nodes": nodes}
    )


def interpreter_cases(rng):
    """The exported MLP and two variants of it (other names, weights, normalisation constants, layouts, Reshape
    targets), each on other test digits, batches of 2 to 6, 1, and 7 to 9."""
    import onnx

    from helpers.grading.checks._common import test_images
    from helpers.pipeline.artifacts import existing_artifact

    exported = onnx.load(existing_artifact("mnist_mlp_pytorch.onnx"))
    images, _ = test_images(10_000)
    sizes = int(rng.integers(2, 7)), 1, int(rng.integers(7, 10))
    models = {
        "the exported MLP": exported,
        "a variant (tensors renamed, other weights and normalisation constants, Reshape to [0, -1], one Gemm "
        "with its weight stored [in, out] and transB=0)": _renamed_variant(exported, rng),
        "a variant (per-pixel normalisation, Reshape to [-1, 392] then [-1, 784], a Gemm with transA=1)": (
            _reshaped_variant(exported, rng)
        ),
    }
    return [
        _interpreter_case(label, model, images[rng.choice(len(images), size, replace=False)])
        for (label, model), size in zip(models.items(), sizes)
    ]


class _RuntimeCalled(Exception):
    """The learner's interpreter ran a runtime instead of numpy."""


@contextmanager
def _numpy_only():
    """Meanwhile running an ONNX Runtime session (a new one or one made before) or the reference evaluator raises
    _RuntimeCalled: the exercise's "numpy only", checked the simplest way (patching their ``run``)."""
    from unittest import mock

    from onnx.reference import ReferenceEvaluator
    from onnxruntime.capi.onnxruntime_inference_collection import Session

    with ExitStack() as stack:
        for cls, what in (
            (Session, "ONNX Runtime"),
            (ReferenceEvaluator, "the reference evaluator"),
        ):
            stack.enter_context(mock.patch.object(cls, "run", side_effect=_RuntimeCalled(what)))
        yield


def _try(answer, model, image):
    try:
        return np.asarray(answer(model, image))
    except _RuntimeCalled:
        raise
    except Exception as err:  # whatever the learner's code raises is an outcome
        return Raised(type(err).__name__, str(err))


def _close(got, want) -> bool:
    return (
        not isinstance(got, Raised)
        and got.shape == want.shape
        and got.dtype.kind in "fiu"
        and bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))
    )


def _interpreted(answer, case):
    """The learner's logits on the case; when they differ from ONNX Runtime's, its output on each node alone."""
    model, images = case.args
    try:
        with _numpy_only():
            logits = _try(answer, model, images)
            wrong = not _close(logits, case.data["logits"])
            nodes = (
                [_try(answer, alone, given) for alone, given, _ in case.data["nodes"]]
                if wrong
                else []
            )
    except _RuntimeCalled as used:
        return {"calls": str(used)}
    return {"logits": logits, "nodes": nodes}


def _alike(a, b) -> bool:
    """Two interpreters' outcomes behave alike: the same runtime called, or alike logits and nodes alone."""
    if "calls" in a or "calls" in b:
        return a == b
    pairs = [(a["logits"], b["logits"]), *zip(a["nodes"], b["nodes"])]
    return len(a["nodes"]) == len(b["nodes"]) and all(_same_value(x, y) for x, y in pairs)


def _same_value(x, y) -> bool:
    if (
        isinstance(x, Raised)
        or isinstance(y, Raised)
        or x.dtype.kind in "fiub"
        and y.dtype.kind in "fiub"
    ):
        return same(x, y)
    try:  # an answer's odd return value (None, a list of arrays): alike when equal
        return x.dtype == y.dtype and x.shape == y.shape and bool(np.all(x == y))
    except (TypeError, ValueError):
        return False


def _numpy_judge(case, got, want):
    return (
        None
        if "calls" not in got
        else f"your interpreter calls {got['calls']}: the exercise asks for numpy only"
    )


def _missing_key(got):
    raised = got["logits"]
    if isinstance(raised, Raised) and raised.type == "KeyError":
        try:
            return ast.literal_eval(raised.message)
        except (ValueError, SyntaxError):
            return raised.message
    return None


def _tensors(model) -> set:
    graph = model.graph
    return {v.name for v in [*graph.input, *graph.initializer]} | {
        t for n in graph.node for t in n.output
    }


def _stores_by_name(case, got, want):
    key = _missing_key(got)
    if key is None or key not in _tensors(case.args[0]):
        return None
    return (
        f"on {case.name}, your interpreter looks up {key!r}, a tensor of this model, but never stored it: store "
        "each value under the name this model gives it, not a fixed one"
    )


def _returns_by_name(case, got, want):
    key, graph = _missing_key(got), case.args[0].graph
    if key is None or key in _tensors(case.args[0]):
        return None
    return (
        f"on {case.name}, your interpreter looks up {key!r}, a name this model does not have (its input is "
        f"{graph.input[0].name!r}, its output {graph.output[0].name!r}): take every name from the model, not a "
        "fixed one"
    )


def _not_probabilities(case, got, want):
    logits = got["logits"]
    if _close(logits, _softmax(case.data["logits"])):
        return (
            "your interpreter returns probabilities (a softmax), but the model's output is the logits: return the "
            "graph output's value as the last node computes it"
        )
    return None


def _wrong_nodes(case, got) -> list[int]:
    """The nodes the interpreter gets wrong, each alone fed ONNX Runtime's input; none when it gets them all
    wrong (then it is how it starts or what it returns, not an op)."""
    nodes = got["nodes"]
    bad = [
        k
        for k, (mine, (_, _, right)) in enumerate(zip(nodes, case.data["nodes"]))
        if not _close(mine, right)
    ]
    return bad if len(bad) < len(nodes) else []


def _how(mine, right) -> str:
    if isinstance(mine, Raised):
        return f"it raises {mine}"
    if mine.shape != right.shape:
        return f"its output has the shape {list(mine.shape)}, not the one its inputs and attributes give"
    return "its output differs"


def _op_judge(op):
    def judge(case, got, want):
        bad = _wrong_nodes(case, got)
        if not bad or case.args[0].graph.node[bad[0]].op_type != op:
            return None
        k = bad[0]
        mine, right = got["nodes"][k], case.data["nodes"][k][2]
        said = f"on {case.name}, the first node it gets wrong is node {k} ({op}), given the right input: {_how(mine, right)}"
        return said + _zero_in_target(case.args[0], k)

    return judge


def _zero_in_target(model, k) -> str:
    """What a Reshape's target holding 0 means, when node ``k`` is one (the spec's special value)."""
    from onnx import numpy_helper

    node = model.graph.node[k]
    if node.op_type != "Reshape":
        return ""
    inits = {i.name: i for i in model.graph.initializer}
    target = numpy_helper.to_array(inits[node.input[1]])
    allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
    if allowzero or 0 not in target:
        return ""
    return (
        f"; its target {target.tolist()} holds a 0, which Reshape reads as 'copy this dimension of the input' "
        "(allowzero is 0, the default)"
    )


def _logits(case, got, want):
    logits, right = got["logits"], case.data["logits"]
    if _close(logits, right):
        return None
    nodes = got["nodes"]
    bad = [k for k, (m, (_, _, r)) in enumerate(zip(nodes, case.data["nodes"])) if not _close(m, r)]
    walks, returns = ": check how it walks the graph", ": check what it returns"
    if bad and len(bad) < len(nodes):
        # an op is wrong: its own requirement says how, these words only agree with it
        op = case.args[0].graph.node[bad[0]].op_type
        every = f"node {bad[0]} ({op}) alone, given the right input, is wrong too"
        walks = returns = ""
    elif bad:
        every = "every node alone, given the right input, is wrong too"
    else:
        every = "each node alone, given the right input, is right"
    if isinstance(logits, Raised):
        return f"on {case.name}, your interpreter raises {logits} ({every}{walks})"
    if logits.dtype.kind not in "fiu":
        return f"on {case.name}, expected an array of logits, got {logits.tolist()!r:.60} ({every})"
    if logits.shape != right.shape:
        return f"on {case.name}, expected logits [batch, 10] for a batch of {len(case.args[1])}, got the shape {list(logits.shape)} ({every})"
    row = int(np.argmax(~np.isclose(logits, right, rtol=1e-4, atol=1e-5).all(axis=1)))
    return f"on {case.name}, the logits differ from ONNX Runtime's, first for image {row} ({every}{returns})"


def _reshape(a, shape, allowzero=0):
    target = np.array(shape)
    if not allowzero:  # a 0 copies the input's dimension
        zeros = np.flatnonzero(target == 0)
        target[zeros] = np.take(a.shape, zeros)
    return np.reshape(a, target)


def interpret_with_a_table(model, image, changes=None, input_name=None, output_name=None):
    """A right answer written differently: one function per op type, einsum for Gemm, names from the node lists
    (a wrong one with ``changes``, op type -> its wrong implementation given the trans attributes, or fixed names)."""
    from onnx import helper, numpy_helper

    def gemm(a, b, c=0.0, alpha=1.0, beta=1.0, transA=0, transB=0):
        return alpha * np.einsum("ij,jk->ik", a.T if transA else a, b.T if transB else b) + beta * c

    ops = {
        "Sub": np.subtract,
        "Div": np.divide,
        "Relu": lambda a: np.clip(a, 0, None),
        "Reshape": _reshape,
        "Gemm": gemm,
    } | (changes or {})
    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    env[input_name or model.graph.input[0].name] = image
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in (changes or {}):
            attrs = {k: v for k, v in attrs.items() if k.startswith("trans")}
        (env[node.output[0]],) = [ops[node.op_type](*(env[t] for t in node.input), **attrs)]
    return env[output_name or model.graph.output[0].name]


class Interpreter:
    """Another right answer: a callable object that keeps the values it computed in a dict."""

    def __call__(self, model, image):
        from onnx import AttributeProto, numpy_helper

        known = dict(zip([model.graph.input[0].name], [image]))
        known.update((t.name, numpy_helper.to_array(t)) for t in model.graph.initializer)
        for node in model.graph.node:
            a = [known[t] for t in node.input]
            t = {x.name: x.i for x in node.attribute if x.type == AttributeProto.INT}
            if node.op_type == "Gemm":
                out = (
                    np.matmul(
                        np.swapaxes(a[0], 0, 1) if t.get("transA") else a[0],
                        np.swapaxes(a[1], 0, 1) if t.get("transB") else a[1],
                    )
                    + a[2]
                )
            else:
                out = {
                    "Sub": lambda: a[0] - a[1],
                    "Div": lambda: a[0] / a[1],
                    "Relu": lambda: a[0] * (a[0] > 0),
                    "Reshape": lambda: a[0].reshape(
                        tuple(
                            a[0].shape[i] if d == 0 and not t.get("allowzero") else int(d)
                            for i, d in enumerate(a[1])
                        )
                    ),
                }[node.op_type]()
            known[node.output[0]] = out
        return known[model.graph.output[0].name]


def interpret_checking_first(model, image):
    """A right answer that validates what it is given, as the notebook teaches, then interprets it."""
    import onnx

    onnx.checker.check_model(model, full_check=True)
    return interpret(model, image)


def _patched(input_name=None, output_name=None, finish=None, validate=False, **changes):
    """The table interpreter with one thing done wrong (``changes``: op type -> its wrong implementation)."""

    def wrong(model, image):
        if validate:
            import onnx

            onnx.checker.check_model(model, full_check=True)
        result = interpret_with_a_table(model, image, changes, input_name, output_name)
        return finish(result) if finish else result

    return wrong


def _with_onnxruntime(model, image):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString()).run(
        None, {model.graph.input[0].name: image}
    )[0]


@functools.cache
def _a_session_made_before():
    from helpers.grading.checks._common import session
    from helpers.pipeline.artifacts import existing_artifact

    return session(existing_artifact("mnist_mlp_pytorch.onnx"))


def _with_a_session_made_before(model, image):
    return _a_session_made_before().run(["logits"], {"image": image})[0]


def _with_the_reference_evaluator(model, image):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, {model.graph.input[0].name: image})[0]


# transposes B when the shapes do not fit, not per transB
def _gemm_shape_guess(a, b, c, transA=0, transB=0):
    return (a.T if transA else a) @ (b if a.shape[1 - transA] == b.shape[0] else b.T) + c


def _walks_nodes(model, image):  # model.graph.nodes: no such field (a learner's slip)
    values = {model.graph.input[0].name: image}
    for node in model.graph.nodes:
        values[node.output[0]] = values[node.input[0]]
    return values[model.graph.output[0].name]


NUMPY, STARTS = (
    "numpy only: no ONNX Runtime, no reference evaluator",
    "starts with the model's input, by its name",
)
RETURNS, LOGITS = "returns the model's output, by its name", "returns the logits, not probabilities"
GEMM, RESHAPE = "Gemm with its transA/transB attributes", "Reshape to its shape input"
RIGHT_LOGITS = "ONNX Runtime's logits on other digits, the MLP and its variants"
CALLS_ORT = "your interpreter calls ONNX Runtime: the exercise asks for numpy only"
FIXED_INPUT = (
    "your interpreter stores the image under a fixed name, so a variant's first node finds no input: store "
    "it under model.graph.input[0].name"
)
NO_RELU = "your Relu returns its input unchanged: Relu is max(x, 0)"

INTERPRETER = Exercise(
    id="00.2",
    expects="your function interpret(model, image)",
    reference=interpret,
    cases=interpreter_cases,
    run=_interpreted,
    alike=_alike,
    # the truth, ONNX Runtime's values, is in the cases: the reference is proved right by the tests, not trusted
    judged_alone=True,
    requirements=[
        Requirement(NUMPY, _numpy_judge),
        Requirement(STARTS, _stores_by_name),
        Requirement(RETURNS, _returns_by_name),
        Requirement(LOGITS, _not_probabilities),
        *(Requirement(op, _op_judge(op)) for op in ("Sub", "Div")),
        Requirement(RESHAPE, _op_judge("Reshape")),
        Requirement("Relu", _op_judge("Relu")),
        Requirement(GEMM, _op_judge("Gemm")),
        Requirement(RIGHT_LOGITS, _logits),
    ],
    mistakes=[
        Mistake("ONNX Runtime", _with_onnxruntime, CALLS_ORT, NUMPY),
        Mistake("a session made before", _with_a_session_made_before, CALLS_ORT, NUMPY),
        Mistake(
            "the reference evaluator",
            _with_the_reference_evaluator,
            "your interpreter calls the reference evaluator: the exercise asks for numpy only",
            NUMPY,
        ),
        Mistake("the input's name fixed", _patched(input_name="image"), FIXED_INPUT, STARTS),
        Mistake(
            "the exported file's names fixed",
            _patched(input_name="image", output_name="logits"),
            FIXED_INPUT,
            STARTS,
        ),
        Mistake(
            "the output's name fixed",
            _patched(output_name="logits"),
            "your interpreter returns the value of a fixed name, which a variant does not have: return "
            "model.graph.output[0].name's value",
            RETURNS,
        ),
        Mistake(
            "a softmax at the end",
            _patched(finish=_softmax),
            "your interpreter returns probabilities (a softmax), but the model's output is the logits: return the "
            "graph output's value as the last node computes it",
            LOGITS,
        ),
        Mistake(
            "Sub the wrong way round",
            _patched(Sub=lambda a, b: b - a),
            "your Sub computes B - A: Sub(A, B) is A - B",
            "Sub",
        ),
        Mistake(  # found in a round of answers, when every model had the notebook's constants
            "the notebook's constants",
            _patched(
                Sub=lambda a, b: a - np.float32(0.1307), Div=lambda a, b: a / np.float32(0.3081)
            ),
            "your Sub and Div use fixed constants, not their second input: a variant has normalisation constants "
            "of its own",
            "Sub",
        ),
        Mistake(
            "Div multiplies",
            _patched(Div=lambda a, b: a * b),
            "your Div multiplies: Div(A, B) is A / B",
            "Div",
        ),
        Mistake(
            "Div the wrong way round",
            _patched(Div=lambda a, b: b / a),
            "your Div computes B / A: Div(A, B) is A / B",
            "Div",
        ),
        Mistake(
            "Reshape keeps the batch",
            _patched(Reshape=lambda a, shape: a.reshape(len(a), -1)),
            "your Reshape keeps the first dimension and flattens the rest: reshape to the node's shape input",
            RESHAPE,
        ),
        Mistake(
            "Reshape to 784",
            _patched(Reshape=lambda a, shape: a.reshape(-1, 784)),
            "your Reshape always makes rows of 784: reshape to the node's shape input",
            RESHAPE,
        ),
        Mistake(
            "Reshape to a batch of 5",
            _patched(Reshape=lambda a, shape: a.reshape(5, -1)),
            "your Reshape fixes the batch size, so another batch fails: reshape to the node's shape input",
            RESHAPE,
        ),
        Mistake("Relu forgotten", _patched(Relu=lambda a: a), NO_RELU, "Relu"),
        Mistake(
            "Relu forgotten, validating first",
            _patched(Relu=lambda a: a, validate=True),
            NO_RELU,
            "Relu",
        ),
        Mistake(
            "Gemm transposes B by its shapes",
            _patched(Gemm=_gemm_shape_guess),
            "your Gemm transposes B when the shapes do not fit, not when transB=1: a square B shows the difference",
            GEMM,
        ),
        Mistake(
            "Gemm without transA",
            _patched(Gemm=lambda a, b, c, transA=0, transB=0: a @ (b.T if transB else b) + c),
            "your Gemm ignores transA: with transA=1, A is transposed first",
            GEMM,
        ),
        Mistake(
            "Gemm without C",
            _patched(
                Gemm=lambda a, b, c, transA=0, transB=0: (
                    (a.T if transA else a) @ (b.T if transB else b)
                )
            ),
            "your Gemm does not add C, its third input",
            GEMM,
        ),
        Mistake(
            "Gemm always transposes B",
            _patched(Gemm=lambda a, b, c, **t: a @ b.T + c),
            "your Gemm transposes B whatever transB says: a variant stores a weight [in, out] with transB=0",
            GEMM,
        ),
        Mistake(
            "Gemm never transposes B",
            _patched(Gemm=lambda a, b, c, **t: a @ b + c),
            "your Gemm ignores transB: with transB=1, B is transposed first",
            GEMM,
        ),
        Mistake(  # a learner's slip: model.graph.nodes raises on every model
            "model.graph.nodes",
            _walks_nodes,
            "your interpreter raises before any node: a graph's nodes are model.graph.node",
            RIGHT_LOGITS,
        ),
    ],
    alternatives=[interpret_with_a_table, Interpreter(), interpret_checking_first],
    secrets=lambda outcomes: [
        f"{v:.3f}" for outcome in outcomes for v in np.ravel(outcome["logits"])
    ],
    setup="import numpy as np",
)


# --- 00.3 Which tool notices first ----------------------------------------------------------------------------


def first_tools():
    """Found by building each broken model and trying check_model, check_model(full_check=True), InferenceSession
    in that order: the first that raises is the one that notices."""
    return {
        "output_renamed": "check_model",
        "opset_5": "InferenceSession",
        "W_shape_5x3": "full_check",
    }


BREAKAGES = ("output_renamed", "opset_5", "W_shape_5x3")
TOOLS = (
    "onnx.checker.check_model, then check_model(..., full_check=True), then ort.InferenceSession"
)


def broken_models() -> dict:
    """The three breakages of exercise 00.3, applied to the tiny relu(x @ W + b)."""
    from onnx import TensorProto, helper, numpy_helper

    def tiny(output="y", opset=20, W_shape=(4, 3)):
        nodes = [
            helper.make_node("MatMul", ["x", "W"], ["xW"]),
            helper.make_node("Add", ["xW", "b"], ["xW_plus_b"]),
            helper.make_node("Relu", ["xW_plus_b"], ["y"]),
        ]
        io = [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", n])
            for name, n in (("x", 4), (output, 3))
        ]
        weights = [
            numpy_helper.from_array(np.ones(s, np.float32), name)
            for name, s in (("W", W_shape), ("b", 3))
        ]
        graph = helper.make_graph(nodes, "relu_affine", io[:1], io[1:], weights)
        return helper.make_model(
            graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset)]
        )

    return {
        "output_renamed": tiny(output="y_renamed"),
        "opset_5": tiny(opset=5),
        "W_shape_5x3": tiny(W_shape=(5, 3)),
    }


def _first_detector(model) -> str:
    """Which of check_model, full_check, InferenceSession notices ``model``'s breakage first ("nothing": none)."""
    import onnx
    import onnxruntime as ort

    quiet = ort.SessionOptions()
    # ONNX Runtime's warnings about opset 5 are not the learner's concern here
    quiet.log_severity_level = 3
    for name, probe in (
        ("check_model", onnx.checker.check_model),
        ("full_check", lambda m: onnx.checker.check_model(m, full_check=True)),
        ("InferenceSession", lambda m: ort.InferenceSession(m.SerializeToString(), quiet)),
    ):
        try:
            probe(model)
        except Exception:  # each tool raises its own exception types; any of them means "noticed"
            return name
    return "nothing"


def detector_cases(rng):
    """The three broken models, each tried with the tools (the truth, found anew, not remembered)."""
    truth = {name: _first_detector(model) for name, model in broken_models().items()}
    return [Case("the three broken models", data=truth)]


def detector_of(value) -> str | None:
    """check_model, full_check, InferenceSession or nothing for an answer spelt as the task or tool does, else None."""
    import onnx
    import onnxruntime as ort

    if isinstance(value, functools.partial) and value.func is onnx.checker.check_model:
        return "full_check" if value.keywords.get("full_check") else "check_model"
    if not isinstance(value, str):
        tools = {"check_model": onnx.checker.check_model, "InferenceSession": ort.InferenceSession}
        return next((name for name, tool in tools.items() if value is tool), None)
    text = "".join(value.split()).lower()
    spelt = {
        "nothing": text == "nothing",
        "InferenceSession": "inferencesession" in text,  # the first that holds
        "full_check": "full_check" in text and "full_check=false" not in text,
        "check_model": "check_model" in text,
    }
    return next((name for name, holds in spelt.items() if holds), None)


def _named(answer, case):
    """What the answer names for each breakage (a tool, "nothing", or None: none of them)."""
    answer = _made(answer)
    if not isinstance(answer, dict):
        return {"a dict": False, "type": type(answer).__name__}
    return {
        "a dict": True,
        "keys": [repr(k) for k in answer],
        "named": {k: detector_of(answer[k]) for k in BREAKAGES if k in answer},
        "values": {k: repr(answer[k]) for k in BREAKAGES if k in answer},
    }


SHAPE = "like {'output_renamed': 'onnx.checker.check_model', ...}"


def _three_keys(case, got, want):
    if not got["a dict"]:
        return f"expected a dict {SHAPE}, got a {got['type']}: name each breakage by its key"
    missing = [k for k in BREAKAGES if k not in got["named"]]
    if not missing:
        return None
    return f"expected the keys {list(BREAKAGES)}, missing {missing} (got keys [{', '.join(got['keys'])}])"


def _tools_named(case, got, want):
    unknown = {k: got["values"][k] for k, tool in got["named"].items() if tool is None}
    if not unknown:
        return None
    return (
        "each answer names one tool: 'onnx.checker.check_model', 'check_model(..., full_check=True)', "
        f"'ort.InferenceSession', or 'nothing'; these are none of them: {{{', '.join(f'{k!r}: {v}' for k, v in unknown.items())}}}"
    )


def _how_many_right(right: int) -> str:
    """How many are right, never which (a verdict per breakage would let a learner find them by elimination)."""
    return (
        f"{right} of {len(BREAKAGES)} right. Build each of these broken models and run {TOOLS} on it, in that "
        "order: the first that raises an error is the one that notices"
    )


def _first_noticing(case, got, want):
    right = sum(got["named"][k] == case.data[k] for k in BREAKAGES)
    return None if right == len(BREAKAGES) else _how_many_right(right)


def _detector_secrets(outcomes):
    """Which tool is right for which breakage, however spelt, and any word saying whether an answer's tool comes
    before or after the right one."""
    pairs = [(k, tool) for k, tool in first_tools().items()]
    return [
        *(f"{k}: {tool}" for k, tool in pairs),
        *(f"'{k}': '{tool}'" for k, tool in pairs),
        "earlier",
        "later",
        "too ",
        "accepts",
    ]


def _tried():
    """Found the way the exercise suggests, by trying each tool in order (another order of the keys)."""
    import onnx
    import onnxruntime as ort

    def first(model):
        for name, tool in [
            ("check_model", lambda: onnx.checker.check_model(model)),
            ("full_check", lambda: onnx.checker.check_model(model, full_check=True)),
            ("InferenceSession", lambda: ort.InferenceSession(model.SerializeToString())),
        ]:
            try:
                tool()
            except Exception:
                return name
        return "nothing"

    return {name: first(model) for name, model in reversed(broken_models().items())}


def _the_tools_themselves():
    import onnx
    import onnxruntime as ort

    return {
        "output_renamed": onnx.checker.check_model,
        "opset_5": ort.InferenceSession,
        "W_shape_5x3": functools.partial(onnx.checker.check_model, full_check=True),
    }


RIGHT = first_tools()
AS_THE_TASK_SPELLS_IT = {
    "output_renamed": "onnx.checker.check_model",
    "opset_5": "ort.InferenceSession",
    "W_shape_5x3": "check_model(..., full_check=True)",
}
KEYS, NAMED = "a dict of the three breakages", "each names one of the tools, or 'nothing'"
FIRST = "the first tool that notices each breakage"
NAME_ONE = (
    "each answer names one tool: 'onnx.checker.check_model', 'check_model(..., full_check=True)', "
    "'ort.InferenceSession', or 'nothing'; these are none of them: "
)

DETECTORS = Exercise(
    id="00.3",
    expects=f"a dict {SHAPE}",
    reference=first_tools,
    answer="answer = first_tools()",
    accepts=lambda answer: isinstance(answer, (dict, list, tuple, Later)),
    cases=detector_cases,
    run=_named,
    # the truth, found by running the tools on the broken models, is in the case: the reference is proved right by
    # the tests, not trusted
    judged_alone=True,
    requirements=[
        Requirement(KEYS, _three_keys),
        Requirement(NAMED, _tools_named),
        Requirement(FIRST, _first_noticing),
    ],
    mistakes=[
        Mistake(
            "a list in the order of the task",
            ["check_model", "InferenceSession", "full_check"],
            f"expected a dict {SHAPE}, got a list: name each breakage by its key",
            KEYS,
        ),
        Mistake(
            "a key left out",
            {"output_renamed": "check_model", "opset_5": "InferenceSession"},
            "expected the keys ['output_renamed', 'opset_5', 'W_shape_5x3'], missing ['W_shape_5x3'] (got keys "
            "['output_renamed', 'opset_5'])",
            KEYS,
        ),
        Mistake(
            "a key misspelt",
            {
                "output_renamed": "check_model",
                "opset5": "InferenceSession",
                "W_shape_5x3": "full_check",
            },
            "expected the keys ['output_renamed', 'opset_5', 'W_shape_5x3'], missing ['opset_5'] (got keys "
            "['output_renamed', 'opset5', 'W_shape_5x3'])",
            KEYS,
        ),
        Mistake(
            "ort for a tool", {**RIGHT, "opset_5": "ort"}, NAME_ONE + "{'opset_5': 'ort'}", NAMED
        ),
        Mistake(
            "the task's ... left in",
            {**RIGHT, "W_shape_5x3": ...},
            NAME_ONE + "{'W_shape_5x3': Ellipsis}",
            NAMED,
        ),
        Mistake(
            "None for nothing",
            {**RIGHT, "output_renamed": None},
            NAME_ONE + "{'output_renamed': None}",
            NAMED,
        ),
        Mistake(
            "output_renamed: full_check",
            {**RIGHT, "output_renamed": "full_check"},
            _how_many_right(2),
            FIRST,
        ),
        Mistake(
            "opset_5: check_model, spelt as the task",
            {**AS_THE_TASK_SPELLS_IT, "opset_5": "onnx.checker.check_model"},
            _how_many_right(2),
            FIRST,
        ),
        Mistake(
            "W_shape_5x3: InferenceSession",
            {**RIGHT, "W_shape_5x3": "ort.InferenceSession"},
            _how_many_right(2),
            FIRST,
        ),
        Mistake(
            "check_model everywhere",
            dict.fromkeys(BREAKAGES, "check_model"),
            _how_many_right(1),
            FIRST,
        ),
        Mistake(
            "nothing everywhere", dict.fromkeys(BREAKAGES, "nothing"), _how_many_right(0), FIRST
        ),
        Mistake(
            "opset_5 and W_shape_5x3 swapped",
            {**RIGHT, "opset_5": "full_check", "W_shape_5x3": "InferenceSession"},
            _how_many_right(1),
            FIRST,
        ),
    ],
    alternatives=[
        AS_THE_TASK_SPELLS_IT,
        {
            "output_renamed": "check_model(model)",
            "opset_5": "onnxruntime.InferenceSession",
            "W_shape_5x3": "full_check=True",
        },
        Later(_the_tools_themselves),
        Later(_tried),
        # built another way, with an extra key (extra keys are fine)
        {
            **dict(zip(BREAKAGES, ["check_model", "InferenceSession", "full_check"])),
            "why": "the renamed output dangles",
        },
    ],
    praise=lambda cases: [f"{k}: {tool}" for k, tool in cases[0].data.items()],
    secrets=_detector_secrets,
    setup="",
)

EXERCISES = [CLASSIFIER, INTERPRETER, DETECTORS]
