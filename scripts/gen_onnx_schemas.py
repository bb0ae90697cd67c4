"""Generate ``opconv/schemas/onnx.json`` from the operator schemas of the pinned ``onnx`` package.

Usage::

    python scripts/gen_onnx_schemas.py            # (re)write opconv/schemas/onnx.json
    python scripts/gen_onnx_schemas.py --check    # exit 1 if the committed file is stale

Every version of every operator of the domains in :data:`DOMAINS` is taken from
``onnx.defs.get_all_schemas_with_history()`` and converted to opconv's schema format
(``docs/schema-format.md``) as follows.

* Attribute types: ``AttributeProto`` type names in lower case (``INTS`` -> ``ints``,
  ``SPARSE_TENSOR`` -> ``sparse_tensor``), except ``TYPE_PROTO(S)`` -> ``type(s)``.
* Attribute defaults: decoded from the schema's default ``AttributeProto`` into JSON.
  ``float`` defaults are stored by ONNX as float32; they are written as the Python
  float of that float32 (LeakyRelu's ``alpha`` is ``0.009999999776482582``, not
  ``0.01``), so a default compares equal to what a model would carry.  Strings are
  decoded as UTF-8.  A ``tensor`` default is written as ``{"dtype", "shape",
  "values"}`` (canonical dtype, dims, values flattened in row-major order) when its
  values are finite real numbers, booleans or strings; any other default (graphs, sparse
  tensors, type protos, complex or non-finite values) cannot be written faithfully in JSON and is
  omitted, leaving the attribute optional with no default.  onnx 1.23.2 has no default
  of those kinds, so nothing is omitted today.
* Type strings: element types are renamed to opconv's canonical names
  (``tensor(float)`` -> ``tensor(float32)``, ``map(int64, double)`` -> ``map(int64,float64)``),
  recursively and without spaces.  Type-constraint lists keep ONNX's order.
* Docs: the first sentence or two of the first paragraph, markdown removed, at most
  300 characters for an operator and 200 for an attribute or parameter.

The output depends only on the onnx package, so it is byte-for-byte reproducible.
``scripts/gen_onnx_contrib_schemas.py`` imports the converters of this module.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
from onnx import AttributeProto, helper, numpy_helper

# Scripts run from a checkout where opconv is usually not installed.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from opconv.schemas import PARAM_OPTIONS, AttrParam, OpSchema, Param, dump  # noqa: E402
from opconv.types import ELEMENT_TYPES, ONNX_TYPE_NAMES  # noqa: E402

DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training")
OUTPUT = ROOT / "opconv" / "schemas" / "onnx.json"
GENERATED_BY = "scripts/gen_onnx_schemas.py"
DIALECT = "onnx"

OP_DOC_LIMIT = 300
PARAM_DOC_LIMIT = 200

#: opconv attribute type for each AttributeProto.AttributeType name
ATTR_TYPES = {
    "FLOAT": "float",
    "INT": "int",
    "STRING": "string",
    "TENSOR": "tensor",
    "GRAPH": "graph",
    "SPARSE_TENSOR": "sparse_tensor",
    "TYPE_PROTO": "type",
    "FLOATS": "floats",
    "INTS": "ints",
    "STRINGS": "strings",
    "TENSORS": "tensors",
    "GRAPHS": "graphs",
    "SPARSE_TENSORS": "sparse_tensors",
    "TYPE_PROTOS": "types",
}

#: returned by :func:`decode_default` when an attribute has no (representable) default
NO_DEFAULT = None


# --------------------------------------------------------------------------- attributes


def attr_type(code: int) -> str:
    """opconv's name of an ``AttributeProto.AttributeType`` code.

    Codes rather than enum members are used because ONNX Runtime's copy of the enum
    lacks TYPE_PROTO/TYPE_PROTOS (it prints them as ``???``).
    """
    return ATTR_TYPES[AttributeProto.AttributeType.Name(code)]


def decode_default(proto: AttributeProto | None):
    """The JSON value of a schema's default ``AttributeProto``, or :data:`NO_DEFAULT`."""
    if proto is None or proto.type == AttributeProto.UNDEFINED:
        return NO_DEFAULT
    value = helper.get_attribute_value(proto)
    kind = proto.type
    if kind == AttributeProto.FLOAT:
        return _json_float(value)
    if kind == AttributeProto.FLOATS:
        floats = [_json_float(v) for v in value]
        return NO_DEFAULT if NO_DEFAULT in floats else floats
    if kind == AttributeProto.INT:
        return int(value)
    if kind == AttributeProto.INTS:
        return [int(v) for v in value]
    if kind == AttributeProto.STRING:
        return value.decode("utf-8")
    if kind == AttributeProto.STRINGS:
        return [v.decode("utf-8") for v in value]
    if kind == AttributeProto.TENSOR:
        return encode_tensor(value)
    return NO_DEFAULT  # graphs, sparse tensors, type protos: no JSON form


