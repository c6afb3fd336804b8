"""Checks of notebook 08's exercises: a JSON schema for a new extraction task, and time per layer from profiles."""
from __future__ import annotations

import json
import re

from helpers.checks._common import Wrong, require_callable

PROBES = [  # 08.1: (an answer, accepted by a right schema?, what accepting or refusing it shows)
    ({"name": "Ana Lima", "age": 0}, True, "a right answer (age 0)"),
    ({"name": "Maximilian Alexander von Hohenberg-Ried", "age": 120}, True, "a right answer (39 characters, 120)"),
    ({"name": "Ana Lima"}, False, 'an answer without "age": make both keys "required"'),
    ({"age": 31}, False, 'an answer without "name": make both keys "required"'),
    ({"name": "Ana Lima", "age": "31"}, False, 'a string as the age: "age" must be "type": "integer"'),
    ({"name": "Ana Lima", "age": 31.5}, False, 'the age 31.5: a whole number is "type": "integer", not "number"'),
    ({"name": "Ana Lima", "age": 31, "city": "Oslo"}, False, 'an extra key: forbid them ("additionalProperties")'),
    ({"name": "Ana Lima", "age": -1}, False, 'the age -1: bound it below ("minimum")'),
    ({"name": "Ana Lima", "age": 121}, False, 'the age 121: bound it above ("maximum")'),
    ({"name": "Ana " * 250, "age": 31}, False, 'a 1000-character name: bound the string ("maxLength")'),
]
SYSTEM = 'You extract the name and the age of the person named in a sentence, as JSON with the keys "name" and "age".'
SENTENCES = ["Yusuf Demir turned 29 in March.", "At 83, Helga Braun still swims in the lake every day.",
             "The youngest player, Lucas Moreau, is 17.", "Mei Chen, 41, runs the bookshop on the corner."]
REFERENCE = {"type": "object", "required": ["name", "age"], "additionalProperties": False, "properties": {
    "name": {"type": "string", "maxLength": 1000}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}}


def check_person_schema(answer, max_new=200):
    import jsonschema
    import onnxruntime_genai as og

    from helpers.llm import cached_int4_model

    if not isinstance(answer, dict):
        raise Wrong(f"expected your JSON schema as a dict, got {type(answer).__name__}")
    try:
        jsonschema.validators.validator_for(answer).check_schema(answer)
    except jsonschema.SchemaError as err:
        raise Wrong(f"expected a valid JSON schema; jsonschema says: {err.message}") from err
    validator = jsonschema.validators.validator_for(answer)(answer)
    for instance, accept, what in PROBES:
        if validator.is_valid(instance) != accept:
            raise Wrong(f"expected your schema to {'accept' if accept else 'refuse'} {what}; it "
                        f"{'refuses' if accept else 'accepts'} {json.dumps(instance)[:80]}")
    if (answer.get("x-guidance") or {}).get("whitespace_flexible") is not False:
        raise Wrong('expected whitespace bounded too (JSON allows any run of it, so an answer can run until '
                    'max_length): "x-guidance": {"whitespace_flexible": false}')
    model = og.Model(str(cached_int4_model(log=lambda _: None)))
    tokenizer, answers = og.Tokenizer(model), []
    for sentence in SENTENCES:  # fresh sentences: the answers must parse and validate, and end by themselves
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": sentence}]
        ids = tokenizer.encode(tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True))
        params, new = og.GeneratorParams(model), []
        params.set_search_options(max_length=len(ids) + max_new, do_sample=False)
        try:
            params.set_guidance("json_schema", json.dumps(answer))
            generator = og.Generator(model, params)
            generator.append_tokens(ids)
            while not generator.is_done():
                generator.generate_next_token()
                new.append(int(generator.get_next_tokens()[0]))
        except Exception as err:  # the grammar library refuses what it cannot compile: said, not hidden
            raise Wrong(f"expected a schema onnxruntime-genai can use; it raised {type(err).__name__}: {err}") from err
        text = tokenizer.decode(new)
        if len(new) >= max_new:
            raise Wrong(f"on {sentence!r}: expected the answer to end by itself, it ran until max_length: "
                        f"{text[:60]!r}...; bound every string, number and whitespace")
        if not jsonschema.Draft202012Validator(REFERENCE).is_valid(json.loads(text)):
            raise Wrong(f"on the sentence {sentence!r}: your schema let the model answer {text!r}")
        answers.append(f"{sentence!r} -> {text}")
    return answers + ["every answer parsed and validated; right values are the model's job, not the schema's"]


