"""Solutions for notebook 08's exercises (a JSON schema for a new extraction task; time per layer from profiles)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

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
