"""Checks of notebook 08's exercises: a JSON schema for a new extraction task, and time per layer from profiles."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from helpers.grading.checks import _common
from helpers.grading.checks._common import Wrong, require_callable

NAMES_40 = [
    "Maximilian Alexander von Hohenberg-Riedl",
    "Anna-Katharina Wilhelmina Oppenheimer-Ru",
    "Jean-Baptiste Emmanuel Rousseau-Delacroi",
    "Ngozi Adaeze Chukwuemeka-Okonkwo Obioraa",
]
SENTENCES = [
    "Yusuf Demir turned 29 in March.",
    "At 83, Helga Braun still swims in the lake every day.",
    "The youngest player, Lucas Moreau, is 17.",
    "Mei Chen, 41, runs the bookshop on the corner.",
    "Our neighbour Tomás Ruiz celebrated his 65th birthday yesterday.",
    "Priya Nair, aged 34, won the chess tournament.",
]
SYSTEM = 'You extract the name and the age of the person named in a sentence, as JSON with the keys "name" and "age".'
REFERENCE = {
    "type": "object",
    "required": ["name", "age"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 200},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
}
LONG_NAME = 200  # characters: a name this long could fill the check's max_new_tokens=200 on its own


def person_probes(rng):
    """(answer, should a right schema accept it?, the requirement it tests), names and ages drawn by ``rng``."""
    name40, age = str(rng.choice(NAMES_40)), int(rng.integers(1, 120))
    assert len(name40) == 40
    short = str(rng.choice(["Bo", "Li", "Al"]))
    return [
        (
            {"name": name40, "age": 0},
            True,
            f"a {len(name40)}-character name with the age 0 (names up to 40 "
            "characters must fit; ages are 0 to 120)",
        ),
        (
            {"name": short, "age": 120},
            True,
            "a 2-character name with the age 120 (ages are 0 to 120)",
        ),
        (
            {"name": "Zoë O'Brien-Núñez", "age": age},
            True,
            "a name with accents, an apostrophe and a hyphen (a name "
            "is any string up to 40 characters)",
        ),
        ({"name": name40}, False, 'an answer without "age" (both keys are required)'),
        ({"age": age}, False, 'an answer without "name" (both keys are required)'),
        (
            {"name": name40, "age": age, "city": "Oslo"},
            False,
            "an extra key (nothing else than name and age)",
        ),
        ({"name": short, "age": str(age)}, False, "the age as a string (a whole number of years)"),
        (
            {"name": short, "age": age + 0.5},
            False,
            f"the age {age + 0.5} (a whole number of years)",
        ),
        ({"name": short, "age": None}, False, "the age null (a whole number of years)"),
        ({"name": None, "age": age}, False, "the name null (the name is a string)"),
        ({"name": 7, "age": age}, False, "a number as the name (the name is a string)"),
        ({"name": short, "age": -1}, False, "the age -1 (ages are 0 to 120)"),
        ({"name": short, "age": 121}, False, "the age 121 (ages are 0 to 120)"),
        (
            {"name": "Ana " * (LONG_NAME // 4), "age": age},
            False,
            f"a {LONG_NAME}-character name (the string is "
            f"bounded: a name that long could fill max_new_tokens={LONG_NAME} on its own)",
        ),
    ]


WHITESPACE_PROBES = [  # (where, the whitespace, an example answer with a long run of it there): prompts that invite it
    ("after '{'", "spaces", "{" + " " * 48 + '"name":"{n}","age":{a}}'),
    ("before ','", "newlines", '{"name":"{n}"' + "\n" * 48 + ',"age":{a}}'),
    ("before ':'", "newlines", '{"name"' + "\n" * 48 + ':"{n}","age":{a}}'),
    ("after ','", "newlines", '{"name":"{n}",' + "\n" * 48 + '"age":{a}}'),
]
WHITESPACE_RUN = (
    16  # whitespace characters in a row: more than any bounded JSON layout of this answer needs
)


def _generate(model, tokenizer, schema, ids, max_new):
    """Greedy new tokens guided by ``schema``, at most ``max_new``: (text, number of tokens)."""
    import numpy as np

    from helpers.grading.checks.ex07 import fresh_generator

    try:
        generator = fresh_generator(model, ids, len(ids) + max_new, json.dumps(schema))
        new = []
        while not generator.is_done():
            generator.generate_next_token()
            new.append(int(generator.get_next_tokens()[0]))
    except Exception as err:  # the grammar library refuses what it cannot compile: said, not hidden
        raise Wrong(
            f"expected a schema onnxruntime-genai can use; it raised {type(err).__name__}: {err}"
        ) from err
    return tokenizer.decode(np.array(new, dtype=np.int32)), len(new)


def check_person_schema(answer, max_new=200):
    import jsonschema

    from helpers.grading.checks.ex07 import smollm

    if not isinstance(answer, dict):
        raise Wrong(f"expected your JSON schema as a dict, got {type(answer).__name__}")
    try:
        jsonschema.validators.validator_for(answer).check_schema(answer)
    except jsonschema.SchemaError as err:
        raise Wrong(f"expected a valid JSON schema; jsonschema says: {err.message}") from err
    validator = jsonschema.validators.validator_for(answer)(answer)
    rng = _common.rng()  # names, ages and sentences, new with each seed
    for instance, accept, what in person_probes(rng):
        if validator.is_valid(instance) != accept:
            raise Wrong(
                f"expected your schema to {'accept' if accept else 'refuse'} {what}; it "
                f"{'refuses' if accept else 'accepts'} {json.dumps(instance, ensure_ascii=False)[:80]}"
            )
    model, tokenizer = smollm()
    answers = []
    for sentence in rng.choice(
        SENTENCES, 3, replace=False
    ):  # unseen: answers parse, validate, end by themselves
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": str(sentence)},
        ]
        ids = tokenizer.encode(
            tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True)
        )
        text, count = _generate(model, tokenizer, answer, ids, max_new)
        if count >= max_new:
            raise Wrong(
                f"on {str(sentence)!r}: expected the answer to end by itself, it ran until max_length: "
                f"{text[:60]!r}...; bound every string, number and whitespace"
            )
        try:
            parsed = json.loads(text)
        except ValueError as err:
            raise Wrong(
                f"on the sentence {str(sentence)!r}: your schema let the model answer {text!r}, which is not "
                "JSON"
            ) from err
        if not jsonschema.Draft202012Validator(REFERENCE).is_valid(parsed):
            raise Wrong(
                f"on the sentence {str(sentence)!r}: your schema let the model answer {text!r}"
            )
        answers.append(f"{str(sentence)!r} -> {text}")
    # Whitespace, judged by what generation does: a prompt of example answers with long runs of whitespace invites
    # the model to write some; a schema that bounds whitespace (any way the grammar library applies) stops it.
    names = [str(n) for n in rng.choice(["Bo", "Li", "Al", "Ida", "Tom"], 2, replace=False)]
    for where, label, example in WHITESPACE_PROBES:
        prompt = "".join(
            example.replace("{n}", n).replace("{a}", str(int(rng.integers(5, 90)))) + "\n"
            for n in names
        )
        text, _ = _generate(model, tokenizer, answer, tokenizer.encode(prompt), 32)
        run = max((len(r) for r in re.findall(r"\s+", text)), default=0)
        if run >= WHITESPACE_RUN:
            options = sorted(set(answer.get("x-guidance") or {}) - {"whitespace_flexible"})
            unapplied = (
                f" (your schema's x-guidance has {', '.join(options)}: the grammar library inside this "
                "onnxruntime-genai did not apply it that way)"
                if options
                else ""
            )
            raise Wrong(
                f"expected whitespace bounded too: invited by a prompt, the model wrote {run} {label} or "
                f"more in a row {where} with your schema ({text[:24]!r}...), and whitespace that can go on "
                f"can run until max_length{unapplied}"
            )
    return answers + [
        "every answer parsed and validated, and ended by itself",
        "whitespace stayed bounded where a prompt invited long runs of it",
        "right values are the model's job, not the schema's",
    ]


LAYER_NODES = [
    (
        "input_layernorm/SimplifiedLayerNormalization",
        "SimplifiedLayerNormalization",
    ),  # 08.2: per layer
    ("attn/qkv_proj/MatMul_Q4", "MatMulNBits"),
    ("attn/GroupQueryAttention", "GroupQueryAttention"),
    ("attn/o_proj/MatMul_Q4", "MatMulNBits"),
    ("mlp/gate_proj/MatMul_Q4", "MatMulNBits"),
    ("mlp/down_proj/MatMul_Q4", "MatMulNBits"),
]


def _profiles(folder, rng, layers, steps):
    """``steps`` profiles as ``enable_profiling`` writes them, durations drawn by ``rng``."""
    paths = []
    nodes = [
        ("embed_tokens/GatherBlockQuantized", "GatherBlockQuantized"),
        ("norm/SkipSimplifiedLayerNorm", "SkipSimplifiedLayerNormalization"),
        ("lm_head/MatMul_Q4", "MatMulNBits"),
    ] + [(f"layers.{n}/{node}", op) for n in range(layers) for node, op in LAYER_NODES]
    for step in range(steps):
        events = [
            {
                "cat": "Session",
                "name": "model_run",
                "ph": "X",
                "dur": int(rng.integers(60_000, 90_000)),
            }
        ] + [
            {
                "cat": "Node",
                "name": f"/model/{node}_{kind}",
                "ph": "X",
                "dur": int(rng.integers(low, low * 20)),
                "args": {"op_name": op},
            }
            for node, op in nodes
            for kind, low in (("fence_before", 2), ("kernel_time", 40), ("fence_after", 1))
        ]
        paths.append(folder / f"decode_{step}_{rng.integers(10**6)}.json")
        paths[-1].write_text(json.dumps(events))
    return paths


def _per_layer(paths, kernel_only=True):
    total: dict[int, float] = {}
    for path in paths:
        for e in json.loads(open(path).read()):
            match = re.match(r"/model/layers\.(\d+)/", e["name"])
            if (
                e["cat"] == "Node"
                and match
                and (e["name"].endswith("_kernel_time") or not kernel_only)
            ):
                total[int(match[1])] = total.get(int(match[1]), 0) + e["dur"] / len(paths)
    return total


def _layer_hint(got, want, n, paths) -> str:
    """What differs for layer ``n``, keyed to a mistake the check can reproduce, else a direction and a size."""
    ratio = got[n] / want[n]
    prefixed = sum(v for m, v in want.items() if str(m).startswith(str(n)))
    per_file = [_per_layer([p])[n] for p in paths]
    if abs(got[n] - _per_layer(paths, False)[n]) < 1e-6 * want[n]:
        return "fence events are not kernel time"
    if abs(ratio - len(paths)) < 1e-6:
        return "expected the mean per step (per file), not the total"
    if abs(got[n] - prefixed) < 1e-6 * want[n] and prefixed != want[n]:
        return f"layers.{n}/ matched layers.{n}0/, ... too: match the number up to the slash"
    if any(abs(got[n] - v) < 1e-6 * want[n] for v in per_file):
        return f"it is one file's time: expected the mean over all {len(paths)} files"
    if abs(ratio * 1000 - 1) < 1e-6:
        return "1000 times too low: the profile's durations are in µs, and so is the answer"
    return f"too {'high' if ratio > 1 else 'low'}{', by more than 10 %' if abs(ratio - 1) > 0.1 else ''}"


def check_time_per_layer(answer):
    import tempfile

    import numpy as np

    require_callable(answer, "time_per_layer(profile_files)")
    rng, details = _common.rng(1), []  # depths, steps and durations, new with each seed
    # two runs whose layer counts never coincide, so that no fixed list of layers fits both
    for layers, steps in (
        (int(rng.integers(11, 14)), int(rng.integers(3, 5))),
        (int(rng.integers(14, 19)), int(rng.integers(2, 6))),
    ):
        with tempfile.TemporaryDirectory() as folder:
            paths = _profiles(Path(folder), rng, layers, steps)
            want = _per_layer(paths)
            what = f"{len(paths)} profile files of a {layers}-layer model"
            try:
                got = answer([str(p) for p in paths])
            except (
                Exception
            ) as err:  # whatever the learner's function raises is reported, not hidden
                raise Wrong(f"expected your function to run on {what}; it raised {err!r}") from err
            if not isinstance(got, dict):
                raise Wrong(
                    f"expected a dict (layer number -> µs per step) for {what}, got {type(got).__name__}"
                )
            keys = set(got)
            if keys != set(want):
                raise Wrong(
                    f"on {what}: expected one entry per layer, keyed by its number (an int): missing "
                    f"{sorted(set(want) - keys, key=repr)}, extra {sorted(keys - set(want), key=repr)} "
                    "(only layers count)"
                )
            for n, value in sorted(got.items()):
                if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                    raise Wrong(
                        f"on {what}: expected µs per step (a number) for layer {n}, got {value!r:.40}"
                    )
            for n in [n for n in sorted(want) if abs(got[n] - want[n]) > 1e-6 * want[n]][:1]:
                raise Wrong(f"on {what}: layer {n} differs: {_layer_hint(got, want, n, paths)}")
            details.append(
                f"{what}: {len(want)} layers, mean kernel time per step, fences and other nodes left out"
            )
    return details


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {"08.1": check_person_schema, "08.2": check_time_per_layer}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)

person_schema = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},  # bounded: cannot loop
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
    "x-guidance": {"whitespace_flexible": False},  # no free whitespace
}


def time_per_layer(profile_files) -> dict:
    """Mean kernel time per decode step (µs) of each /model/layers.N/ node group, keyed by N."""
    total = defaultdict(float)
    for path in profile_files:
        for event in json.loads(Path(path).read_text()):
            match = re.match(r"/model/layers\.(\d+)/", event["name"])
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and match:
                total[int(match.group(1))] += event["dur"]
    return {layer: us / len(profile_files) for layer, us in total.items()}


def solve_1(workdir: Path):
    return person_schema


def solve_2(workdir: Path):
    return time_per_layer
