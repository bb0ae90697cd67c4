"""The committed HLO schemas (opconv/schemas/hlo.json) against their generator and their source.

The generator, ``scripts/gen_hlo_schemas.py``, holds the op table; these tests
check that the committed file is its output, that the table covers exactly the
141 sections of the dialect's operation-semantics document, that the sections
which are only a title say where they were completed from, and a few facts an
error in the table would most likely break.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from opconv.schemas import dialect_schemas, lookup

REPO = Path(__file__).resolve().parents[1]
SPEC = Path(__file__).resolve().parents[2] / "shared" / "specs" / "hlo-operation-semantics.zh.txt"

#: section headings of the document: "3.12. AveragePool"
HEADING = re.compile(r"^3\.(\d+)\.\s+(\S+)\s*$")

TITLE_ONLY = {
    "BCELoss",
    "CustomCall",
    "DepthToSpace",
    "Dropout",
    "Erf",
    "Gemm",
    "GeneralSplit",
    "GetTupleElement",
    "GlobalMaxPool",
    "GroupNorm",
    "If",
    "PartialReduce",
    "ShiftRightArithmetic",
    "ShiftRightLogical",
    "SliceInDim",
    "Tile",
    "Tuple",
    "While",
}


def _load_generator():
    path = REPO / "scripts" / "gen_hlo_schemas.py"
    spec = importlib.util.spec_from_file_location("gen_hlo_schemas", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spec_sections() -> list[tuple[int, str, bool]]:
    """(number, title, title_only) of every ``3.N`` section of the Chinese document."""
    lines = SPEC.read_text(encoding="utf-8").splitlines()
    heads = [(i, HEADING.match(line.strip())) for i, line in enumerate(lines)]
    heads = [(i, m) for i, m in heads if m]
    sections = []
    for k, (i, m) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        body = [line for line in lines[i + 1 : end] if line.strip()]
        sections.append((int(m.group(1)), m.group(2), not body))
    return sections


needs_spec = pytest.mark.skipif(
    not SPEC.exists(), reason=f"the shared specification folder is absent ({SPEC} not found)"
)


@pytest.fixture(scope="module")
def hlo():
    return {s.name: s for s in dialect_schemas("hlo")}


def test_committed_file_is_the_generator_output():
    gen = _load_generator()
    committed = (REPO / "opconv" / "schemas" / "hlo.json").read_text(encoding="utf-8")
    assert committed == gen.render(), "opconv/schemas/hlo.json is stale: run scripts/gen_hlo_schemas.py"
    assert gen.main(["--check"]) == 0


def test_exactly_141_ops(hlo):
    assert len(hlo) == 141
    assert len(dialect_schemas("hlo")) == 141  # one version each
    assert all(s.domain == "" and s.version == 1 for s in hlo.values())


@needs_spec
def test_op_names_are_the_section_titles(hlo):
    sections = _spec_sections()
    assert [n for n, _, _ in sections] == list(range(1, 142))
    assert {title for _, title, _ in sections} == set(hlo)


def test_title_only_sections_say_where_they_were_completed_from(hlo):
    completed = {name for name, s in hlo.items() if s.completed_from}
    assert completed == TITLE_ONLY
    for name in TITLE_ONLY:
        assert hlo[name].doc and hlo[name].notes, name


@needs_spec
def test_title_only_list_matches_the_document():
    assert {title for _, title, empty in _spec_sections() if empty} == TITLE_ONLY


def test_every_op_is_documented_and_typed(hlo):
    for name, s in hlo.items():
        assert s.doc, name
        for p in s.inputs + s.outputs:
            if p.type != "Tuple":  # tuples have no schema type (see the generator)
                assert s.allowed_types(p), f"{name}.{p.name}"


def test_conv_has_group_counts(hlo):
    for name in ("Conv", "ConvBias"):
        conv = hlo[name]
        assert conv.attribute("feature_group_count").default == 1
        assert conv.attribute("batch_group_count").default == 1
        assert conv.attribute("input_spatial_dimensions").required
    assert [p.name for p in hlo["ConvBias"].inputs] == ["lhs", "rhs", "bias"]


def test_dot_general_has_contracting_and_batch_dims(hlo):
    dot = hlo["DotGeneral"]
    for side in ("lhs", "rhs"):
        assert dot.attribute(f"{side}_contracting_dimensions").type == "ints"
        assert dot.attribute(f"{side}_batching_dimensions").type == "ints"


def test_add_has_broadcast_dimensions(hlo):
    attr = hlo["Add"].attribute("broadcast_dimensions")
    assert attr is not None and attr.type == "ints" and not attr.required
    assert hlo["Sub"].attribute("broadcast_dimensions") is None  # the document gives Sub none


def test_rem_has_two_inputs(hlo):
    rem = hlo["Rem"]
    assert [p.name for p in rem.inputs] == ["lhs", "rhs"]
    assert (rem.min_inputs, rem.max_inputs) == (2, 2)
    assert "single input" in rem.notes


def test_known_defects_are_corrected_and_noted(hlo):
    assert "+inf" in hlo["Rsqrt"].notes
    assert "away from zero" in hlo["Round"].doc
    assert hlo["AveragePool"].allowed_types(hlo["AveragePool"].outputs[0]) == (
        "tensor(float16)",
        "tensor(float32)",
        "tensor(float64)",
    )
    gather = hlo["Gather"]
    assert gather.allowed_types(gather.inputs[1]) == ("tensor(int32)", "tensor(int64)")
    assert "shape" in gather.notes


def test_enum_computations_and_regions(hlo):
    for name in ("Reduce", "ReduceWindow", "ScatterND", "SelectAndScatter"):
        attr = hlo[name].attribute("computation")
        assert attr.type == "string" and "ADD" in attr.allowed, name
        assert "enum" in hlo[name].notes, name
    assert hlo["ReduceWindow"].attribute("auto_pad").default == "NOTSET"
    assert hlo["ReduceWindow"].attribute("ceil_mode").default is False
    assert hlo["Map"].attribute("computation").type == "region"
    assert {a.name for a in hlo["While"].attributes if a.type == "region"} == {"cond", "body"}
    assert {a.name for a in hlo["If"].attributes if a.type == "region"} == {"true_branch", "false_branch"}


def test_variadic_arity(hlo):
    concat = hlo["Concatenate"]
    assert concat.inputs[-1].option == "variadic"
    assert concat.min_inputs == 1 and concat.max_inputs == 2**31 - 1
    reduce_ = hlo["Reduce"]
    assert reduce_.min_inputs == 2  # at least one input and its init value


def test_lookup_finds_hlo_ops():
    assert lookup("hlo", "DotGeneral", 1).name == "DotGeneral"
    assert lookup("hlo", "Abs").type_constraints["T"][-1] == "tensor(float64)"
