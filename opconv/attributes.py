"""Node attributes, decoded and typed by the operator schemas: one codec for the three dialects.

In the graph core an attribute is an :class:`~opconv.ir.Attr` whose ``type`` is a schema attribute type
(``int``, ``floats``, ``tensor``, ``element_type``, ``region`` ...; see ``docs/schema-format.md``).
This module goes both ways between those and plain Python values:

- :func:`decode_attributes` gives a kernel or a translator its keyword arguments: every attribute the op's
  schema declares (Python-safe names: ``exclude-pad`` -> ``exclude_pad``), from the node or else from the
  schema's default, tensors as numpy arrays.  Executors decode once per node, when a graph is bound.
- :func:`typed_attributes` turns keyword values into Attrs typed by the schema, each value in the one form
  its type has in the graph core (:func:`canonical`: a ``float`` is a Python float, ``ints`` a list of
  ints ...), so that a writer never sees ``True`` for an int or ``1`` for a float.
- :func:`format_text` and :func:`parse_text` spell such values in a text format (IR ``<data>``, HLO text),
  given how that format writes one item of each type.
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .errors import ExecutionError, GraphError, OpconvError
from .ir import Attr, SparseTensor, Tensor
from .schemas import AttrParam, OpSchema, dialect_schemas


def python_name(attr_name: str) -> str:
    """An attribute name usable as a keyword argument (``lambda`` -> ``lambda_``,
    ``exclude-pad`` -> ``exclude_pad``)."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in attr_name)
    return name + "_" if keyword.iskeyword(name) else name


# ---------------------------------------------------------------------------
# decoding: Attr -> keyword arguments
# ---------------------------------------------------------------------------


def decode_attributes(
    schema: OpSchema | None,
    attrs: Mapping[str, Attr],
    label: str,
    *,
    strict: bool = True,
    error: type[OpconvError] = ExecutionError,
) -> dict[str, Any]:
    """Keyword arguments for a kernel or translator: every schema attribute, from the node or the schema default.

    An attribute the schema does not declare is an ``error`` naming ``label``.  ``strict``: so is a required
    attribute the node omits; otherwise it decodes to ``None``, for dialects whose kernels can do without
    (OpenVINO infers some, e.g. pads under ``auto_pad``).  Without a schema every attribute is passed as it is.
    """
    if schema is None:
        return {python_name(k): decode_value(a) for k, a in attrs.items()}
    unknown = set(attrs).difference(p.name for p in schema.attributes)
    if unknown:
        raise error(
            f"unknown attribute(s) {', '.join(sorted(unknown))} for {schema.name}-{schema.version}", where=label
        )
    out: dict[str, Any] = {}
    for p in schema.attributes:
        a = attrs.get(p.name)
        if a is not None and a.value is not None:
            out[python_name(p.name)] = decode_value(a)
        elif p.required and strict:
            raise error(f"required attribute {p.name!r} is missing", where=label)
        else:
            out[python_name(p.name)] = schema_default(p)
    return out


def decode_value(a: Attr) -> Any:
    """An attribute's value as a kernel takes it: tensors (sparse ones too) as numpy arrays, the rest as it is."""
    v = a.value
    if isinstance(v, Tensor):
        return v.numpy()
    if a.type == "tensors":
        return [t.numpy() for t in v]
    if isinstance(v, SparseTensor):
        return densify(v)
    if a.type == "sparse_tensors":
        return [densify(t) for t in v]
    return v


