"""Generate ``opconv/schemas/onnx_contrib.json``: ONNX Runtime's contrib operators and ai.onnx.training.

Usage::

    python scripts/gen_onnx_contrib_schemas.py                  # (re)write onnx_contrib.json
    python scripts/gen_onnx_contrib_schemas.py --check          # exit 1 if the committed file is stale
    python scripts/gen_onnx_contrib_schemas.py --recover-names  # re-derive scripts/contrib_text_ops.json

Two sources, both in the "onnx" dialect:

1. ``com.microsoft`` and ``com.microsoft.nchwc``: every schema the installed ONNX Runtime
   reports (``onnxruntime_pybind11_state.get_all_operator_schema()``), converted with the
   rules of ``gen_onnx_schemas.py``.  ``com.ms.internal.nhwc`` is ORT's private layout
   domain and is skipped.  ORT also registers schemas of its own in the plain ai.onnx
   domain (LayerNormalization-1, SimplifiedLayerNormalization-1, ONNX's long-removed
   experimental ops such as Affine-1 or Crop-1): those ONNX does not define at that
   version are taken too, so that models ORT runs are valid.  An op ORT has no CPU kernel
   for gets a note saying so, which the executor's "no kernel" refusal quotes.
2. ``ai.onnx.training``: these ops are not in ORT's inference build, so they are read from
   ``shared/specs/onnx-contrib-operators.txt`` -- ORT's ContribOperators.md of early 2020,
   as text, with its headings lost.

The text also describes com.microsoft ops; those come from ORT (which reports the same
versions) and the text only serves to check that each of them is present.  Where ORT's
schema has moved on from the text (renamed inputs, dropped attributes, widened types),
the entry's ``notes`` says so: ORT is what runs models today.

Recovering the text's op names.  Each section of the text is: description paragraphs,
then ``Version``, ``Attributes``, ``Inputs``, ``Outputs`` and ``Type Constraints`` blocks;
its name heading is gone.  ``--recover-names`` gives each section the name of the known
schema it resembles most (same attribute, input, output and constraint names; similar
description), assigning names in alphabetical order within each run of sections, as
ContribOperators.md lists them -- that order alone tells apart Irfft and Rfft, whose
sections are identical.  A section no schema resembles (GraphCall, which ORT and ONNX
dropped) is named from its description ("The GraphCall operator ...").  The result is
committed as ``scripts/contrib_text_ops.json`` so that it can be reviewed, and the
generator checks that it still lines up with the text.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import gen_onnx_schemas as base  # sibling script: the shared converters
from onnx import AttributeProto
from onnxruntime import __version__ as ORT_VERSION
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

from opconv.schemas import AttrParam, OpSchema, Param, dump

ROOT = base.ROOT
OUTPUT = ROOT / "opconv" / "schemas" / "onnx_contrib.json"
TEXT = ROOT.parent / "shared" / "specs" / "onnx-contrib-operators.txt"
TEXT_LABEL = "shared/specs/onnx-contrib-operators.txt"
NAMES_FILE = ROOT / "scripts" / "contrib_text_ops.json"
GENERATED_BY = "scripts/gen_onnx_contrib_schemas.py"

ORT_DOMAINS = ("com.microsoft", "com.microsoft.nchwc")
TEXT_DOMAINS = ("ai.onnx.training", "com.microsoft", "com.microsoft.nchwc")
#: the domain ai.onnx.training's ops moved to in ONNX 1.7, where they are still defined
TRAINING_SUCCESSOR = "ai.onnx.preview.training"
VARIADIC_MAX = 2**31 - 1

#: a section must resemble a schema at least this much (0..1) to take its name.  Attention
#: scores 0.48 (ORT renamed an input and added six attributes since); an unrelated
#: schema of the right alphabetical slot scores under 0.25 (GraphCall vs Gradient).
MIN_MATCH_SCORE = 0.4


# =========================================================================== ORT schemas


def ort_schemas(domains=ORT_DOMAINS) -> list:
    return [s for s in ort_state.get_all_operator_schema() if s.domain in domains]


def ort_onnx_domain_schemas() -> list:
    """ORT's own ai.onnx-domain schemas: those whose (name, version) ONNX does not define."""
    defined = {(s.name, s.since_version) for s in base.onnx_schemas(("",))}
    return [s for s in ort_schemas(("", "ai.onnx")) if (s.name, s.since_version) not in defined]


