"""Wrong answers a learner writes from the notebooks' text alone, each once accepted because no case held the
input that exposes it, kept as data: the answer's source, the requirement it breaks. Each is refused with exactly
that requirement unmet, in words that show no expected value; the right answers beside them, written from the
same text another way, pass. The cases that refuse them are drawn from each exercise's text at its edges (a
Reshape target's 0, a short first batch, faint edge pixels, an absent optional attribute, a stop text at index 0,
left padding, k at its limit), never from a catalogued mistake."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from helpers.grading.checks import ex03
from helpers.grading.examiner import expected_outcomes, numbers_in
from helpers.grading.exercises import check, exercise, requirements

SEED = 20_261
# an answer that raises on a case meets no requirement (the examiner's rule): the message names the case and error
RAISES = "raises"


def _answer_name(source):
    return re.findall(r"^def (\w+)", source, flags=re.MULTILINE)[-1]


def _first(breaks):
    return breaks if isinstance(breaks, str) else breaks[0]


def _row(exercise_id, source, breaks, marks=()):
    """``breaks``: the requirement unmet alone (or those it breaks: an op and the logits it makes wrong, a run
    refused and the labels it never gave); RAISES; None for a
    right answer. The answer is the source's last function defined at its top level."""
    name = _answer_name(textwrap.dedent(source))
    return pytest.param(
        exercise_id,
        textwrap.dedent(source),
        breaks,
        id=f"{exercise_id} {name}: " + (f"breaks {_first(breaks)}" if breaks else "right"),
        marks=[getattr(pytest.mark, m) for m in marks],
    )


RESHAPE, LOGITS = (
    "Reshape to its shape input",
    "ONNX Runtime's logits on other digits, the MLP and its variants",
)
GEMM = "Gemm with its transA/transB attributes"
INTERPRETER = """
def interpret(model, image):  # the exercise's walk, each op type as numpy writes it
    from onnx import helper, numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = image
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x = [values[name] for name in node.input]
        if node.op_type == "Sub":
            out = x[0] - x[1]
        elif node.op_type == "Div":
            out = x[0] / x[1]
        elif node.op_type == "Reshape":
            out = RESHAPE
        elif node.op_type == "Relu":
            out = np.maximum(x[0], 0)
        else:
            a = x[0].T if attrs.get("transA", 0) else x[0]
            b = x[1].T if attrs.get("transB", 0) else x[1]
            out = a @ b + x[2]
        values[node.output[0]] = out
    return values[model.graph.output[0].name]
"""


R3 = ex03.R3
BATCHES = """
def classify_in_batches(session, images_uint8):
    size = session.get_inputs()[0].shape[0]
    if isinstance(size, str) FEW:  # one run is enough
        return classify(session, images_uint8)
    pad = -len(images_uint8) % size
    images = np.concatenate([images_uint8, np.zeros((pad, 28, 28), np.uint8)])
    labels = []
    for start in range(0, len(images), size):
        labels.extend(classify(session, images[start : start + size]))
    return np.array(labels[:CUT])
"""


def _batches(few="", cut="len(images_uint8)"):
    return BATCHES.replace(" FEW", few).replace("CUT", cut)


MACS = """
def macs_per_image(path):  # the hint as written, the kernel read from the Conv's attributes
    import onnx
    from onnx import helper

    model = onnx.load(path)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in list(inferred.graph.value_info) + list(inferred.graph.output)
    }
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Conv":
            kh, kw = KERNEL
            total += int(np.prod(shapes[node.output[0]])) * dims[node.input[1]][1] * kh * kw
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in dims:
            total += int(np.prod(dims[node.input[1]]))
    return total
"""


GENERATE = """
def generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None):  # the notebook's loop, a stop test added
    import re

    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    stream, text, ids = tokenizer.create_stream(), "", []
    while not generator.is_done():
        generator.generate_next_token()
        token = int(generator.get_next_tokens()[0])
        ids.append(token)
        text += stream.decode(token)
        if stop is not None and STOPPED:
            break
    return ids
"""


def _generate(stopped):
    return GENERATE.replace("STOPPED", stopped)


def _interpreter(reshape):
    return INTERPRETER.replace("RESHAPE", reshape)