def text_value(value: Any) -> Any:
    """A STRING attribute's value as ``str`` (a STRINGS attribute's as a list of ``str``); other values unchanged.

    The ONNX reader keeps a string that is not UTF-8 as bytes, so that it is written back unchanged; no operator
    takes such a mode, equation or activation name, so it reads here with replacement characters and the caller
    refuses it by name (instead of failing to decode it)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and any(isinstance(v, bytes) for v in value):
        return [text_value(v) for v in value]
    return value


def schema_default(p: AttrParam) -> Any:
    """The default a schema gives attribute ``p`` (``None`` when it gives none); a tensor default as an array."""
    default = p.default
    if isinstance(default, dict) and "dtype" in default:  # a tensor default in the schema file
        from .types import element_type

        return np.asarray(default["values"], dtype=element_type(default["dtype"]).numpy).reshape(default["shape"])
    return default


def densify(st: SparseTensor) -> np.ndarray:
    """The dense array of a COO sparse tensor (indices either [NNZ] linear or [NNZ, rank])."""
    values = st.values.numpy()
    indices = st.indices.numpy().astype(np.int64)
    dense = np.zeros(st.dims, dtype=values.dtype)
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = values
    elif indices.size:
        dense[tuple(indices.T)] = values
    return dense


# ---------------------------------------------------------------------------
# typing: Python values -> Attr
# ---------------------------------------------------------------------------


def _text(value: Any) -> str | bytes:
    return value if isinstance(value, (str, bytes)) else str(value)  # bytes: an ONNX string that is not UTF-8


#: the one Python form of a value of each scalar type; a list type (``ints``) holds items of its scalar type
SCALARS: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "bool": bool, "string": _text}


def canonical(kind: str, value: Any) -> Any:
    """``value`` in the form the graph core keeps a ``kind`` attribute in (types without one: as it is)."""
    scalar = SCALARS.get(kind)
    if scalar is not None:
        return scalar(value)
    item = SCALARS.get(kind[:-1]) if kind.endswith("s") else None
    if item is not None:
        return [item(x) for x in value]
    return value


@functools.cache
def attribute_types(dialect: str, op: str, version: int = 1, domain: str = "") -> dict[str, tuple[str, str]]:
    """Python-safe attribute name -> (schema name, schema type) for ``op`` of ``dialect`` at ``version``."""
    schema = dialect_schemas(dialect).find(op, version, domain)
    if schema is None:
        where = f"{domain}::{op}" if domain else op
        raise GraphError(f"the {dialect} dialect has no operation {where} (version {version})")
    return {python_name(p.name): (p.name, p.type) for p in schema.attributes}


def typed_attributes(
    dialect: str, op: str, values: Mapping[str, Any], *, version: int = 1, domain: str = ""
) -> dict[str, Attr]:
    """``values`` (by schema or Python-safe name) as Attrs typed by ``op``'s schema; ``None`` values are left out."""
    known = attribute_types(dialect, op, version, domain)
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        if key not in known:
            raise GraphError(
                f"{dialect} {op}-{version} has no attribute {key!r}; it has: {', '.join(sorted(known)) or 'none'}"
            )
        name, kind = known[key]
        out[name] = Attr(name, kind, canonical(kind, value))
    return out


# ---------------------------------------------------------------------------
# text formats
# ---------------------------------------------------------------------------


def text_types(spellings: Mapping[str, Any]) -> frozenset[str]:
    """The attribute types a text format spelling these types can hold: them, and lists of the scalar ones."""
    return frozenset({*spellings, *(kind + "s" for kind in spellings if kind in SCALARS)})


def format_text(
    kind: str, value: Any, spellings: Mapping[str, Callable[[Any], str]], join: Callable[[list[str]], str]
) -> str:
    """``value`` of type ``kind`` in a text format that spells one item of each type with ``spellings`` and a
    list of them with ``join``.  Raises ValueError (a value that is not of its type, a type with no spelling)."""
    spell = spellings.get(kind)
    if spell is not None:
        return spell(canonical(kind, value))
    item = spellings.get(kind[:-1]) if kind.endswith("s") else None
    if item is None:
        raise ValueError(f"a {kind} has no spelling in this format")
    return join([item(x) for x in canonical(kind, value)])


def parse_text(
    kind: str, text: str, parsers: Mapping[str, Callable[[str], Any]], split: Callable[[str], list[str]]
) -> Any:
    """The inverse of :func:`format_text`: ``text`` read as a ``kind`` (ValueError when it is not one)."""
    parse = parsers.get(kind)
    if parse is not None:
        return parse(text)
    item = parsers.get(kind[:-1]) if kind.endswith("s") else None
    if item is None:
        raise ValueError(f"a {kind} has no spelling in this format")
    return [item(x) for x in split(text)]