def convert_ort_schema(schema) -> OpSchema:
    """One ORT schema as an opconv :class:`OpSchema` (ORT's binding spells fields differently)."""
    constraints = {
        tc.type_param_str: tuple(base.canonical_type(t) for t in tc.allowed_type_strs) for tc in schema.type_constraints
    }

    def params(formals, min_count):
        arity = _variadic_min_arity(formals, min_count, schema.name)
        return tuple(
            base.make_param(p.name, p.typeStr, p.option.name, p.isHomogeneous, arity, p.description, constraints)
            for p in formals
        )

    attributes = tuple(
        base.make_attribute(a.name, int(a.type), a.required, _ort_default(a), a.description)
        for a in sorted(schema.attributes.values(), key=lambda a: a.name)
    )
    return OpSchema(
        dialect=base.DIALECT,
        domain=schema.domain,
        name=schema.name,
        version=schema.since_version,
        doc=base.summarize(schema.doc),
        attributes=attributes,
        inputs=params(schema.inputs, schema.min_input),
        outputs=params(schema.outputs, schema.min_output),
        type_constraints=constraints,
        min_inputs=schema.min_input,
        max_inputs=schema.max_input,
        min_outputs=schema.min_output,
        max_outputs=schema.max_output,
        deprecated=bool(schema.deprecated),
    )


def _ort_default(attr) -> AttributeProto | None:
    # ORT's binding exposes the default only as a serialized AttributeProto.
    if not attr._default_value:
        return None
    proto = AttributeProto()
    proto.ParseFromString(attr._default_value)
    return proto


def _variadic_min_arity(formals, min_count: int, op_name: str) -> int:
    """A variadic parameter's least argument count, which ORT's binding does not expose.

    ONNX computes an op's minimum count as (single parameters) + (min_arity of the
    variadic one), so the arity is the difference -- unless optional parameters come
    before the variadic one (onnx's Loop), where the count may have been set by hand.
    """
    if not any(p.option.name == "Variadic" for p in formals):
        return 1
    if any(p.option.name == "Optional" for p in formals):
        raise ValueError(f"{op_name}: cannot derive min_arity with optional parameters before a variadic one")
    return max(min_count - sum(p.option.name == "Single" for p in formals), 0)


# =========================================================================== the text


@dataclass
class TextEntry:
    """One line of an Attributes/Inputs/Outputs/Type Constraints block, with its description."""

    name: str
    type: str  # attribute type phrase, parameter type, or ", "-separated type list
    flags: str = ""  # "required", "optional", "variadic", "variadic, heterogeneous"
    doc: str = ""


@dataclass
class TextSection:
    """One operator section of the text; its name is not in the text."""

    line: int  # 1-based line of the section's first line
    domain: str
    version: int | None  # None: "No versioning maintained for experimental ops."
    doc: str = ""
    name_hint: str | None = None  # from a surviving "experimental <domain>.<Name>" line
    blocks: dict = field(default_factory=dict)  # heading -> list of TextEntry
    counts: dict = field(default_factory=dict)  # "Inputs"/"Outputs" -> (min, max) when given

    @property
    def experimental(self) -> bool:
        return self.version is None

    def entries(self, heading: str) -> list[TextEntry]:
        return self.blocks.get(heading, [])


_HEADING = re.compile(r"^(Attributes|Inputs|Outputs|Type Constraints)(?: \((\d+) - (\d+|∞)\))?$")
_VERSION = re.compile(
    r"^This version of the operator has been available since version (\d+) "
    r"of the '([\w.]+)' operator set\.$"
)
_EXPERIMENTAL_VERSION = "No versioning maintained for experimental ops."
_EXPERIMENTAL_HINT = re.compile(r"^experimental ([\w.]+)\.(\w+)$")

