"""The checks of notebook 08's exercises, fed realistic wrong answers and alternative right ones.

The worked solutions (solutions/ex08.py) are run by tests/test_exercises.py. Here: each wrong answer must be
refused with feedback naming its mistake and never showing the expected answer; each alternative right answer,
written differently from the solution, must pass. 08.1 generates with the cached SmolLM2 int4 model.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers.checks.ex08 import check_person_schema
from helpers.exercises import check

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from solutions import ex08  # noqa: E402


def feedback(exercise, answer):
    result = check(exercise, answer)
    assert not result, f"{exercise} accepted a wrong answer: {result}"
    return result.message


# ---------------------------------------------------------------- 08.1 a JSON schema for name and age
def variant(change):
    """The worked schema with one mistake a learner makes."""
    schema = copy.deepcopy(ex08.person_schema)
    change(schema)
    return schema


@pytest.mark.parametrize("wrong, named", [
    (variant(lambda s: s["properties"]["name"].pop("maxLength")), '"maxLength"'),
    (variant(lambda s: s["properties"]["age"].pop("maximum")), '"maximum"'),
    (variant(lambda s: s["properties"]["age"].pop("minimum")), '"minimum"'),
    (variant(lambda s: s["properties"]["age"].update(type="number")), 'not "number"'),
    (variant(lambda s: s["properties"]["age"].update(type=["integer", "string"])), '"type": "integer"'),
    (variant(lambda s: s.update(required=["name"])), 'without "age"'),
    (variant(lambda s: s.pop("required")), '"required"'),
    (variant(lambda s: s.pop("additionalProperties")), '"additionalProperties"'),
    (variant(lambda s: s.pop("x-guidance")), "whitespace"),
    (variant(lambda s: s["properties"]["name"].update(maxLength=12)), "to accept a right answer"),
    (variant(lambda s: s["properties"]["age"].update(maximum=99)), "to accept a right answer"),
    (variant(lambda s: s["properties"]["age"].update(type="int")), "valid JSON schema"),
    (json.dumps(ex08.person_schema), "as a dict"),
], ids=["unbounded-name", "no-maximum", "no-minimum", "number-not-integer", "string-age", "age-not-required",
        "nothing-required", "extra-keys", "free-whitespace", "name-too-short", "age-too-low", "bad-type", "json-text"])
def test_08_1_names_the_mistake(wrong, named):
    message = feedback("08.1", wrong)
    assert named in message
    assert json.dumps(ex08.person_schema["properties"]) not in message, "the feedback shows the worked schema"


def test_08_1_an_answer_cut_by_max_length_is_named():
    from helpers.checks._common import Wrong

    with pytest.raises(Wrong, match="ran until max_length"):
        check_person_schema(ex08.person_schema, max_new=5)


ALTERNATIVES = [
    json.loads("""{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                   "required": ["age", "name"],
                   "properties": {"age": {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 121},
                                  "name": {"type": "string", "minLength": 1, "maxLength": 80}},
                   "additionalProperties": false, "x-guidance": {"whitespace_flexible": false}}"""),
    dict(type="object", title="person", additionalProperties=False, required=["name", "age"],
         properties=dict(name=dict(type="string", description="full name", maxLength=50),
                         age=dict(type="integer", description="years", minimum=0, maximum=120)),
         **{"x-guidance": dict(whitespace_flexible=False, key_separator=":")}),
]


@pytest.mark.parametrize("schema", ALTERNATIVES, ids=["draft-2020-exclusive-bounds", "built-with-dict"])
def test_08_1_accepts_other_right_schemas(schema):
    result = check("08.1", schema)
    assert result, str(result)


# ---------------------------------------------------------------- 08.2 time per layer from profiles
def layer_of(name):
    match = re.match(r"/model/layers\.(\d+)/", name)
    return int(match.group(1)) if match else None


def with_fences(files):
    total = Counter()
    for f in files:
        for e in json.loads(Path(f).read_text()):
            if e["cat"] == "Node" and layer_of(e["name"]) is not None:       # mistake: fences counted too
                total[layer_of(e["name"])] += e["dur"] / len(files)
    return dict(total)


def total_not_mean(files):
    return {n: us * len(files) for n, us in ex08.time_per_layer(files).items()}   # mistake: the sum over steps


def prefix_match(files):
    events = [e for f in files for e in json.loads(Path(f).read_text()) if e["name"].endswith("_kernel_time")]
    return {n: sum(e["dur"] for e in events if f"/model/layers.{n}" in e["name"]) / len(files)  # mistake: no "/"
            for n in {layer_of(e["name"]) for e in events} - {None}}


def string_keys(files):
    return {str(n): us for n, us in ex08.time_per_layer(files).items()}


def outside_layers_too(files):
    total = Counter()
    for f in files:
        for e in json.loads(Path(f).read_text()):
            if e["name"].endswith("_kernel_time"):                   # mistake: embedding and lm_head as well
                total[layer_of(e["name"]) if layer_of(e["name"]) is not None else -1] += e["dur"] / len(files)
    return dict(total)


def first_file_only(files):
    return ex08.time_per_layer(files[:1])


def in_ms(files):
    return {n: us / 1000 for n, us in ex08.time_per_layer(files).items()}


@pytest.mark.parametrize("wrong, named", [
    (with_fences, "fence events"),
    (total_not_mean, "mean per step"),
    (prefix_match, "up to the slash"),
    (string_keys, "(an int)"),
    (outside_layers_too, "extra [-1]"),
    (first_file_only, "layer 0 differs: too"),
    (in_ms, "too low, by more than 10 %"),
    (lambda files: 1 / 0, "ZeroDivisionError"),
], ids=["fences", "total", "prefix", "str-keys", "outside-layers", "first-file", "ms", "raises"])
def test_08_2_names_the_mistake(wrong, named):
    message = feedback("08.2", wrong)
    assert named in message
    assert not re.search(r"\d+\.\d", message), f"a number that may be an expected value: {message}"


def counter_split(files):
    per_step = []
    for f in files:
        with open(f) as handle:
            step = Counter()
            for e in json.load(handle):
                name = e["name"]
                if e.get("cat") == "Node" and name.startswith("/model/layers.") and name.endswith("_kernel_time"):
                    step[int(name.split("/")[2].split(".")[1])] += e["dur"]
            per_step.append(step)
    layers = set().union(*per_step)
    return {n: sum(s[n] for s in per_step) / len(per_step) for n in layers}


def one_regex(files):
    pattern = re.compile(r"^/model/layers\.(\d+)/.*_kernel_time$")
    hits = [(int(m[1]), e["dur"]) for f in files for e in json.loads(Path(f).read_text())
            if e["cat"] == "Node" and (m := pattern.match(e["name"]))]
    return {n: sum(d for k, d in hits if k == n) / len(files) for n in {k for k, _ in hits}}


@pytest.mark.parametrize("right", [counter_split, one_regex], ids=["counter-per-step", "one-regex"])
def test_08_2_accepts_other_right_answers(right):
    result = check("08.2", right)
    assert result, str(result)