ROWS = [
    # wrong-cause words once ("read the input's name from the model", which it does): the name it fed is an
    # earlier call's. No file comes of it, so every requirement on the file is unmet too (the last, comparing
    # labels, reads none: see helpers/grading/checks/ex05.py)
    _row(
        "05.1",
        """
        import onnx
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static


        class DigitReader(CalibrationDataReader):
            batches = []  # one list on the class: every reader appends to it

            def __init__(self, images_uint8, input_name):
                for start in range(0, len(images_uint8), 32):
                    chunk = images_uint8[start : start + 32, None].astype(np.float32) / 255
                    self.batches.append({input_name: chunk})
                self.handed = iter(self.batches)

            def get_next(self):
                return next(self.handed, None)


        def quantize_int8(fp32_path, int8_path, train_uint8):
            name = onnx.load(fp32_path).graph.input[0].name
            quantize_static(
                fp32_path,
                int8_path,
                DigitReader(train_uint8, name),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                op_types_to_quantize=["Conv", "Gemm", "MatMul"],
            )
        """,
        tuple(requirements("05.1")[:-1]),
        ("slow",),
    ),
    # wrong-cause words once ("take the most likely token"): the calls show the question went in cut short
    _row(
        "07.1",
        """
        def answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
            answers = []
            for question in questions_ids:
                generator.rewind_to(prefix_len)
                generator.append_tokens(np.asarray(question)[1:])  # its first token dropped
                ids = []
                while not generator.is_done() and len(ids) < max_new_tokens:
                    generator.generate_next_token()
                    ids.append(int(generator.get_next_tokens()[0]))
                answers.append(ids)
            return answers
        """,
        "the greedy answer, whole",
        ("llm",),
    ),
    # a stop text at index 0 of the answer: find() is 0, never > 0
    _row(
        "07.2",
        _generate("text.find(stop) > 0"),
        ("stops right after the token completing stop", "greedy"),
        ("llm",),
    ),
    # a stop text read as a pattern: ( . ? match what the answer does not hold as written
    _row(
        "07.2",
        _generate("re.search(stop, text)"),
        ("the stop text matched as written, case and all", "greedy"),
        ("llm",),
    ),
    _row("07.2", _generate("text.find(stop) != -1"), None, ("llm",)),
    _row(
        "09.2",
        """
        def audit(expected_ids, written_ids):  # a count per id up to the largest written
            expected, written = np.asarray(expected_ids), np.asarray(written_ids)
            counts = np.bincount(written)
            inside = expected[expected < len(counts)]
            return {
                "missing": sorted(inside[counts[inside] == 0].tolist()),
                "duplicated": np.flatnonzero(counts > 1).tolist(),
                "unexpected": sorted(set(written.tolist()) - set(expected.tolist())),
            }
        """,
        "missing: the ids expected but never written",
    ),
    _row(
        "09.2",
        """
        def audit(expected_ids, written_ids):  # right: a count per id, as long as both need
            expected, written = np.asarray(expected_ids), np.asarray(written_ids)
            top = int(max(expected.max(), written.max())) + 1
            wrote, wanted = np.bincount(written, minlength=top), np.bincount(expected, minlength=top)
            return {
                "missing": np.flatnonzero((wanted > 0) & (wrote == 0)).tolist(),
                "duplicated": np.flatnonzero(wrote > 1).tolist(),
                "unexpected": np.flatnonzero((wrote > 0) & (wanted == 0)).tolist(),
            }
        """,
        None,
    ),
    # an answer that raises meets no requirement (the examiner's rule): all four, the case and the cause named
    _row("06.2", MACS.replace("KERNEL", 'attrs["kernel_shape"]'), RAISES),
    _row(
        "06.2", MACS.replace("KERNEL", 'attrs.get("kernel_shape", dims[node.input[1]][2:])'), None
    ),
    _row(
        "04.1",
        """
        def ink(rgb):  # ink or not, at half the largest distance to the paper: faint edges lost
            pixels = rgb.astype(float)
            border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
            distance = np.linalg.norm(pixels - np.median(border, axis=0), axis=-1)
            return (distance > distance.max() / 2).astype(float)
        """,
        "the ink painted there, faint edges too",
        ("slow",),
    ),
    _row(
        "04.1",
        """
        def ink(rgb):  # right: the distance to the paper over the mean of the 40 farthest pixels'
            pixels = rgb.astype(np.float32)
            edge = np.vstack([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
            distance = np.sqrt(((pixels - np.median(edge, axis=0)) ** 2).sum(axis=-1))
            return np.clip(distance / np.sort(distance.ravel())[-40:].mean(), 0, 1)
        """,
        None,
        ("slow",),
    ),
    # a short batch that is also the first: sent unpadded, ONNX Runtime refuses it, so no labels come back
    _row(
        "03.3",
        _batches(few=" or len(images_uint8) <= size"),
        (R3["exact"], R3["labels"], R3["own"]),
        ("slow",),
    ),
    # the padding cut with [:-pad], pad 0 when the images fill the last batch: no labels at all
    _row("03.3", _batches(cut="-pad"), (R3["labels"], R3["own"]), ("slow",)),
    _row("03.3", _batches(), None, ("slow",)),
    _row("00.2", _interpreter("np.reshape(x[0], x[1])"), (RESHAPE, LOGITS)),
    _row(
        "00.2",
        _interpreter("x[0].reshape([n or x[0].shape[i] for i, n in enumerate(x[1])])"),
        None,
    ),
    _row(
        "10.1",
        """
        def masked_mean(hidden, mask):  # the first mask.sum() positions: padding on the right only
            counts = mask.sum(axis=1)
            mean = np.stack([row[:n].mean(axis=0) for row, n in zip(hidden, counts)])
            return mean / np.linalg.norm(mean, axis=1, keepdims=True)
        """,
        "the mean over the positions where mask is 1",
    ),
    _row(
        "10.1",
        """
        def masked_mean(hidden, mask):  # right, positions picked by the mask wherever they are
            picked = [row[m == 1].mean(axis=0) for row, m in zip(hidden, mask)]
            return np.array([v / np.sqrt(v @ v) for v in picked])
        """,
        None,
    ),
    _row(
        "10.2",
        """
        def nearest(queries, documents, k):  # a partition alone: the k, unordered
            return np.argpartition(-(queries @ documents.T), k - 1, axis=1)[:, :k]
        """,
        "the most similar first",
    ),
    # k equal to the number of documents: kth=k is out of bounds
    _row(
        "10.2",
        """
        def nearest(queries, documents, k):  # a partition at k, then the first k, sorted
            scores = queries @ documents.T
            top = np.argpartition(-scores, k, axis=1)[:, :k]
            return np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, 1)), 1)
        """,
        RAISES,
    ),
    _row(
        "10.2",
        """
        def nearest(queries, documents, k):  # right: the last k of an ascending sort, reversed
            return np.argsort(queries @ documents.T, axis=1)[:, ::-1][:, :k]
        """,
        None,
    ),
]


def _answer(source):
    space = {"np": np, "classify": ex03.classify}  # 03.1's answer, which 03.3's text reuses
    exec(source, space)  # the table's own answers, written as a learner would
    return space[_answer_name(source)]


@pytest.mark.parametrize("exercise_id, source, breaks", ROWS)
def test_a_shortcut_is_refused_by_the_requirement_it_breaks(exercise_id, source, breaks):
    feedback = check(exercise_id, _answer(source), seed=SEED)
    if breaks is None:
        assert feedback.ok, str(feedback)
        return
    assert not feedback.ok, f"accepted: {feedback}"
    if breaks == RAISES:
        assert list(feedback.unmet) == requirements(exercise_id), str(feedback)
        assert "your answer raised" in feedback.message, str(feedback)
    else:
        unmet = [breaks] if isinstance(breaks, str) else list(breaks)
        assert list(feedback.unmet) == unmet, str(feedback)
        assert feedback.message.startswith(f"{unmet[0]}: "), str(feedback)
    text, entry = str(feedback), exercise(exercise_id)
    for leak in (entry.secrets or numbers_in)(expected_outcomes(entry, SEED)):
        assert leak not in text, f"the feedback shows {leak!r}: {text}"