def _json_float(value: float):
    # ONNX stores float attributes as float32; keep exactly that value.  JSON has no
    # NaN or infinity, so such a default is dropped rather than written invalidly.
    value = float(np.float32(value))
    return value if math.isfinite(value) else NO_DEFAULT


def encode_tensor(tensor: onnx.TensorProto):
    """``{"dtype", "shape", "values"}`` for a tensor default, or NO_DEFAULT if not representable."""
    dtype = onnx.TensorProto.DataType.Name(tensor.data_type).lower()
    dtype = ONNX_TYPE_NAMES.get(dtype, dtype)
    if dtype not in ELEMENT_TYPES or ELEMENT_TYPES[dtype].is_complex:
        return NO_DEFAULT
    flat = numpy_helper.to_array(tensor).ravel()
    if dtype == "string":
        values = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in flat]
    elif dtype == "bool":
        values = [bool(v) for v in flat]
    elif ELEMENT_TYPES[dtype].is_int:
        values = [int(v) for v in flat]
    else:  # a float type: float64 holds every value of the narrower ones exactly
        values = [float(v) for v in flat.astype(np.float64)]
        if not all(math.isfinite(v) for v in values):
            return NO_DEFAULT
    return {"dtype": dtype, "shape": [int(d) for d in tensor.dims], "values": values}


def make_attribute(name: str, type_code: int, required: bool, default_proto, description: str) -> AttrParam:
    default = NO_DEFAULT if required else decode_default(default_proto)
    return AttrParam(
        name=name,
        type=attr_type(type_code),
        required=bool(required),
        default=default,
        doc=summarize(description, PARAM_DOC_LIMIT),
    )


# --------------------------------------------------------------------------- types

#: type constructors of ONNX type strings and their argument counts
_CONSTRUCTORS = {"tensor": 1, "sparse_tensor": 1, "seq": 1, "optional": 1, "map": 2}
_TYPE_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|[(),])")


def canonical_type(type_str: str) -> str:
    """Rewrite an ONNX type string with canonical element names and no spaces.

    ``seq(tensor(float))`` -> ``seq(tensor(float32))``; ``map(int64, double)`` ->
    ``map(int64,float64)``.  Raises ValueError on an element type opconv does not know,
    so a new ONNX type cannot slip into the files unnoticed.
    """
    tokens = _tokenize_type(type_str)
    out, pos = _parse_type(tokens, 0, type_str)
    if pos != len(tokens):
        raise ValueError(f"trailing text in type string {type_str!r}")
    return out


