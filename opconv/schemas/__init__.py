"""Operator schemas of the three dialects, and the loader that finds them.

Each dialect's operators are described by JSON files in this folder, all in one
format (see ``docs/schema-format.md``).  :func:`lookup` finds the schema that
governs a node: the entry with the highest ``version`` that is <= the node's
version (ONNX semantics: an op keeps its meaning until a newer version is
defined).

The files are data, generated or written once and committed; they are loaded
lazily, on first use of a dialect, and cached.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import SchemaError

FORMAT = "opconv-schema"
FORMAT_VERSION = 1

#: schema files per dialect, in this package
DIALECT_FILES = {
    "onnx": ("onnx.json", "onnx_contrib.json"),
    "openvino": ("openvino.json",),
    "hlo": ("hlo.json",),
}

#: attribute types an ``AttrParam`` may declare
ATTR_TYPES = frozenset(
    {
        "int",
        "float",
        "string",
        "bool",
        "ints",
        "floats",
        "strings",
        "bools",
        "tensor",
        "tensors",
        "sparse_tensor",
        "sparse_tensors",
        "graph",
        "graphs",
        "type",
        "types",
        "shape",
        "element_type",
        "region",
    }
)

PARAM_OPTIONS = frozenset({"single", "optional", "variadic"})


@dataclass(frozen=True)
class Param:
    """One formal input or output of an operator."""

    name: str
    type: str  # a type-constraint name ("T") or a concrete type string ("tensor(int64)")
    option: str = "single"  # single | optional | variadic
    homogeneous: bool = True  # variadic only: all actual arguments share one type
    min_arity: int = 1  # variadic only: least number of actual arguments
    doc: str = ""


@dataclass(frozen=True)
class AttrParam:
    """One attribute: its type, whether it is required, and its default."""

    name: str
    type: str
    required: bool = False
    default: Any = None  # JSON value; None when there is no default
    allowed: tuple | None = None  # the closed set of legal values, when the spec gives one
    doc: str = ""


@dataclass(frozen=True)
class OpSchema:
    """Everything opconv knows of one version of one operator."""

    dialect: str
    domain: str
    name: str
    version: int
    doc: str = ""
    attributes: tuple[AttrParam, ...] = ()
    inputs: tuple[Param, ...] = ()
    outputs: tuple[Param, ...] = ()
    type_constraints: dict = field(default_factory=dict)  # name -> tuple of type strings
    min_inputs: int = 0
    max_inputs: int = 0
    min_outputs: int = 0
    max_outputs: int = 0
    deprecated: bool = False
    completed_from: str | None = None  # where a spec section was only a title: the source used
    notes: str = ""

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.dialect, self.domain, self.name, self.version)

    def attribute(self, name: str) -> AttrParam | None:
        for a in self.attributes:
            if a.name == name:
                return a
        return None

    def allowed_types(self, param: Param) -> tuple[str, ...] | None:
        """The type strings a formal parameter accepts (None: anything)."""
        if param.type in self.type_constraints:
            return tuple(self.type_constraints[param.type])
        if "(" in param.type:
            return (param.type,)
        return None

    def to_json(self) -> dict:
        out = {"name": self.name, "domain": self.domain, "version": self.version}
        if self.doc:
            out["doc"] = self.doc
        out["attributes"] = [_drop_empty(a.__dict__) for a in self.attributes]
        out["inputs"] = [_drop_empty(p.__dict__) for p in self.inputs]
        out["outputs"] = [_drop_empty(p.__dict__) for p in self.outputs]
        out["type_constraints"] = {k: list(v) for k, v in self.type_constraints.items()}
        for k in ("min_inputs", "max_inputs", "min_outputs", "max_outputs"):
            out[k] = getattr(self, k)
        for k in ("deprecated", "completed_from", "notes"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        return out


def _drop_empty(d: dict) -> dict:
    # An empty-string *default* is meaningful ("" is a legal value); only unset fields are dropped.
    return {
        k: (list(v) if isinstance(v, tuple) else v)
        for k, v in d.items()
        if v is not None and not (v == "" and k != "default")
    }


def parse_op(dialect: str, raw: dict, where: str) -> OpSchema:
    """Build an :class:`OpSchema` from one JSON entry, checking the format."""
    try:
        name = raw["name"]
        attrs = tuple(
            AttrParam(
                name=a["name"],
                type=a["type"],
                required=bool(a.get("required", False)),
                default=a.get("default"),
                allowed=tuple(a["allowed"]) if a.get("allowed") is not None else None,
                doc=a.get("doc", ""),
            )
            for a in raw.get("attributes", ())
        )
        inputs = tuple(_param(p) for p in raw.get("inputs", ()))
        outputs = tuple(_param(p) for p in raw.get("outputs", ()))
        schema = OpSchema(
            dialect=dialect,
            domain=raw.get("domain", ""),
            name=name,
            version=int(raw["version"]),
            doc=raw.get("doc", ""),
            attributes=attrs,
            inputs=inputs,
            outputs=outputs,
            type_constraints={k: tuple(v) for k, v in raw.get("type_constraints", {}).items()},
            min_inputs=int(raw.get("min_inputs", sum(p.option == "single" for p in inputs))),
            max_inputs=int(raw.get("max_inputs", _default_max(inputs))),
            min_outputs=int(raw.get("min_outputs", sum(p.option == "single" for p in outputs))),
            max_outputs=int(raw.get("max_outputs", _default_max(outputs))),
            deprecated=bool(raw.get("deprecated", False)),
            completed_from=raw.get("completed_from"),
            notes=raw.get("notes", ""),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"malformed op entry {raw.get('name', '?')!r}: {e!r}", where=where) from None
    for a in schema.attributes:
        if a.type not in ATTR_TYPES:
            raise SchemaError(f"{name}: attribute {a.name!r} has unknown type {a.type!r}", where=where)
    for p in schema.inputs + schema.outputs:
        if p.option not in PARAM_OPTIONS:
            raise SchemaError(f"{name}: parameter {p.name!r} has unknown option {p.option!r}", where=where)
    return schema


def _param(p: dict) -> Param:
    return Param(
        name=p["name"],
        type=p["type"],
        option=p.get("option", "single"),
        homogeneous=bool(p.get("homogeneous", True)),
        min_arity=int(p.get("min_arity", 1)),
        doc=p.get("doc", ""),
    )


def _default_max(params: tuple[Param, ...]) -> int:
    if any(p.option == "variadic" for p in params):
        return 2**31 - 1
    return len(params)


class DialectSchemas:
    """All schemas of one dialect, indexed by (domain, name) and sorted by version.

    Entries read from a schema file (``raw``: (JSON entry, file) pairs) are
    parsed the first time their op is asked for: a conversion touches a few
    dozen of the dialect's thousand-odd entries, and parsing them all would
    cost more than the conversion of a small model.  Further files (``later``:
    functions returning such pairs, e.g. ONNX's contrib operators) are read only
    when an op is not found in the ones read so far, or when every entry is needed.
    """

    def __init__(
        self,
        dialect: str,
        ops: Iterable[OpSchema] = (),
        *,
        raw: Iterable[tuple[dict | OpText, str]] = (),
        later: Iterable[Callable[[], list[tuple[dict | OpText, str]]]] = (),
    ):
        self.dialect = dialect
        self._by_name: dict[tuple[str, str], list[OpSchema]] = {}
        self._pending: dict[tuple[str, str], list[tuple[dict | OpText, str]]] = {}
        self._versions: dict[tuple[str, str], list[int]] = {}
        self._later = list(later)
        for op in ops:
            self._by_name.setdefault((op.domain, op.name), []).append(op)
            self._versions.setdefault((op.domain, op.name), []).append(op.version)
        self._index(raw, set(self._versions))

    def _index(self, raw: Iterable[tuple[dict | OpText, str]], keys: set) -> None:
        """Index ``raw`` entries (unparsed) and check that no op has a version twice among ``keys``' entries."""
        for entry, where in raw:
            if isinstance(entry, OpText):
                key, version = (entry.domain, entry.name), entry.version
            else:
                try:
                    key, version = (entry.get("domain", ""), entry["name"]), int(entry["version"])
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    name = entry.get("name", "?") if isinstance(entry, dict) else "?"
                    raise SchemaError(f"malformed op entry {name!r}: {e!r}", where=where) from None
            self._pending.setdefault(key, []).append((entry, where))
            self._versions.setdefault(key, []).append(version)
            keys.add(key)
        for key in keys:
            seen = self._versions[key]
            if len(set(seen)) != len(seen):
                raise SchemaError(f"duplicate versions of {key[0] or 'ai.onnx'}::{key[1]}: {sorted(seen)}")
            seen.sort()

    def _read_later(self) -> bool:
        """Read the deferred files; False when there were none."""
        if not self._later:
            return False
        loaders, self._later = self._later, []
        for load in loaders:
            self._index(load(), set())
        return True

    def _ops(self, key: tuple[str, str]) -> list[OpSchema] | None:
        if key not in self._versions and self._read_later():
            return self._ops(key)
        pending = self._pending.pop(key, None)
        if pending is not None:
            parsed = self._by_name.setdefault(key, [])
            parsed.extend(parse_op(self.dialect, _entry_data(entry, where), where) for entry, where in pending)
            parsed.sort(key=lambda s: s.version)
        return self._by_name.get(key)

    def __iter__(self):
        self._read_later()
        for key in sorted(self._versions):
            yield from self._ops(key)

    def __len__(self) -> int:
        self._read_later()
        return sum(len(v) for v in self._versions.values())

    def domains(self) -> list[str]:
        self._read_later()
        return sorted({d for d, _ in self._versions})

    def versions(self, name: str, domain: str = "") -> list[OpSchema]:
        return list(self._ops((domain, name)) or ())

    def find(self, name: str, version: int | None = None, domain: str = "") -> OpSchema | None:
        """The schema in force at ``version`` (newest when None), or None."""
        versions = self._ops((domain, name))
        if not versions:
            return None
        if version is None:
            return versions[-1]
        i = bisect.bisect_right(self._versions[(domain, name)], version)
        if not i and self._read_later():
            # A later file may define older versions (ONNX Runtime's LayerNormalization-1 under ONNX's -17).
            return self.find(name, version, domain)
        return versions[i - 1] if i else None


def _load_file(dialect: str, filename: str) -> list[tuple[dict | OpText, str]]:
    """The op entries of one schema file, each with the file it came from (parsed later, see DialectSchemas)."""
    where = f"opconv/schemas/{filename}"
    try:
        # A plain path beside this module: importlib.resources would import pathlib, zipfile ... (~15 ms).
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), filename), "rb") as f:
            text = f.read()  # UTF-8 bytes: splitting them is faster than splitting the decoded text
    except FileNotFoundError:
        raise SchemaError("schema file is missing from the installed package", where=where) from None
    try:
        split = split_ops(text)
        if split is None:  # not in dump()'s layout: parse it whole
            data = json.loads(text)
            split = data, data["ops"]
        header, ops = split
    except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
        raise SchemaError(f"not valid JSON of an {FORMAT} file ({e})", where=where) from None
    if header.get("format") != FORMAT or header.get("format_version") != FORMAT_VERSION:
        raise SchemaError(f"not an {FORMAT} v{FORMAT_VERSION} file", where=where)
    if header.get("dialect") != dialect:
        raise SchemaError(f"file declares dialect {header.get('dialect')!r}, expected {dialect!r}", where=where)
    return [(raw, where) for raw in ops]


