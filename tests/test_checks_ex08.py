"""The checks of notebook 08's exercises: realistic wrong answers are refused with feedback naming the mistake and
never showing the expected answer; right answers written otherwise than the references pass (08.1 runs SmolLM2)."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from tables import accepted, refused, rows

from helpers.grading.checks import ex08
from helpers.grading.checks._common import Wrong, seeded


def variant(change):
    """The worked schema with one mistake a learner makes."""
    schema = copy.deepcopy(ex08.person_schema)
    change(schema)
    return schema


def name_may_be(*types):
    return variant(lambda s: s["properties"]["name"].update(type=list(types)))


REQUIREMENTS_08_1 = [
    ("a JSON schema as a dict", json.dumps(ex08.person_schema), "as a dict"),
    (
        "a valid JSON schema",
        variant(lambda s: s["properties"]["age"].update(type="int")),
        "valid JSON schema",
    ),
    ("name: a string, not null", name_may_be("string", "null"), "the name null"),
    ("name: a string, not a number", name_may_be("string", "integer"), "a number as the name"),
    (
        "names up to 40 characters must fit (40 fits)",
        variant(lambda s: s["properties"]["name"].update(maxLength=39)),
        "40-character name",
    ),
    (
        "a name is any string",
        variant(lambda s: s["properties"]["name"].update(pattern="^[A-Za-z -]+$")),
        "accents, an apostrophe and a hyphen",
    ),
    (
        "the name bounded",
        variant(lambda s: s["properties"]["name"].pop("maxLength")),
        "200-character name",
    ),
    (
        "age: a whole number, not any number",
        variant(lambda s: s["properties"]["age"].update(type="number")),
        "a whole number of years",
    ),
    (
        "age: not a string",
        variant(lambda s: s["properties"]["age"].update(type=["integer", "string"])),
        "the age as a string",
    ),
    (
        "age: not null",
        variant(lambda s: s["properties"]["age"].update(type=["integer", "null"])),
        "the age null",
    ),
    (
        "ages from 0 (0 fits)",
        variant(lambda s: s["properties"]["age"].update(minimum=1)),
        "the age 0",
    ),
    (
        "ages from 0 (-1 does not)",
        variant(lambda s: s["properties"]["age"].pop("minimum")),
        "the age -1",
    ),
    (
        "ages to 120 (120 fits)",
        variant(lambda s: s["properties"]["age"].update(maximum=119)),
        "the age 120",
    ),
    (
        "ages to 120 (121 does not)",
        variant(lambda s: s["properties"]["age"].update(maximum=121)),
        "the age 121",
    ),
    ("name required", variant(lambda s: s.update(required=["age"])), 'without "name"'),
    ("age required", variant(lambda s: s.update(required=["name"])), 'without "age"'),
    ("nothing else", variant(lambda s: s.pop("additionalProperties")), "an extra key"),
    (
        "whitespace bounded",
        variant(lambda s: s.pop("x-guidance")),
        "expected whitespace bounded too",
    ),
    (
        "usable by onnxruntime-genai: answers are JSON",
        variant(lambda s: s["x-guidance"].update(item_separator="\\s*,\\s*")),
        "which is not JSON",
    ),
]


OTHER_MISTAKES_08_1 = [  # (wrong answer, what the feedback says)
    (variant(lambda s: s["properties"]["name"].update(maxLength=12)), "40-character name"),
    (variant(lambda s: s["properties"]["age"].update(maximum=99)), "the age 120"),
    (variant(lambda s: s["properties"]["name"].update(maxLength=500)), "200-character name"),
    (
        variant(lambda s: s["x-guidance"].update(whitespace_flexible=True)),
        "expected whitespace bounded too",
    ),
    (
        variant(lambda s: s.update({"x-guidance": {"whitespace_pattern": "[ ]{0,4}"}})),
        "did not apply it",
    ),
    (variant(lambda s: s.pop("required")), 'without "age"'),
    (variant(lambda s: s.update(type="array")), "expected your schema to accept"),
]


@pytest.mark.parametrize(
    "wrong, named",
    [
        *rows("requirement", REQUIREMENTS_08_1),
        *rows(
            "mistake",
            OTHER_MISTAKES_08_1,
            ids=[
                "name-too-short",
                "age-too-low",
                "name-500",
                "flexible-true",
                "whitespace-pattern",
                "nothing-required",
                "array",
            ],
        ),
    ],
)
def test_08_1_wrong_answers_are_named_without_the_worked_schema(wrong, named):
    message = refused("08.1", wrong).message
    assert named in message, message
    assert json.dumps(ex08.person_schema["properties"]) not in message, (
        "the feedback shows the worked schema"
    )
    assert "whitespace_flexible" not in message and "maxLength" not in message, (
        "the feedback gives the code"
    )


def test_08_1_an_answer_cut_by_max_length_is_named():
    with seeded(1), pytest.raises(Wrong, match="ran until max_length"):
        ex08.check_person_schema(ex08.person_schema, max_new=5)


ALTERNATIVES = [
    json.loads("""{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                   "required": ["age", "name"],
                   "properties": {"age": {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 121},
                                  "name": {"type": "string", "minLength": 1, "maxLength": 80}},
                   "additionalProperties": false, "x-guidance": {"whitespace_flexible": false}}"""),
    dict(
        type="object",
        title="person",
        additionalProperties=False,
        required=["name", "age"],
        properties=dict(
            name=dict(type="string", description="full name", maxLength=50),
            age=dict(type="integer", description="years", minimum=0, maximum=120),
        ),
        **{"x-guidance": dict(whitespace_flexible=False, key_separator=":")},
    ),
    {
        "type": "object",  # notebook 08's SCHEMA, adapted: its own layout and comment
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
        "x-guidance": {"whitespace_flexible": False},
    },
    dict(
        type="object",
        required=["name", "age"],
        additionalProperties=False,  # literal separators with spaces
        properties={
            "name": {"type": "string", "minLength": 1, "maxLength": 64},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        **{
            "x-guidance": {
                "whitespace_flexible": False,
                "item_separator": ", ",
                "key_separator": ": ",
            }
        },
    ),
]


@pytest.mark.parametrize(
    "schema",
    ALTERNATIVES,
    ids=["draft-2020-exclusive-bounds", "built-with-dict", "notebook-style", "literal-separators"],
)
def test_08_1_accepts_other_right_schemas(schema):
    accepted("08.1", schema)


def layer_of(name):
    match = re.match(r"/model/layers\.(\d+)/", name)
    return int(match.group(1)) if match else None


def events_of(files):
    return [e for f in files for e in json.loads(Path(f).read_text())]


def with_fences(files):
    total = Counter()
    for e in events_of(files):
        if e["cat"] == "Node" and layer_of(e["name"]) is not None:  # mistake: fences counted too
            total[layer_of(e["name"])] += e["dur"] / len(files)
    return dict(total)


def total_not_mean(files):
    return {
        n: us * len(files) for n, us in ex08.time_per_layer(files).items()
    }  # mistake: the sum over steps


def prefix_match(files):
    events = [e for e in events_of(files) if e["name"].endswith("_kernel_time")]
    return {
        n: sum(e["dur"] for e in events if f"/model/layers.{n}" in e["name"])
        / len(files)  # mistake: no "/"
        for n in {layer_of(e["name"]) for e in events} - {None}
    }


def string_keys(files):
    return {str(n): us for n, us in ex08.time_per_layer(files).items()}


def outside_layers_too(files):
    total = Counter()
    for e in events_of(files):
        if e["name"].endswith("_kernel_time"):  # mistake: embedding and lm_head as well
            total[layer_of(e["name"]) if layer_of(e["name"]) is not None else -1] += e["dur"] / len(
                files
            )
    return dict(total)


def in_ms(files):
    return {n: us / 1000 for n, us in ex08.time_per_layer(files).items()}


def twelve_layers(files):
    """Hard-coded: the 12 layers of a profile the learner saw."""
    per_layer = ex08.time_per_layer(files)
    return {n: per_layer.get(n, 0.0) for n in range(12)}


def median_over_files(files):
    per_file = [ex08.time_per_layer([f]) for f in files]
    return {n: float(np.median([p[n] for p in per_file])) for n in per_file[0]}


def mean_per_kernel(files):
    """The mean over kernel events instead of over files (steps)."""
    durations = defaultdict(list)
    for e in events_of(files):
        if (
            e["cat"] == "Node"
            and e["name"].endswith("_kernel_time")
            and layer_of(e["name"]) is not None
        ):
            durations[layer_of(e["name"])].append(e["dur"])
    return {n: sum(d) / len(d) for n, d in durations.items()}


def single_digit_pattern(files):
    total = Counter()
    for e in events_of(files):
        match = re.match(r"/model/layers\.(\d)/", e["name"])  # mistake: one digit only
        if e["cat"] == "Node" and e["name"].endswith("_kernel_time") and match:
            total[int(match[1])] += e["dur"] / len(files)
    return dict(total)


def as_a_list(files):
    per_layer = ex08.time_per_layer(files)
    return [per_layer[n] for n in sorted(per_layer)]


def last_file_only(files):
    return ex08.time_per_layer(files[-1:])


REQUIREMENTS_08_2 = [
    ("a function time_per_layer(profile_files)", {0: 1.0}, "expected your function time_per_layer"),
    ("returns a dict", as_a_list, "expected a dict"),
    ("keyed by the layer number N as an int", string_keys, "(an int)"),
    ("every layer N, whatever the model's depth", twelve_layers, "expected one entry per layer"),
    ("N up to the slash of /model/layers.N/", prefix_match, "up to the slash"),
    ("nodes outside a layer do not count", outside_layers_too, "extra [-1]"),
    ("kernel time: fence events are not", with_fences, "fence events"),
    ("per step: the mean over the files, not the total", total_not_mean, "mean per step"),
    ("the mean over all the files", last_file_only, "one file's time"),
    ("in µs", in_ms, "1000 times too low"),
]


OTHER_MISTAKES_08_2 = [  # (wrong answer, what the feedback says)
    (
        median_over_files,
        ("one file's time", "differs: too"),
    ),  # an odd number of files: one file's time
    (mean_per_kernel, "differs: too"),
    (single_digit_pattern, "missing [10"),
    (lambda files: ex08.time_per_layer(files[:1]), "one file's time"),
    (lambda files: 1 / 0, "ZeroDivisionError"),
]


@pytest.mark.parametrize(
    "wrong, named",
    [
        *rows("requirement", REQUIREMENTS_08_2),
        *rows(
            "mistake",
            OTHER_MISTAKES_08_2,
            ids=["median", "mean-per-kernel", "one-digit", "first-file", "raises"],
        ),
    ],
)
def test_08_2_wrong_answers_are_named_without_a_number(wrong, named):
    message = refused("08.2", wrong).message
    assert any(n in message for n in ((named,) if isinstance(named, str) else named)), message
    assert not re.search(r"\d+\.\d", message), f"a number that may be an expected value: {message}"


def counter_split(files):
    per_step = []
    for f in files:
        with open(f) as handle:
            step = Counter()
            for e in json.load(handle):
                name = e["name"]
                if (
                    e.get("cat") == "Node"
                    and name.startswith("/model/layers.")
                    and name.endswith("_kernel_time")
                ):
                    step[int(name.split("/")[2].split(".")[1])] += e["dur"]
            per_step.append(step)
    layers = set().union(*per_step)
    return {n: sum(s[n] for s in per_step) / len(per_step) for n in layers}


def one_regex(files):
    pattern = re.compile(r"^/model/layers\.(\d+)/.*_kernel_time$")
    hits = [
        (int(m[1]), e["dur"])
        for f in files
        for e in json.loads(Path(f).read_text())
        if e["cat"] == "Node" and (m := pattern.match(e["name"]))
    ]
    return {n: sum(d for k, d in hits if k == n) / len(files) for n in {k for k, _ in hits}}


def notebook_loop_per_layer(files):
    """Notebook 08's own per-operator loop, keyed by layer instead of operator (numpy ints as keys, a Counter)."""
    per_layer = Counter()
    events = [e for f in files for e in json.load(open(f))]
    for e in events:
        if (
            e.get("cat") == "Node"
            and e["name"].endswith("_kernel_time")
            and layer_of(e["name"]) is not None
        ):
            per_layer[np.int64(layer_of(e["name"]))] += e["dur"] / len(files)  # µs per decode step
    return per_layer


@pytest.mark.parametrize(
    "right",
    [counter_split, one_regex, notebook_loop_per_layer],
    ids=["counter-per-step", "one-regex", "notebook-loop"],
)
def test_08_2_accepts_other_right_answers(right):
    accepted("08.2", right)