def _tokenize_type(type_str: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(type_str):
        if type_str[pos:].strip() == "":
            break
        match = _TYPE_TOKEN.match(type_str, pos)
        if not match:
            raise ValueError(f"cannot read type string {type_str!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def _parse_type(tokens: list[str], pos: int, original: str) -> tuple[str, int]:
    """One type starting at ``tokens[pos]``: a constructor with arguments, or an element type."""
    word = _token(tokens, pos, original)
    if pos + 1 < len(tokens) and tokens[pos + 1] == "(":
        args, pos = [], pos + 2
        while True:
            arg, pos = _parse_type(tokens, pos, original)
            args.append(arg)
            separator = _token(tokens, pos, original)
            if separator == ")":
                if _CONSTRUCTORS.get(word) != len(args):
                    raise ValueError(f"unknown type constructor {word}/{len(args)} in {original!r}")
                return f"{word}({','.join(args)})", pos + 1
            if separator != ",":
                raise ValueError(f"cannot read type string {original!r}")
            pos += 1
    element = ONNX_TYPE_NAMES.get(word, word)
    if element not in ELEMENT_TYPES:
        raise ValueError(f"unknown element type {word!r} in {original!r}")
    return element, pos + 1


def _token(tokens: list[str], pos: int, original: str) -> str:
    if pos >= len(tokens):
        raise ValueError(f"type string {original!r} ends too early")
    return tokens[pos]


def param_type(type_str: str, constraint_names) -> str:
    """A parameter's type: the constraint name as is, or a concrete type made canonical."""
    return type_str if type_str in constraint_names else canonical_type(type_str)


# --------------------------------------------------------------------------- docs

_FENCE = re.compile(r"^\s*```")
_HTML = re.compile(r"</?(?:a|b|i|p|br|em|strong|code|tt|sub|sup|ul|ol|li|dl|dt|dd|span|div)\b[^>]*>", re.I)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(`\[])")


def summarize(doc: str | None, limit: int = OP_DOC_LIMIT) -> str:
    """The first sentence or two of a doc's first paragraph, as plain text, at most ``limit`` chars."""
    text = _plain(_first_paragraph(doc or ""))
    if not text:
        return ""
    sentences = _SENTENCE_END.split(text)
    summary = sentences[0]
    # A second sentence is added when it fits, unless it only introduces a list or example.
    second = sentences[1] if len(sentences) > 1 else ""
    if second and not second.endswith(":") and len(summary) + 1 + len(second) <= limit:
        summary += " " + second
    if len(summary) > limit:
        summary = summary[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return summary


def _first_paragraph(doc: str) -> str:
    lines: list[str] = []
    for line in doc.strip().splitlines():
        if _FENCE.match(line) or (not line.strip() and lines):
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines)


def _plain(text: str) -> str:
    text = _HTML.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = re.sub(r"^#+\s*", "", text)  # a heading that opens the doc
    text = text.replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------- operators


def make_param(
    name: str, type_str: str, option: str, homogeneous: bool, min_arity: int, description: str, constraint_names
) -> Param:
    option = option.lower()
    if option not in PARAM_OPTIONS:
        raise ValueError(f"unknown formal parameter option {option!r}")
    variadic = option == "variadic"
    # homogeneous/min_arity only mean something for a variadic parameter; elsewhere keep
    # the format's defaults so readers are not misled by ONNX's placeholder values.
    return Param(
        name=name,
        type=param_type(type_str, constraint_names),
        option=option,
        homogeneous=bool(homogeneous) if variadic else True,
        min_arity=int(min_arity) if variadic else 1,
        doc=summarize(description, PARAM_DOC_LIMIT),
    )


def convert_schema(schema: onnx.defs.OpSchema) -> OpSchema:
    """One onnx ``OpSchema`` (one version of one op) as an opconv :class:`OpSchema`."""
    constraints = {
        tc.type_param_str: tuple(canonical_type(t) for t in tc.allowed_type_strs) for tc in schema.type_constraints
    }

    def params(formals):
        return tuple(
            make_param(p.name, p.type_str, p.option.name, p.is_homogeneous, p.min_arity, p.description, constraints)
            for p in formals
        )

    attributes = tuple(
        make_attribute(a.name, a.type.value, a.required, a.default_value, a.description)
        for a in sorted(schema.attributes.values(), key=lambda a: a.name)
    )
    return OpSchema(
        dialect=DIALECT,
        domain=schema.domain,
        name=schema.name,
        version=schema.since_version,
        doc=summarize(schema.doc),
        attributes=attributes,
        inputs=params(schema.inputs),
        outputs=params(schema.outputs),
        type_constraints=constraints,
        min_inputs=schema.min_input,
        max_inputs=schema.max_input,
        min_outputs=schema.min_output,
        max_outputs=schema.max_output,
        deprecated=bool(schema.deprecated),
    )


def onnx_schemas(domains=DOMAINS) -> list:
    """Every version of every op of ``domains``, as onnx reports them."""
    return [s for s in onnx.defs.get_all_schemas_with_history() if s.domain in domains]


def generate() -> str:
    """The text of onnx.json, exactly as it is committed."""
    ops = [convert_schema(s) for s in onnx_schemas()]
    domains = ", ".join(d or '"" (ai.onnx)' for d in DOMAINS)
    source = f"onnx {onnx.__version__}: onnx.defs.get_all_schemas_with_history(), domains {domains}"
    return dump(DIALECT, ops, source=source, generated_by=GENERATED_BY)


# --------------------------------------------------------------------------- command line


def diff_summary(committed: str, fresh: str, limit: int = 20) -> list[str]:
    """Human-readable differences between two schema files: header fields and op keys."""
    try:
        old = json.loads(committed)
    except json.JSONDecodeError as e:
        return [f"the committed file is not valid JSON ({e})"]
    new = json.loads(fresh)
    lines = [
        f"header {k!r}: {old.get(k)!r} -> {new.get(k)!r}"
        for k in ("format", "format_version", "dialect", "source", "generated_by")
        if old.get(k) != new.get(k)
    ]

    def by_key(data):
        return {(op["domain"], op["name"], op["version"]): op for op in data.get("ops", [])}

    old_ops, new_ops = by_key(old), by_key(new)
    for label, keys in (
        ("missing from committed file", sorted(new_ops.keys() - old_ops.keys())),
        ("no longer generated", sorted(old_ops.keys() - new_ops.keys())),
        ("changed", sorted(k for k in old_ops.keys() & new_ops.keys() if old_ops[k] != new_ops[k])),
    ):
        if keys:
            shown = ", ".join(f"{d or 'ai.onnx'}::{n}-{v}" for d, n, v in keys[:limit])
            more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
            lines.append(f"{len(keys)} op(s) {label}: {shown}{more}")
    if not lines:
        lines.append("same content, different bytes (formatting or op order)")
    return lines


def command_line(description: str, output: Path) -> argparse.ArgumentParser:
    """The options both generator scripts share."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the committed file differs from a fresh generation",
    )
    parser.add_argument("--output", type=Path, default=output, help=f"file to write or check (default {output})")
    return parser


def write_or_check(fresh: str, output: Path, check: bool) -> int:
    """Write ``fresh`` to ``output`` or, when checking, compare them; the process exit code."""
    if not check:
        output.write_text(fresh, encoding="utf-8")
        print(f"wrote {output} ({fresh.count(chr(10))} lines)")
        return 0
    if not output.exists():
        print(f"{output}: missing; run {Path(sys.argv[0]).name} to create it", file=sys.stderr)
        return 1
    committed = output.read_text(encoding="utf-8")
    if committed == fresh:
        print(f"{output}: up to date")
        return 0
    print(f"{output}: differs from a fresh generation:", file=sys.stderr)
    for line in diff_summary(committed, fresh):
        print(f"  {line}", file=sys.stderr)
    return 1


def main(argv=None) -> int:
    args = command_line("Generate opconv/schemas/onnx.json from onnx.defs.", OUTPUT).parse_args(argv)
    return write_or_check(generate(), args.output, args.check)


if __name__ == "__main__":
    sys.exit(main())
