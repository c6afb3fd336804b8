"""Notebook 04's checks: what the generic test (tests/test_grading.py) cannot see from answers' verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.grading.checks import ex04
from helpers.grading.exercises import check

pytestmark = pytest.mark.slow


def test_on_400_seeds_the_reference_ink_is_right_and_a_share_of_the_page_is_not():
    """04.1's reference meets every requirement on every drawing of 400 seeds (a full stroke taken from a share of
    the page, the 99.5th percentile, failed seeds 13, 42, 110 and 234 of 300): no right answer meets a seed it
    fails. And the two percentile estimates (that one, and a learner's channel by channel) leave the paper inked
    on every seed, not only where a small digit happens to be drawn: each seed draws a page whose thin strokes
    cover under 0.1 % of it, and one in soft strokes, wide faint edges. (The requirements judge the drawings, not
    the reference's ink.)"""
    for seed in range(400):
        cases = ex04.drawing_cases(np.random.default_rng(seed))
        for case in cases:
            got = ex04._run_ink(ex04.ink, case)
            unmet = [r.name for r in ex04.INK.requirements if r.judge(case, got, got)]
            assert not unmet, (seed, case.name, unmet)
        thin = [case for case in cases if "thin strokes on" in case.name]
        assert "soft strokes" in cases[-1].name
        assert (thin[0].data > 0).mean() < 0.001 and "thin strokes on" in thin[0].name
        for answer in (ex04._percentile_scale, ex04._channel_percentile):
            inked = [ex04._bare_paper(case, ex04._run_ink(answer, case), None) for case in thin]
            assert any(inked), (seed, answer.__name__)


def test_ink_is_checked_on_drawings_it_did_not_hand_out():
    """The handed-out drawings are blue on yellowish paper, 196 px square; a check's are of other sizes and
    colours, dark ink on light paper first, then light on dark, and new with each seed."""
    handed, _, _, described = ex04.coloured_drawings(3)
    assert {d.shape for d in handed} == {(196, 196, 3)}
    assert all("[30, 60, 160]" in d for d in described)
    first, second = (ex04.drawing_cases(np.random.default_rng(seed)) for seed in (1, 2))
    assert all(c.args[0].shape != (196, 196, 3) for c in first)
    assert "dark ink on light paper" in first[0].name and "light ink on dark paper" in first[1].name
    assert [c.name for c in first] != [c.name for c in second]


@pytest.mark.parametrize("typed", ["input", "output"])
def test_a_typed_tensor_name_alone_is_named_too(typed):
    """The known mistake types both names; typing one of them fails on the renamed copy alike."""
    name = {
        "input": ("session.inputNames[0]", '"image"'),
        "output": ("session.outputNames[0]", '"logits"'),
    }
    script = ex04.Script(f"{typed} typed", ex04._replacing(name[typed]))
    words = next(m.words for m in ex04.TOP3.mistakes if m.name == "the tensor names typed")
    assert check("04.2", script, seed=7).message == f"runs without error (exit 0): {words}"


def test_a_script_is_asked_for_by_its_path(tmp_path):
    """04.2's answer is the path of an existing file: a missing file is named, the script's text is not a path."""
    missing = check("04.2", tmp_path / "missing.mjs", seed=7)
    assert missing.message.startswith("expected the path of your script, found no file at")
    assert check("04.2", ex04.reference_script(), seed=7).message == (
        "expected the path of your script (a str or Path), got str"
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_renamed_copy_has_other_weights(seed):
    """04.2's copy differs from notebook 01's model in its top 3 on the digits it is run on, whatever the seed:
    a script that runs notebook 01's file whatever it is given is refused (the generic test sees two seeds)."""
    _, copy = ex04.model_cases(np.random.default_rng(seed))
    logits, original = copy.data["logits"], copy.data["notebook 01"]
    assert (ex04._top3(logits) != ex04._top3(original)).any()
