"""Plumbing shared by the checkers' requirement tables (tests/test_checks_exNN.py)."""
from __future__ import annotations


def unique(*tables: dict) -> list[str]:
    """The names of the table rows, without the rows of a later table that repeat an earlier row's answer."""
    seen, names = [], []
    for table in tables:
        for name, (answer, _) in table.items():
            if not any(answer is other for other in seen):
                seen.append(answer)
                names.append(name)
    return names