#: attribute type phrases of ContribOperators.md -> opconv attribute types
TEXT_ATTR_TYPES = {
    "float": "float",
    "int": "int",
    "string": "string",
    "tensor": "tensor",
    "graph": "graph",
    "sparse tensor": "sparse_tensor",
    "list of floats": "floats",
    "list of ints": "ints",
    "list of strings": "strings",
    "list of tensors": "tensors",
    "list of graphs": "graphs",
    "list of sparse tensors": "sparse_tensors",
}
_ATTR_LINE = re.compile(
    r"^(\w+) : (" + "|".join(sorted(TEXT_ATTR_TYPES, key=len, reverse=True)) + r")(?: \((required)\))?$"
)
_PARAM_LINE = re.compile(r"^(\w+)(?: \((optional|variadic|variadic, heterogeneous)\))? : (\w+(?:\(.*\))?)$")
_CONSTRAINT_LINE = re.compile(r"^(\w+) : (\w+\(.*\))$")
_ENTRY_LINE = {
    "Attributes": _ATTR_LINE,
    "Inputs": _PARAM_LINE,
    "Outputs": _PARAM_LINE,
    "Type Constraints": _CONSTRAINT_LINE,
}


def parse_text(text: str) -> list[TextSection]:
    """All operator sections of the text, in order.

    The text is read as blocks of non-blank lines.  A section's description is every
    block between the previous section's last block and its ``Version`` block; after
    the version sentence come heading blocks, each followed by one block of entries.
    """
    blocks = _blocks(text)
    sections: list[TextSection] = []
    domain, pending, i = None, [], 0
    while i < len(blocks):
        line_no, lines = blocks[i]
        if len(lines) == 1 and lines[0] in TEXT_DOMAINS:  # a domain heading survived
            domain, pending = lines[0], []
        elif lines == ["Version"]:
            section, i = _parse_section(blocks, i, domain, pending)
            sections.append(section)
            pending = []
            continue
        elif domain is not None:  # text before the first domain heading is page furniture
            pending.append((line_no, lines))
        i += 1
    return sections


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each run of non-blank lines; trailing spaces dropped."""
    blocks, current, start = [], [], 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            if not current:
                start = number
            current.append(line.rstrip())
        elif current:
            blocks.append((start, current))
            current = []
    if current:
        blocks.append((start, current))
    return blocks


def _parse_section(blocks, i, domain, doc_blocks) -> tuple[TextSection, int]:
    """The section whose ``Version`` block is ``blocks[i]``; returns it and the next block index."""
    version_line = blocks[i + 1][1][0]
    version = None
    if version_line != _EXPERIMENTAL_VERSION:
        match = _VERSION.match(version_line)
        if not match:
            raise ValueError(f"line {blocks[i + 1][0]}: unexpected version sentence {version_line!r}")
        if match.group(2) != domain:
            raise ValueError(
                f"line {blocks[i + 1][0]}: version sentence names {match.group(2)}, but the section is under {domain}"
            )
        version = int(match.group(1))
    hint, doc = None, []
    for _, lines in doc_blocks:
        hint_match = _EXPERIMENTAL_HINT.match(lines[0]) if len(lines) == 1 else None
        if hint_match and hint_match.group(1) == domain:
            hint = hint_match.group(2)  # a heading of the original, not description
        else:
            doc.append("\n".join(lines))
    start = doc_blocks[0][0] if doc_blocks else blocks[i][0]
    section = TextSection(line=start, domain=domain, version=version, doc="\n\n".join(doc), name_hint=hint)
    i += 2
    while i + 1 < len(blocks) and (heading := _HEADING.match(" ".join(blocks[i][1]))):
        name = heading.group(1)
        if heading.group(2):
            high = heading.group(3)
            section.counts[name] = (int(heading.group(2)), VARIADIC_MAX if high == "∞" else int(high))
        section.blocks[name] = _parse_entries(name, *blocks[i + 1])
        i += 2
    return section, i


def _parse_entries(heading: str, line_no: int, lines: list[str]) -> list[TextEntry]:
    """Entry lines, each followed by at most one description line (which may be absent)."""
    pattern = _ENTRY_LINE[heading]
    entries: list[TextEntry] = []
    for offset, line in enumerate(lines):
        match = pattern.match(line)
        if match:
            if heading == "Attributes":
                entries.append(TextEntry(match.group(1), match.group(2), match.group(3) or ""))
            elif heading == "Type Constraints":
                entries.append(TextEntry(match.group(1), match.group(2)))
            else:
                entries.append(TextEntry(match.group(1), match.group(3), match.group(2) or ""))
        elif entries and not entries[-1].doc:
            entries[-1].doc = line
        else:
            raise ValueError(f"line {line_no + offset}: cannot read {heading} entry {line!r}")
    return entries


# =========================================================================== names


@dataclass(frozen=True)
class Candidate:
    """A known schema a text section may describe: its name, signature and description."""

    name: str
    source: str  # where the schema is defined, for the evidence column
    signature: frozenset
    doc: str


def section_signature(section: TextSection) -> frozenset:
    return frozenset(
        [f"attr:{e.name}" for e in section.entries("Attributes")]
        + [f"in:{e.name}" for e in section.entries("Inputs")]
        + [f"out:{e.name}" for e in section.entries("Outputs")]
        + [f"tc:{e.name}" for e in section.entries("Type Constraints")]
    )


def schema_signature(schema) -> frozenset:
    """Works for onnx's and ORT's schema objects alike: both have these fields."""
    return frozenset(
        [f"attr:{name}" for name in schema.attributes]
        + [f"in:{p.name}" for p in schema.inputs]
        + [f"out:{p.name}" for p in schema.outputs]
        + [f"tc:{tc.type_param_str}" for tc in schema.type_constraints]
    )


def candidates_by_domain() -> dict[str, list[Candidate]]:
    """Per text domain, the schemas its sections may describe, sorted by name (newest version each)."""
    pools = {domain: ort_schemas((domain,)) for domain in ORT_DOMAINS}
    pools["ai.onnx.training"] = base.onnx_schemas((TRAINING_SUCCESSOR,))
    result = {}
    for domain, schemas in pools.items():
        newest = {}
        for s in sorted(schemas, key=lambda s: (s.name, s.since_version)):
            newest[s.name] = s
        result[domain] = [
            Candidate(name, f"{s.domain}::{name}-{s.since_version}", schema_signature(s), s.doc or "")
            for name, s in sorted(newest.items())
        ]
    return result


def similarity(section: TextSection, candidate: Candidate) -> float:
    """0..1: how alike a text section and a schema are, by names and by description.

    Names: the mean of the share of the section's attribute/parameter/constraint names
    the schema still has (schemas grow over the years) and their Jaccard overlap (so a
    small schema does not match everything).  A section's description, when it has one,
    counts as much as the names; a schema without one scores 0 there.
    """
    mine = section_signature(section)
    shared = len(mine & candidate.signature)
    union = mine | candidate.signature
    score = (shared / len(mine) + shared / len(union)) / 2 if mine else 0.0
    if section.doc:
        text = difflib.SequenceMatcher(None, _words(section.doc), _words(candidate.doc), autojunk=False).ratio()
        score = (score + text) / 2
    return score


def _words(doc: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", doc.lower())[:80]


def align(sections: list[TextSection], candidates: list[Candidate]) -> list[tuple[Candidate, float] | None]:
    """The name assignment of greatest total similarity that keeps names in alphabetical order.

    Dynamic programming over (sections, sorted candidates), like a sequence alignment:
    a section either takes the next candidate name or stays unnamed.
    """
    n, m = len(sections), len(candidates)
    scores = [[similarity(s, c) for c in candidates] for s in sections]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            take = best[i - 1][j - 1] + scores[i - 1][j - 1] if scores[i - 1][j - 1] >= MIN_MATCH_SCORE else -1.0
            best[i][j] = max(take, best[i - 1][j], best[i][j - 1])
    result: list = [None] * n
    i, j = n, m
    while i and j:
        s = scores[i - 1][j - 1]
        if s >= MIN_MATCH_SCORE and best[i][j] == best[i - 1][j - 1] + s:
            result[i - 1] = (candidates[j - 1], s)
            i, j = i - 1, j - 1
        elif best[i][j] == best[i][j - 1]:
            j -= 1
        else:
            i -= 1
    return result


_NAMED_IN_DOC = re.compile(r"\bThe ([A-Z][A-Za-z0-9]+) operator\b")


def recover_names(sections: list[TextSection]) -> list[dict]:
    """One record per section: line, domain, version, recovered name and the evidence for it."""
    pools = candidates_by_domain()
    records = []
    for run in _runs(sections):
        pool = pools[run[0].domain]
        for section, match in zip(run, align(run, pool)):
            if match is not None:
                name, evidence = match[0].name, f"resembles {match[0].source} (score {match[1]:.2f})"
                tied = [c.name for c in pool if c is not match[0] and similarity(section, c) >= match[1]]
                if tied:
                    evidence += f"; as much as {', '.join(tied)}: named by its place in the alphabetical order"
            else:
                named = _NAMED_IN_DOC.search(section.doc)
                if not named:
                    raise ValueError(
                        f"line {section.line}: no schema resembles this section and its "
                        f"description names no operator; add it to {NAMES_FILE.name} by hand"
                    )
                name, evidence = named.group(1), "named in its description"
            if section.name_hint and section.name_hint != name:
                raise ValueError(f"line {section.line}: matched {name}, but the text says {section.name_hint}")
            records.append(
                {
                    "line": section.line,
                    "domain": section.domain,
                    "name": name,
                    "version": section.version,
                    "evidence": evidence,
                }
            )
    _check_alphabetical(records, sections)
    return records


def _runs(sections: list[TextSection]) -> list[list[TextSection]]:
    """Consecutive sections of one domain and kind; ContribOperators.md sorts each run by name."""
    runs: list[list[TextSection]] = []
    for section in sections:
        if runs and (runs[-1][0].domain, runs[-1][0].experimental) == (section.domain, section.experimental):
            runs[-1].append(section)
        else:
            runs.append([section])
    return runs


def _check_alphabetical(records: list[dict], sections: list[TextSection]) -> None:
    for run in _runs(sections):
        names = [r["name"] for r in records if r["line"] in {s.line for s in run}]
        if names != sorted(names) or len(set(names)) != len(names):
            raise ValueError(f"recovered names are out of the document's order: {names}")


def load_names(sections: list[TextSection], path: Path = NAMES_FILE) -> list[dict]:
    """The committed names, checked to line up with the text's sections."""
    records = json.loads(path.read_text(encoding="utf-8"))["ops"]
    found = [(s.line, s.domain, s.version) for s in sections]
    listed = [(r["line"], r["domain"], r["version"]) for r in records]
    if found != listed:
        raise ValueError(f"{path.name} no longer matches {TEXT_LABEL}; rerun with --recover-names")
    return records


