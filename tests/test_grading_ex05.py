"""Notebook 05's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import ast
import logging
import sys

import numpy as np
import onnx
import pytest

from helpers.grading.checks import ex05
from helpers.grading.examiner import checking
from helpers.grading.exercises import check


def _cases(exercise, seed):
    with checking(seed) as rng:
        return [(case.name, case.args, case.data) for case in exercise.cases(rng)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_static_int8_digits_tell_what_calibrated_the_file(seed):
    """05.1's premise: full-brightness digits, faint ones (0..127), and faint ones but for three bright ones past
    the middle, so that the input range an int8 file keeps tells which of them calibrated it."""
    normal, faint, mostly = (args[1] for _, args, _ in _cases(ex05.STATIC_INT8, seed))
    assert normal.max() == 255 and faint.max() <= 127 and mostly.max() == 255
    bright = np.flatnonzero(mostly.max(axis=(1, 2)) > 127)
    assert len(bright) == 3 and bright.min() > len(mostly) // 2


def test_cases_change_between_seeds():
    """What each answer is handed is new with each seed: names, digits, counts, batch and block sizes."""
    for exercise in ex05.EXERCISES:
        first, second = (_cases(exercise, seed) for seed in (1, 2))
        assert [name for name, _, _ in first] != [name for name, _, _ in second], exercise.id
    first, second = (_cases(ex05.STATIC_INT8, seed)[0][1][1] for seed in (1, 2))
    assert first.shape != second.shape or not np.array_equal(first, second)


def test_every_model_handed_to_the_learner_passes_check_model():
    for kind, trans_b in (("cnn", 1), ("mlp", 1), ("mlp", 0)):
        model = ex05.fresh_model(np.random.default_rng(trans_b), kind, trans_b)
        onnx.checker.check_model(model, full_check=True)


def test_an_instance_is_told_to_pass_the_class():
    reader = ex05.calibration_reader_class()
    feedback = check("05.2", reader.__new__(reader), seed=1)
    assert not feedback.ok and "not an instance of it" in feedback.message, feedback.message


def test_calibration_check_leaves_the_kernel_as_it_found_it(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers), sys.stdout)
    assert check("05.2", ex05.calibration_reader_class(), seed=1).ok
    assert (root.level, list(root.handlers), sys.stdout) == before
    assert capsys.readouterr().out == ""


def notebook_function(name: str):
    """The function ``name`` exactly as notebook 05 defines it (its cell's imports, then the def)."""
    import nbformat

    from helpers.pipeline.artifacts import notebook_paths

    path = next(p for p in notebook_paths() if p.name.startswith("05_"))
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and f"def {name}(" in cell.source:
            tree = ast.parse(cell.source)
            keep = [
                n
                for n in tree.body
                if isinstance(n, (ast.Import, ast.ImportFrom))
                or isinstance(n, ast.FunctionDef)
                and n.name == name
            ]
            namespace = {"np": np, "onnx": onnx}
            exec(compile(ast.Module(keep, type_ignores=[]), str(path), "exec"), namespace)
            return namespace[name]
    raise AssertionError(f"notebook 05 defines no {name}()")


def test_int4_accepts_the_notebooks_own_rewrite_which_calls_check_model():
    """An answer built on notebook 05's own gemm_to_matmul (read from the notebook: it checks the rewritten model
    with full_check) is right."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    gemm_to_matmul = notebook_function("gemm_to_matmul")

    def int4_weights(fp32_path, int4_path, block_size):
        model = gemm_to_matmul(onnx.load(fp32_path))
        quantizer = MatMulNBitsQuantizer(
            model, bits=4, block_size=block_size, is_symmetric=True, accuracy_level=4
        )
        quantizer.process()
        onnx.checker.check_model(quantizer.model.model)
        onnx.save(quantizer.model.model, int4_path)

    feedback = check("05.3", int4_weights, seed=1)
    assert feedback.ok, str(feedback)