def _profiles(folder, seed, layers=12, steps=3):  # enable_profiling files with fences, non-layer nodes, a session
    import numpy as np

    rng, paths = np.random.default_rng(seed), []
    nodes = [("embed_tokens/Gather", "GatherBlockQuantized"), ("lm_head/MatMul_Q4", "MatMulNBits")] + [
        (f"layers.{n}/attn/{node}", node.split("_")[0]) for n in range(layers) for node in ("MatMul_Q4", "GQA_0")]
    for step in range(steps):
        events = [{"cat": "Session", "name": "model_run", "dur": 90_000}] + [
            {"cat": "Node", "name": f"/model/{node}_{kind}", "dur": int(rng.integers(low, low * 20)), "args": {
                "op_name": op}} for node, op in nodes for kind, low in (("fence_before", 2), ("kernel_time", 40))]
        paths.append(folder / f"decode_{step}.json")
        paths[-1].write_text(json.dumps(events))
    return paths


def _per_layer(paths, kernel_only=True):
    total: dict[int, float] = {}
    for path in paths:
        for e in json.loads(open(path).read()):
            match = re.match(r"/model/layers\.(\d+)/", e["name"])
            if e["cat"] == "Node" and match and (e["name"].endswith("_kernel_time") or not kernel_only):
                total[int(match[1])] = total.get(int(match[1]), 0) + e["dur"] / len(paths)
    return total


def check_time_per_layer(answer):
    import tempfile
    from pathlib import Path

    require_callable(answer, "time_per_layer(profile_files)")
    with tempfile.TemporaryDirectory() as folder:
        paths = _profiles(Path(folder), seed=8)
        want = _per_layer(paths)
        try:
            got = answer([str(p) for p in paths])
        except Exception as err:  # whatever the learner's function raises is reported, not hidden
            raise Wrong(f"expected your function to run on {len(paths)} profile files; it raised {err!r}") from err
        keys = set(got) if isinstance(got, dict) else set()
        if keys != set(want):
            raise Wrong(f"expected a dict with one entry per layer, keyed by its number (an int): missing "
                        f"{sorted(set(want) - keys)}, extra {sorted(keys - set(want), key=repr)} (only layers count)")
        for n in [n for n in sorted(want) if abs(got[n] - want[n]) > 1e-6 * want[n]][:1]:
            ratio, prefixed = got[n] / want[n], sum(v for m, v in want.items() if str(m).startswith(str(n)))
            hint = ("fence events are not kernel time" if abs(got[n] - _per_layer(paths, False)[n]) < 1e-6
                    else "expected the mean per step (per file), not the total" if abs(ratio - len(paths)) < 1e-6
                    else f"layers.{n}/ matched layers.{n}0/, ... too: match the number up to the slash"
                    if abs(got[n] - prefixed) < 1e-6 and prefixed != want[n]
                    else f"too {'high' if ratio > 1 else 'low'}{', by more than 10 %' if abs(ratio - 1) > 0.1 else ''}")
            raise Wrong(f"layer {n} differs: {hint}")
    return [f"{len(want)} layers, mean kernel time per step over {len(paths)} profiles, fences and sessions left out"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {"08.1": check_person_schema, "08.2": check_time_per_layer}