class OpText(NamedTuple):
    """One op entry of a schema file, not parsed yet: the fields that index it, and its JSON text (UTF-8)."""

    domain: str
    name: str
    version: int
    text: bytes


# How dump() lays a file out (json.dumps with indent=1): the ops list, the line between two of its entries, and
# the first lines of an entry (name, domain and version, in that order).
_OPS_START = b'\n "ops": [\n'
_OPS_END = b"\n  }\n ]\n}"
_OP_SEPARATOR = b"\n  },\n  {\n"
_OP_KEYS = re.compile(
    rb'\n  \{\n   "name": ("(?:[^"\\\n]|\\.)*"),\n   "domain": ("(?:[^"\\\n]|\\.)*"),\n'
    rb'   "version": ([0-9]+),\n'
)


def split_ops(text: bytes) -> tuple[dict, list[OpText]] | None:
    """The header and the op entries of a schema file written by :func:`dump`, without parsing the entries.

    Parsing a whole file costs more than a small conversion (``onnx.json`` is 1.2 MB, mostly
    documentation: ~9 ms), and a process needs a few dozen of its entries.  In dump's layout every
    entry starts with its name, domain and version lines, and entries are separated by a line that
    no nested value can produce (JSON strings hold no raw newline; nested objects are indented
    deeper), so a scan of the file's bytes finds them.  Returns None for any other layout (a file
    edited by hand), which the caller then parses whole.
    """
    head, found, _ = text.partition(_OPS_START)
    stripped = text.rstrip()
    if not found or not stripped.endswith(_OPS_END):
        return None
    end = len(stripped) - len(b"\n ]\n}")  # where the last entry ends
    keys = list(_OP_KEYS.finditer(text, len(head)))
    # Every entry must have been found: the first right after the list starts, one after each separator.
    if not keys or keys[0].start() != len(head) + len(_OPS_START) - 1 or text.count(_OP_SEPARATOR) != len(keys) - 1:
        return None
    ops = []
    for key, next_start in zip(keys, [k.start() for k in keys[1:]] + [end]):
        name, domain, version = key.group(1, 2, 3)
        entry = text[key.start() + 1 : next_start].rstrip(b",")  # the separator's "," ends the previous entry
        ops.append(OpText(_json_string(domain), _json_string(name), int(version), entry))
    return json.loads(head.rstrip(b",") + b"\n}"), ops


