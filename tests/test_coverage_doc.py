"""docs/coverage.md against the registries it is generated from (scripts/gen_coverage.py).

Adding a kernel, a rule, a version adapter, a decomposition or a StableHLO emitter changes the tables: this test
then fails until ``python scripts/gen_coverage.py`` is run and the new file committed with the change.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import onnx.defs
import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "coverage.md"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_coverage", REPO / "scripts" / "gen_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fresh(generator):
    return generator.generate()


def test_committed_tables_match_the_registries(fresh):
    committed = DOC.read_text(encoding="utf-8")
    if committed != fresh:
        stale = [line for line in fresh.splitlines() if line not in set(committed.splitlines())][:10]
        pytest.fail(
            "docs/coverage.md is stale: run python scripts/gen_coverage.py; rows that changed:\n" + "\n".join(stale)
        )


def test_standard_table_lists_every_onnx_operator(fresh):
    # The operator list is onnx's own (onnx.defs), not one opconv wrote.
    expected = {(s.domain or "ai.onnx", s.name) for s in onnx.defs.get_all_schemas_with_history()}
    section = fresh.split("## ONNX standard operators")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| `([^`]+)` \| ([\w.]+) \|", section, re.M))
    assert {(d, op) for op, d in listed} == expected