def names_file_text(records: list[dict]) -> str:
    data = {
        "source": TEXT_LABEL,
        "generated_by": f"{GENERATED_BY} --recover-names",
        "about": "the operator name of each section of the text, whose headings were lost; "
        "line is where the section starts, version null means 'experimental, unversioned'",
        "ops": records,
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


# =========================================================================== text -> schema


def convert_text_section(section: TextSection, name: str, successor) -> OpSchema:
    """An op known only from the text (ai.onnx.training).

    The text gives no attribute defaults.  ``successor`` is the same op as ONNX defines
    it under ai.onnx.preview.training (or None); the defaults of attributes it declares
    with the same type are taken from it, and the entry's notes say so.
    """
    constraints = {
        e.name: tuple(base.canonical_type(t) for t in e.type.split(", ")) for e in section.entries("Type Constraints")
    }
    attributes, borrowed = [], []
    for e in section.entries("Attributes"):
        kind, required = TEXT_ATTR_TYPES[e.type], e.flags == "required"
        default = base.NO_DEFAULT
        theirs = successor.attributes.get(e.name) if successor is not None else None
        if not required and theirs is not None and base.attr_type(int(theirs.type)) == kind:
            default = base.decode_default(theirs.default_value)
            if default is not base.NO_DEFAULT:
                borrowed.append(e.name)
        attributes.append(
            AttrParam(
                name=e.name,
                type=kind,
                required=required,
                default=default,
                doc=base.summarize(e.doc, base.PARAM_DOC_LIMIT),
            )
        )
    inputs = _text_params(section, "Inputs", constraints)
    outputs = _text_params(section, "Outputs", constraints)
    notes = f"From {TEXT_LABEL}: ONNX Runtime's inference build has no {section.domain} ops."
    if successor is None:
        notes += f" Neither ONNX nor ONNX Runtime defines {name} any more."
    if borrowed:
        notes += (
            f" The text gives no defaults; those of {', '.join(borrowed)} are from "
            f"{TRAINING_SUCCESSOR}::{name}-{successor.since_version}, where ONNX moved this operator."
        )
    min_inputs, max_inputs = _count(section, "Inputs", inputs)
    min_outputs, max_outputs = _count(section, "Outputs", outputs)
    return OpSchema(
        dialect=base.DIALECT,
        domain=section.domain,
        name=name,
        version=section.version or 1,
        doc=base.summarize(section.doc),
        attributes=tuple(attributes),
        inputs=inputs,
        outputs=outputs,
        type_constraints=constraints,
        min_inputs=min_inputs,
        max_inputs=max_inputs,
        min_outputs=min_outputs,
        max_outputs=max_outputs,
        notes=notes,
    )


def _text_params(section: TextSection, heading: str, constraints) -> tuple[Param, ...]:
    entries = section.entries(heading)
    singles = sum(not e.flags for e in entries)
    low = section.counts.get(heading, (singles, 0))[0]
    return tuple(
        base.make_param(
            e.name,
            e.type,
            e.flags.split(",")[0] or "single",
            homogeneous="heterogeneous" not in e.flags,
            min_arity=max(low - singles, 0),  # as in _variadic_min_arity
            description=e.doc,
            constraint_names=constraints,
        )
        for e in entries
    )


def _count(section: TextSection, heading: str, params: tuple[Param, ...]) -> tuple[int, int]:
    """(min, max) actual arguments: the heading's "(a - b)" when given, else one per parameter."""
    if heading in section.counts:
        return section.counts[heading]
    return len(params), len(params)


def text_deviations(section: TextSection, op: OpSchema) -> list[str]:
    """Where ``op`` (from ORT) no longer says what the text does, in short phrases.

    Only what the text states is compared: attributes, inputs and types ORT added since
    are not deviations, as a model written against the text still conforms.
    """
    return (
        _attribute_deviations(section, op)
        + _param_deviations(section, "Inputs", op.inputs)
        + _param_deviations(section, "Outputs", op.outputs)
        + _constraint_deviations(section, op)
    )


def _attribute_deviations(section: TextSection, op: OpSchema) -> list[str]:
    problems = []
    for e in section.entries("Attributes"):
        mine = op.attribute(e.name)
        if mine is None:
            problems.append(f"attribute {e.name} is gone")
            continue
        if mine.type != TEXT_ATTR_TYPES[e.type]:
            problems.append(f"attribute {e.name} was of type {TEXT_ATTR_TYPES[e.type]}, now {mine.type}")
        if mine.required != (e.flags == "required"):
            problems.append(
                f"attribute {e.name} was {'required' if e.flags else 'optional'}, "
                f"now {'required' if mine.required else 'optional'}"
            )
    return problems


_OPTION_WORDS = {"single": "required", "optional": "optional", "variadic": "variadic"}


def _param_deviations(section: TextSection, heading: str, params: tuple[Param, ...]) -> list[str]:
    problems, word = [], heading[:-1].lower()
    for k, e in enumerate(section.entries(heading)):
        if k >= len(params):
            problems.append(f"{word} {k} ({e.name}) is gone")
            continue
        mine, option = params[k], _OPTION_WORDS[e.flags.split(",")[0] or "single"]
        if mine.name != e.name:
            problems.append(f"{word} {k} was named {e.name}, now {mine.name}")
        if _OPTION_WORDS[mine.option] != option:
            problems.append(f"{word} {k} ({mine.name}) was {option}, now {_OPTION_WORDS[mine.option]}")
    return problems


def _constraint_deviations(section: TextSection, op: OpSchema) -> list[str]:
    problems = []
    for e in section.entries("Type Constraints"):
        mine = op.type_constraints.get(e.name)
        lost = sorted({base.canonical_type(t) for t in e.type.split(", ")} - set(mine or ()))
        if mine is None:
            problems.append(f"type constraint {e.name} is gone")
        elif lost:
            problems.append(f"{e.name} no longer allows {', '.join(lost)}")
    return problems


# =========================================================================== the file


def build_ops(text_path: Path = TEXT, names_path: Path = NAMES_FILE) -> list[OpSchema]:
    """Every op of onnx_contrib.json."""
    ops = {
        (s.domain, s.name, s.since_version): convert_ort_schema(s) for s in ort_schemas() + ort_onnx_domain_schemas()
    }
    successors = {s.name: s for s in sorted(base.onnx_schemas((TRAINING_SUCCESSOR,)), key=lambda s: s.since_version)}
    sections = parse_text(text_path.read_text(encoding="utf-8"))
    for section, record in zip(sections, load_names(sections, names_path)):
        # ORT registers the text's unversioned "experimental" ops at version 1.
        key = (section.domain, record["name"], section.version or 1)
        if key in ops:
            ops[key] = _with_text_notes(ops[key], section)
        elif section.domain in ORT_DOMAINS:
            raise ValueError(f"{key}: in the text but not in ONNX Runtime {ORT_VERSION}; decide how to source it")
        else:
            ops[key] = convert_text_section(section, record["name"], successors.get(record["name"]))
    cpu_kernels = {
        (k.domain, k.op_name) for k in ort_state.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"
    }
    for key, op in ops.items():
        if op.domain in ORT_DOMAINS and (op.domain, op.name) not in cpu_kernels:
            ops[key] = replace(op, notes=" ".join(filter(None, (op.notes, gpu_only_note()))))
    return list(ops.values())


def gpu_only_note() -> str:
    """The note of an op ORT's CPU execution provider has no kernel for (the executor's refusal quotes it)."""
    return (
        f"ONNX Runtime {_ort_release()} implements it only for execution providers other than CPU "
        f"(CUDA, ROCm, DirectML, WebGPU ...)."
    )


def _with_text_notes(op: OpSchema, section: TextSection) -> OpSchema:
    deviations = text_deviations(section, op)
    if not deviations:
        return op
    note = (
        f"Follows ONNX Runtime {_ort_release()}; {TEXT_LABEL} (an older ContribOperators.md) "
        f"differs: {'; '.join(deviations)}."
    )
    return replace(op, notes=note)


def _ort_release() -> str:
    return ".".join(ORT_VERSION.split(".")[:2])


def generate(text_path: Path = TEXT, names_path: Path = NAMES_FILE) -> str:
    """The text of onnx_contrib.json, exactly as it is committed."""
    source = (
        f"ONNX Runtime {ORT_VERSION} get_all_operator_schema() for {', '.join(ORT_DOMAINS)} "
        f"and its own ai.onnx-domain schemas (those ONNX does not define); "
        f"{TEXT_LABEL} (ContribOperators.md, early 2020) for ai.onnx.training"
    )
    return dump(base.DIALECT, build_ops(text_path, names_path), source=source, generated_by=GENERATED_BY)


def main(argv=None) -> int:
    parser = base.command_line("Generate opconv/schemas/onnx_contrib.json.", OUTPUT)
    parser.add_argument("--text", type=Path, default=TEXT, help=f"the contrib operators text (default {TEXT})")
    parser.add_argument(
        "--recover-names",
        action="store_true",
        help=f"match the text's sections to op names and rewrite {NAMES_FILE.name}",
    )
    args = parser.parse_args(argv)
    if not args.recover_names:
        return base.write_or_check(generate(args.text), args.output, args.check)
    records = recover_names(parse_text(args.text.read_text(encoding="utf-8")))
    for r in records:
        print(f"{r['line']:5}  {r['domain']:20} {r['name']:30} {r['evidence']}")
    NAMES_FILE.write_text(names_file_text(records), encoding="utf-8")
    print(f"wrote {NAMES_FILE} ({len(records)} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