def _json_string(literal: bytes) -> str:
    return json.loads(literal) if b"\\" in literal else literal[1:-1].decode("utf-8")


def _entry_data(entry: dict | OpText, where: str) -> dict:
    if not isinstance(entry, OpText):
        return entry
    try:
        return json.loads(entry.text)
    except ValueError as e:
        raise SchemaError(f"malformed op entry {entry.name!r}: {e}", where=where) from None


@functools.cache
def dialect_schemas(dialect: str) -> DialectSchemas:
    """All schemas of ``dialect`` ('onnx', 'openvino' or 'hlo'), loaded once."""
    if dialect not in DIALECT_FILES:
        raise SchemaError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECT_FILES)}")
    first, *rest = DIALECT_FILES[dialect]
    return DialectSchemas(
        dialect,
        raw=_load_file(dialect, first),
        later=[functools.partial(_load_file, dialect, filename) for filename in rest],
    )


def lookup(dialect: str, name: str, version: int | None = None, domain: str = "") -> OpSchema:
    """The schema governing ``domain::name`` at ``version``; raises SchemaError if there is none."""
    schemas = dialect_schemas(dialect)
    found = schemas.find(name, version, domain)
    if found is None:
        known = schemas.versions(name, domain)
        label = f"{domain}::{name}" if domain else name
        if known:
            raise SchemaError(
                f"{dialect} op {label} does not exist at version {version}; first defined at version {known[0].version}"
            )
        raise SchemaError(f"unknown {dialect} op {label}")
    return found


def dump(dialect: str, ops: Iterable[OpSchema], source: str, generated_by: str) -> str:
    """Serialise schemas in the committed file format (stable order, one op per block)."""
    ordered = sorted(ops, key=lambda s: (s.domain, s.name, s.version))
    data = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dialect": dialect,
        "source": source,
        "generated_by": generated_by,
        "ops": [s.to_json() for s in ordered],
    }
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
