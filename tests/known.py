"""The one list of expected failures (``tests/known_failures.json``), each with a reason.

A test asks :func:`check` with its suite and case name and whether the case
passed.  A listed case that passes fails the test too, so the list only ever
shrinks: remove the entry when the feature lands.
"""

from __future__ import annotations

import json
import os

import pytest

PATH = os.path.join(os.path.dirname(__file__), "known_failures.json")

with open(PATH, encoding="utf-8") as _f:
    KNOWN: dict[str, dict[str, str]] = json.load(_f)

_used: set[tuple[str, str]] = set()


def reason(suite: str, case: str) -> str | None:
    return KNOWN.get(suite, {}).get(case)


def check(suite: str, case: str, passed: bool, detail: str = "") -> None:
    """Assert the outcome of ``case`` matches the list: pass if unlisted, fail if listed."""
    why = reason(suite, case)
    _used.add((suite, case))
    if why is None:
        assert passed, detail or f"{case} failed"
    elif passed:
        pytest.fail(
            f"{case} is listed as a known failure of {suite} ({why}) but passes: remove it from "
            f"tests/known_failures.json"
        )
    else:
        pytest.xfail(why)


def unused_entries() -> list[tuple[str, str]]:
    return [(s, c) for s, cases in KNOWN.items() for c in cases if (s, c) not in _used]
