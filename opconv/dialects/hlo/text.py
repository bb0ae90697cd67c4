"""The HLO text format: a readable module syntax for HLO models, with its printer and parser.

A module is one ``func @main`` whose statements are constants (``const``) and
operations of the dialect, with region bodies (``While`` cond/body, ``If``
branches, ``Map`` computation, ``PartialReduce`` comparator) written as nested
blocks after the operation::

    HloModule loop, producer="opconv"

    func @main(%n: s32[], %x: f32[4]) -> (s32[], f32[4]) {
      const %one = s32[] {1}
      %i: s32[], %acc: f32[4] = While(%one, %x)
        cond(%ci: s32[], %cx: f32[4]) -> (pred[]) {
          %lt: pred[] = Compare(%ci, %n) {comparison_direction="LT"}
          return %lt
        }
        body(%bi: s32[], %bx: f32[4]) -> (s32[], f32[4]) {
          %next: s32[] = Add(%bi, %one)
          %twice: f32[4] = Add(%bx, %bx)
          return %next, %twice
        }
      return %i, %acc
    }

The grammar, the mapping onto the graph core and the sidecar weights file are
described in ``docs/hlo-dialect.md``.  :func:`print_module` and
:func:`parse_module` are exact inverses on what the format holds: names,
types, attributes (typed by the schema), regions and constant bytes, NaN
payloads and -0.0 included.  Doc strings and ``meta`` dicts are not kept.
Files and the sidecar are the business of :mod:`opconv.dialects.hlo.io`; this
module only sees them through the small :class:`WeightsSink` and
:class:`WeightsSource` interfaces.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, NoReturn, Protocol

import ml_dtypes
import numpy as np

from ... import budget
from ...attributes import format_text, text_types
from ...errors import GraphError, ModelReadError, ModelWriteError
from ...ir import Attr, Graph, Model, Node, Tensor, Value
from ...schemas import OpSchema, dialect_schemas
from ...types import ELEMENT_TYPES, TensorType, TupleType, ValueType, element_type

DIALECT = "hlo"
OPSETS = {"": 1}

#: constants with at most this many elements are written inline, larger ones go to the sidecar
INLINE_LIMIT = 16
#: constants and types with more elements than this are refused as absurd
MAX_ELEMENTS = 2**40
#: deepest nesting of regions and tuple types the parser follows
MAX_DEPTH = 64

# XLA's element-type spellings <-> opconv's canonical names (opconv/types.py).  The printer writes the
# short names; the parser also accepts the canonical ones.  ``string`` has no XLA spelling.
SHORT_NAMES = {
    "bool": "pred",
    "int8": "s8",
    "int16": "s16",
    "int32": "s32",
    "int64": "s64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
    "int4": "s4",
    "uint4": "u4",
    "int2": "s2",
    "uint2": "u2",
    "float8e4m3fn": "f8e4m3fn",
    "float8e4m3fnuz": "f8e4m3fnuz",
    "float8e5m2": "f8e5m2",
    "float8e5m2fnuz": "f8e5m2fnuz",
    "float8e8m0": "f8e8m0fnu",
    "float4e2m1": "f4e2m1fn",
    "float6e2m3": "f6e2m3fn",
    "float6e3m2": "f6e3m2fn",
    "string": "string",
}
_CANONICAL = {short: name for name, short in SHORT_NAMES.items()}
_CANONICAL.update({name: name for name in ELEMENT_TYPES})

_HEADER_STRINGS = ("producer", "producer_version", "doc", "weights")
_BARE_NAME = re.compile(r"(?!.*//)[A-Za-z0-9_.$/\-]+\Z")  # "//" would read as a comment
_BARE_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def bare_or_quoted(name: str) -> str:
    """A name as written: bare when it lexes as an identifier, quoted otherwise.

    `inf` and `nan` match the identifier pattern but lex as numbers, so they are quoted too."""
    return name if _BARE_IDENT.match(name) and name not in ("inf", "nan") else quote(name)


class HloParseError(ModelReadError):
    """A syntax or schema error in HLO text, at ``file:line:column``."""

    def __init__(self, message: str, *, file: str, line: int, column: int):
        self.file, self.line, self.column = file, line, column
        super().__init__(message, where=f"{file}:{line}:{column}")


class WeightsSink(Protocol):
    """Where the printer puts constants too large to inline (the io module's sidecar writer)."""

    location: str  # the sidecar's file name, relative to the module file

    def add(self, tensor: Tensor, label: str) -> tuple[int, int]:
        """Append the tensor's raw little-endian bytes; returns (offset, length)."""


class WeightsSource(Protocol):
    """Where the parser finds ``weights(offset=, length=)`` data; raises ValueError with a reason."""

    def open(self, location: str) -> None: ...

    def tensor(self, dtype: str, shape: tuple[int, ...], offset: int, length: int) -> Tensor: ...


# ---------------------------------------------------------------------------
# shared spelling helpers
# ---------------------------------------------------------------------------


def quote(text: str) -> str:
    """A double-quoted string literal (JSON escapes; printable Unicode kept as is)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F or 0xD800 <= code < 0xE000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def value_ref(name: str) -> str:
    """``%name``, quoted when the name has characters outside ``[A-Za-z0-9_.$/-]`` (or ``//``)."""
    return "%" + (name if _BARE_NAME.match(name) else quote(name))


def format_type(t) -> str:
    """``f32[1,3,224,224]``, ``s32[]`` (scalar), ``f32[?,3]``, ``f32[*]`` (unknown rank), ``(f32[2], s32[])``."""
    if t is None:
        return "?"
    if isinstance(t, TupleType):
        return "(" + ", ".join(format_type(e) for e in t.elements) + ")"
    if not isinstance(t, TensorType):
        raise ValueError(f"the HLO text format has no spelling for the value type {t}")
    dtype = "?" if t.dtype is None else SHORT_NAMES.get(t.dtype)
    if dtype is None:
        raise ValueError(f"element type {t.dtype!r} has no HLO spelling")
    if t.shape is None:
        return f"{dtype}[*]"
    return f"{dtype}[{','.join(_format_dim(d) for d in t.shape)}]"


def _format_dim(d) -> str:
    if d is None:
        return "?"
    if isinstance(d, str):
        return bare_or_quoted(d)
    return str(int(d))


def _uint_view(array: np.ndarray) -> np.ndarray:
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])


def _float_parts(array: np.ndarray) -> np.ndarray:
    """A complex array as its real/imaginary float parts, interleaved; other arrays unchanged."""
    if array.dtype.kind == "c":
        part = np.float32 if array.dtype == np.complex64 else np.float64
        return np.ascontiguousarray(array).reshape(-1).view(part)
    return array.reshape(-1)


def _format_float(x: np.ndarray, bits: int, dtype: np.dtype, canonical_nan: int) -> str:
    """One float element, spelled so that parsing it back gives the same bits."""
    with np.errstate(invalid="ignore"):  # NaNs of the narrow types warn when widened
        wide = float(x.astype(np.float64)[0])
    if wide != wide:
        return "nan" if bits == canonical_nan else f"nan(0x{bits:0{2 * dtype.itemsize}x})"
    if wide in (float("inf"), float("-inf")):
        return "inf" if wide > 0 else "-inf"
    if dtype == np.float64:
        return repr(wide)
    # Shortest spelling for the element's own width; ml_dtypes types go through float32, which holds them.
    short = str(x.astype(np.float16 if dtype == np.float16 else np.float32)[0])
    if _uint_view(np.array(float(short)).astype(dtype).reshape(1))[0] == bits:
        return short
    return repr(wide)  # the float64 spelling is always exact


def _format_double(x: float) -> str:
    """A Python float attribute: ``repr``, or ``nan(0x...)`` for a NaN other than the usual one."""
    if x != x:
        return _format_float(
            np.array([x]),
            int(np.array([x]).view(np.uint64)[0]),
            np.dtype(np.float64),
            int(np.array([np.nan]).view(np.uint64)[0]),
        )
    return repr(x)


#: how the text spells one attribute value of each scalar schema type (a list type: ``[a, b]`` of its items)
SPELLINGS: dict[str, Callable[[Any], str]] = {
    "int": str,
    "float": _format_double,
    "bool": lambda v: "true" if v else "false",
    "string": quote,
}
TEXT_TYPES = text_types(SPELLINGS)


def _bracketed(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def format_elements(array: np.ndarray, dtype: str) -> str:
    """The ``{...}`` body of an inline constant: row-major elements."""
    et = element_type(dtype)
    flat = np.asarray(array).reshape(-1)
    if dtype == "bool":
        items = ["true" if v else "false" for v in flat]
    elif dtype == "string":
        if not all(isinstance(v, str) for v in flat):
            raise ValueError("string constants must hold str elements")
        items = [quote(v) for v in flat]
    elif et.is_int:
        items = [str(int(v)) for v in flat]
    else:
        parts = _float_parts(np.ascontiguousarray(flat))
        bits = _uint_view(parts)
        canonical = int(_uint_view(np.array([np.nan]).astype(parts.dtype))[0])
        items = [_format_float(parts[i : i + 1], int(bits[i]), parts.dtype, canonical) for i in range(parts.size)]
        if et.is_complex:
            items = [f"({items[i]}, {items[i + 1]})" for i in range(0, len(items), 2)]
    return "{" + ", ".join(items) + "}"


# ---------------------------------------------------------------------------
# printing
# ---------------------------------------------------------------------------


def print_module(model: Model, *, weights: WeightsSink | None = None, inline_limit: int = INLINE_LIMIT) -> str:
    """The module text of an HLO ``model``.

    Constants with more than ``inline_limit`` elements go to ``weights`` when
    one is given (inline otherwise).  The graphs are put in topological order
    first.  Raises :class:`ModelWriteError` for what the format cannot hold.
    """
    return _Printer(model, weights, inline_limit).module()


class _PrintScope:
    """The names visible at one point of the printed text, to prove every reference reads back the same value."""

    def __init__(self, parent: _PrintScope | None, graph: Graph):
        self.parent, self.graph = parent, graph
        self.names: dict[str, Value] = {}

    def define(self, v: Value) -> None:
        other = self.names.get(v.name)
        if other is not None and other is not v:
            raise ModelWriteError(
                f"two values of graph {self.graph.name!r} are named {v.name!r}; the text format needs unique names"
            )
        self.names[v.name] = v

    def ref(self, v: Value, user: str) -> str:
        scope = self
        while scope is not None:
            found = scope.names.get(v.name)
            if found is not None:
                if found is v:
                    return value_ref(v.name)
                break
            scope = scope.parent
        raise ModelWriteError(
            f"{user} reads {v.name!r}, which is not defined before it (or another value of the same name hides it)"
        )


class _Printer:
    def __init__(self, model: Model, weights: WeightsSink | None, inline_limit: int):
        self.model = model
        self.weights = weights
        self.inline_limit = inline_limit
        self.schemas = dialect_schemas(DIALECT)
        self.lines: list[str] = []
        self.used_weights = False

    def module(self) -> str:
        m = self.model
        if m.dialect != DIALECT:
            raise ModelWriteError(f"a {m.dialect} model cannot be written as HLO text; convert it first")
        if m.opsets and dict(m.opsets) != OPSETS:
            raise ModelWriteError(f"an HLO model imports opsets {OPSETS}, this one {dict(m.opsets)}")
        if m.functions:
            raise ModelWriteError(
                f"the HLO text format holds one function (main); the model has {len(m.functions)} more"
            )
        self.function(m.graph)
        header = [f"HloModule {bare_or_quoted(m.graph.name)}"]
        for key, text in (("producer", m.producer), ("producer_version", m.producer_version), ("doc", m.doc)):
            if text:
                header.append(f"{key}={quote(text)}")
        if self.used_weights and self.weights is not None:
            header.append(f"weights={quote(self.weights.location)}")
        if m.metadata:
            pairs = ", ".join(f"{quote(k)}: {quote(v)}" for k, v in m.metadata.items())
            header.append(f"metadata={{{pairs}}}")
        return ", ".join(header) + "\n\n" + "\n".join(self.lines) + "\n"

    def function(self, g: Graph) -> None:
        scope = _PrintScope(None, g)
        params, results = self.signature(g, scope, "main")
        self.lines.append(f"func @main({params}) -> ({results}) {{")
        self.body(g, scope, "  ")
        self.lines.append("}")

    def signature(self, g: Graph, scope: _PrintScope, owner: str) -> tuple[str, str]:
        self.sort(g)
        if g.sparse_initializers:
            raise ModelWriteError(f"graph {g.name!r} has sparse initializers, which HLO cannot hold")
        params = []
        for v in g.inputs:
            text = f"{value_ref(v.name)}: {self.type(v.type, f'parameter {v.name!r} of {owner}')}"
            if v.const is not None:
                text += " = " + self.tensor(v.const, f"default of parameter {v.name!r}")
            scope.define(v)
            params.append(text)
        results = ", ".join(self.type(v.type, f"result {v.name!r} of {owner}") for v in g.outputs)
        return ", ".join(params), results

    def sort(self, g: Graph) -> None:
        try:
            g.topological_sort()
        except GraphError as e:
            raise ModelWriteError(e.message) from None

    def body(self, g: Graph, scope: _PrintScope, indent: str) -> None:
        inputs = {id(v) for v in g.inputs}
        for name, v in g.initializers.items():
            if id(v) in inputs or v.const is None:
                continue
            declared = "" if v.type == v.const.type else f": {self.type(v.type, f'constant {name!r}')}"
            scope.define(v)
            self.lines.append(f"{indent}const {value_ref(v.name)}{declared} = {self.tensor(v.const, name)}")
        for node in g.nodes:
            self.node(node, scope, indent)
        refs = ", ".join(scope.ref(v, f"the result list of graph {g.name!r}") for v in g.outputs)
        self.lines.append(f"{indent}return {refs}".rstrip())

    def node(self, n: Node, scope: _PrintScope, indent: str) -> None:
        schema = self.schema(n)
        operands = ", ".join("_" if v is None else scope.ref(v, n.label) for v in n.inputs)
        plain, regions = [], []
        for name, a in n.attrs.items():
            spec = schema.attribute(name)
            if spec is None:
                raise ModelWriteError(f"{n.label}: HLO {n.op} has no attribute {name!r}")
            if a.type != spec.type or a.ref is not None or a.value is None:
                raise ModelWriteError(
                    f"{n.label}: attribute {name!r} is a {a.type} ({a.value!r:.40}); "
                    f"the schema of {n.op} declares a {spec.type}"
                )
            if a.type == "region":
                regions.append(a)
            else:
                plain.append(f"{name}={self.attr_value(a, n)}")
        results = []
        for v in n.outputs:
            if v is None:
                results.append("_")
                continue
            scope.define(v)
            typed = "" if v.type is None else f": {self.type(v.type, n.label)}"
            results.append(value_ref(v.name) + typed)
        line = indent
        if n.name != _default_node_name(n.outputs):
            line += f"node {quote(n.name)}: "
        if results:
            line += ", ".join(results) + " = "
        line += f"{n.op}({operands})"
        if plain:
            line += " {" + ", ".join(plain) + "}"
        self.lines.append(line)
        for a in regions:
            self.region(a, scope, indent + "  ", n)

    def schema(self, n: Node) -> OpSchema:
        schema = self.schemas.find(n.op, 1, "") if n.domain in ("", "hlo") and n.version in (1, None) else None
        if schema is None:
            raise ModelWriteError(
                f"{n.label}: {n.op} (domain {n.domain!r}, version {n.version}) is not an operation of the HLO dialect"
            )
        return schema

    def region(self, a: Attr, outer: _PrintScope, indent: str, owner: Node) -> None:
        g = a.value
        if not isinstance(g, Graph):
            raise ModelWriteError(f"{owner.label}: region {a.name!r} holds a {type(g).__name__}, not a Graph")
        scope = _PrintScope(outer, g)
        params, results = self.signature(g, scope, f"region {a.name!r} of {owner.label}")
        named = "" if g.name == a.name else " " + quote(g.name)
        self.lines.append(f"{indent}{a.name}{named}({params}) -> ({results}) {{")
        self.body(g, scope, indent + "  ")
        self.lines.append(f"{indent}}}")

    def attr_value(self, a: Attr, n: Node) -> str:
        v = a.value
        if a.type == "tensor":
            return self.tensor(v, f"attribute {a.name!r} of {n.label}")
        if a.type not in TEXT_TYPES:
            raise ModelWriteError(f"{n.label}: attribute {a.name!r} of type {a.type} has no HLO text spelling")
        try:
            return format_text(a.type, v, SPELLINGS, _bracketed)
        except (TypeError, ValueError) as e:
            raise ModelWriteError(
                f"{n.label}: attribute {a.name!r} = {v!r:.60} is not a valid {a.type} ({e})"
            ) from None

    def type(self, t, owner: str) -> str:
        try:
            return format_type(t)
        except ValueError as e:
            raise ModelWriteError(f"{owner}: {e}") from None

    def tensor(self, t: Tensor, label: str) -> str:
        if not isinstance(t, Tensor):
            raise ModelWriteError(f"{label}: a constant must be a Tensor, got {type(t).__name__}")
        head = self.type(TensorType(t.dtype, t.shape), label)
        count = budget.elements(t.shape)
        if self.weights is not None and count > self.inline_limit and t.dtype != "string":
            offset, length = self.weights.add(t, label)
            self.used_weights = True
            return f"{head} weights(offset={offset}, length={length})"
        array = np.asarray(t.numpy())
        expected = element_type(t.dtype).numpy
        if t.dtype != "string" and array.dtype != expected:
            raise ModelWriteError(f"{label}: declared {t.dtype} but holds {array.dtype} data")
        try:
            return f"{head} {format_elements(array, t.dtype)}"
        except ValueError as e:
            raise ModelWriteError(f"{label}: {e}") from None


def _default_node_name(outputs: list[Value | None]) -> str:
    """The node name the text leaves implicit: its first output's name ("" without outputs)."""
    return next((v.name for v in outputs if v is not None), "")


# ---------------------------------------------------------------------------
# lexing
# ---------------------------------------------------------------------------


class _Tok(NamedTuple):
    kind: str  # value | symbol | string | number | ident | punct | eof
    text: str
    pos: int


_TOKEN = re.compile(
    r"""
    (?P<skip>[ \t\r\n]+|//[^\n]*)
  | (?P<value>%(?:(?:[A-Za-z0-9_.$\-]|/(?!/))+|"(?:[^"\\\n]|\\.)*"))
  | (?P<symbol>@[A-Za-z0-9_.$\-]+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?0x[0-9A-Fa-f]+|-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|-?(?:inf|nan)\b)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>->|[(){}\[\],:=?*])
""",
    re.VERBOSE,
)


def _lex(text: str) -> Iterator[_Tok | int]:
    """Tokens of ``text``; an ``int`` in the stream is the position of a character no token starts with."""
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            yield pos
            return
        kind = m.lastgroup or "skip"  # every alternative of the pattern is a named group
        if kind != "skip":
            yield _Tok(kind, m.group(), pos)
        pos = m.end()
    yield _Tok("eof", "", end)


# ---------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------


def parse_module(text: str, *, where: str = "<string>", weights: WeightsSource | None = None) -> Model:
    """Parse module text into an HLO :class:`Model`; errors are :class:`HloParseError` (file:line:column).

    ``weights`` resolves ``weights(offset=, length=)`` constants (the io module
    passes one that reads the sidecar beside the file).
    """
    return _Parser(text, where, weights).module()


def parse_type(text: str):
    """A value type from its spelling (``f32[2,3]``, ``(f32[2], s32[])``, ``?``)."""
    p = _Parser(text, "<type>", None)
    t = p.value_type()
    p.expect("eof", what="the end of the type")
    return t


class _Scope:
    """Names defined so far in one graph, falling back to the enclosing graphs."""

    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.names: dict[str, tuple[Value, int]] = {}


class _Parser:
    def __init__(self, text: str, where: str, weights: WeightsSource | None):
        self.text = text
        self.where = where
        self.weights = weights
        self.weights_open = False
        self.schemas = dialect_schemas(DIALECT)
        self._line_starts: list[int] | None = None
        self.tokens: list[_Tok] = []
        for tok in _lex(text):
            if isinstance(tok, int):
                char = text[tok]
                what = (
                    "unterminated string"
                    if char == '"' or text[tok : tok + 2] == '%"'
                    else f"unexpected character {char!r}"
                )
                raise self.error(what, _Tok("eof", "", tok))
            self.tokens.append(tok)
        self.i = 0

    # -- token helpers --------------------------------------------------------------
    def peek(self, ahead: int = 0) -> _Tok:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def next(self) -> _Tok:
        tok = self.peek()
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def at(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.text == text and tok.kind in ("punct", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.next()
            return True
        return False

    def expect(self, kind: str, text: str | None = None, *, what: str) -> _Tok:
        tok = self.peek()
        if tok.kind != kind or (text is not None and tok.text != text):
            raise self.error(f"expected {what}, found {describe(tok)}", tok)
        return self.next()

    def punct(self, text: str) -> _Tok:
        return self.expect("punct", text, what=f"'{text}'")

    def error(self, message: str, tok: _Tok) -> HloParseError:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._line_starts, tok.pos)
        column = tok.pos - self._line_starts[line - 1] + 1
        return HloParseError(message, file=self.where, line=line, column=column)

    def string(self, tok: _Tok) -> str:
        try:
            return json.loads(tok.text, strict=False)
        except ValueError as e:
            raise self.error(f"bad string literal ({getattr(e, 'msg', e)})", tok) from None

    def name_of(self, tok: _Tok) -> str:
        return self.string(_Tok("string", tok.text[1:], tok.pos + 1)) if tok.text.startswith('%"') else tok.text[1:]

    # -- module ----------------------------------------------------------------------
    def module(self) -> Model:
        self.expect("ident", "HloModule", what="'HloModule' (an HLO text module starts with it)")
        graph = Graph(self.graph_name())
        header: dict[str, Any] = {}
        while self.accept(","):
            key_tok = self.expect(
                "ident", what="a module header field (producer, producer_version, doc, weights, metadata)"
            )
            key = key_tok.text
            if key in header:
                raise self.error(f"module header field {key!r} is given twice", key_tok)
            self.punct("=")
            if key in _HEADER_STRINGS:
                header[key] = self.string(self.expect("string", what=f"a quoted string for {key}"))
            elif key == "metadata":
                header[key] = self.string_map()
            else:
                raise self.error(
                    f"unknown module header field {key!r}; expected producer, producer_version, "
                    "doc, weights or metadata",
                    key_tok,
                )
            if key == "weights":
                self.open_weights(header[key], key_tok)
        self.expect("ident", "func", what="'func @main'")
        sym = self.expect("symbol", what="'@main'")
        if sym.text != "@main":
            raise self.error(f"the module's function is {sym.text}; an HLO module has exactly one, @main", sym)
        self.graph_body(graph, _Scope(None), depth=0)
        self.expect("eof", what="the end of the module after the closing '}' of @main")
        return Model(
            graph=graph,
            dialect=DIALECT,
            opsets=dict(OPSETS),
            producer=header.get("producer", ""),
            producer_version=header.get("producer_version", ""),
            doc=header.get("doc", ""),
            metadata=header.get("metadata", {}),
            path=None if self.where == "<string>" else self.where,
        )

    def graph_name(self) -> str:
        tok = self.next()
        if tok.kind == "string":
            return self.string(tok)
        if tok.kind == "ident":
            return tok.text
        raise self.error(f"expected the module's name, found {describe(tok)}", tok)

    def string_map(self) -> dict[str, str]:
        self.punct("{")
        out: dict[str, str] = {}
        while not self.accept("}"):
            if out:
                self.punct(",")
            key_tok = self.expect("string", what="a quoted metadata key")
            key = self.string(key_tok)
            if key in out:
                raise self.error(f"metadata key {key!r} is given twice", key_tok)
            self.punct(":")
            out[key] = self.string(self.expect("string", what="a quoted metadata value"))
        return out

    def open_weights(self, location: str, tok: _Tok) -> None:
        if self.weights is None:
            raise self.error("the module keeps constants in a weights file, but it was not read from a file", tok)
        try:
            self.weights.open(location)
        except ValueError as e:
            raise self.error(str(e), tok) from None
        self.weights_open = True

    # -- graphs (the function and regions) -------------------------------------------
    def graph_body(self, graph: Graph, scope: _Scope, depth: int) -> None:
        """``(params) [-> (types)] { statements return ... }`` into ``graph``."""
        self.punct("(")
        while not self.accept(")"):
            if graph.inputs:
                self.punct(",")
            self.parameter(graph, scope)
        declared: list[tuple[_Tok, ValueType | None]] | None = None
        if self.accept("->"):
            self.punct("(")
            declared = []
            while not self.accept(")"):
                if declared:
                    self.punct(",")
                declared.append((self.peek(), self.value_type()))
        self.punct("{")
        while not self.at("return"):
            if self.at("const"):
                self.constant(graph, scope)
            else:
                self.operation(graph, scope, depth)
        ret = self.next()
        while not self.at("}"):
            if graph.outputs:
                self.punct(",")
            value = self.operand(scope, allow_none=False)
            assert value is not None  # allow_none=False
            graph.outputs.append(value)
        self.punct("}")
        if declared is not None:
            if len(declared) != len(graph.outputs):
                raise self.error(
                    f"the signature declares {len(declared)} result(s), return gives {len(graph.outputs)}", ret
                )
            for (tok, t), v in zip(declared, graph.outputs):
                if t != v.type:
                    raise self.error(
                        f"the signature declares {format_type(t)}, but the returned "
                        f"{value_ref(v.name)} is {format_type(v.type)}",
                        tok,
                    )

    def parameter(self, graph: Graph, scope: _Scope) -> None:
        tok = self.expect("value", what="a parameter (%name: type)")
        name = self.name_of(tok)
        self.claim(scope, name, tok)
        self.punct(":")
        t = self.value_type()
        if self.accept("="):
            v = graph.add_initializer(name, self.tensor_literal())
            v.type = t
            graph.inputs.append(v)
        else:
            v = graph.add_input(name, t)
        self.define(scope, v, tok)

    def claim(self, scope: _Scope, name: str, tok: _Tok) -> None:
        """Refuse a second definition of ``name`` in one graph (regions may shadow outer names)."""
        if name in scope.names:
            first = self.error("", _Tok("eof", "", scope.names[name][1])).line
            raise self.error(f"{value_ref(name)} is already defined on line {first}", tok)

    def define(self, scope: _Scope, v: Value, tok: _Tok) -> None:
        self.claim(scope, v.name, tok)
        scope.names[v.name] = (v, tok.pos)

    def constant(self, graph: Graph, scope: _Scope) -> None:
        self.next()  # const
        tok = self.expect("value", what="the constant's name (%name)")
        name = self.name_of(tok)
        declared = self.value_type() if self.accept(":") else None
        self.punct("=")
        self.claim(scope, name, tok)
        v = graph.add_initializer(name, self.tensor_literal())
        if declared is not None:
            v.type = declared
        self.define(scope, v, tok)

    def operand(self, scope: _Scope, *, allow_none: bool = True) -> Value | None:
        tok = self.next()
        if allow_none and tok.kind == "ident" and tok.text == "_":
            return None
        if tok.kind != "value":
            raise self.error(f"expected a value (%name{' or _' if allow_none else ''}), found {describe(tok)}", tok)
        name = self.name_of(tok)
        s: _Scope | None = scope
        while s is not None:
            if name in s.names:
                return s.names[name][0]
            s = s.parent
        raise self.error(f"{value_ref(name)} is not defined before this use", tok)

    # -- operations -------------------------------------------------------------------
    def operation(self, graph: Graph, scope: _Scope, depth: int) -> None:
        node_name = None
        if self.at("node") and self.peek(1).kind == "string":
            self.next()
            node_name = self.string(self.next())
            self.punct(":")
        results: list[tuple[_Tok, str, Any] | None] = []
        if self.peek().kind == "value" or (self.at("_") and (self.at(",", 1) or self.at("=", 1))):
            while True:
                tok = self.next()
                if tok.kind == "ident" and tok.text == "_":
                    results.append(None)
                elif tok.kind == "value":
                    results.append((tok, self.name_of(tok), self.value_type() if self.accept(":") else None))
                else:
                    raise self.error(f"expected a result (%name: type or _), found {describe(tok)}", tok)
                if not self.accept(","):
                    break
            self.punct("=")
        op_tok = self.expect("ident", what="an operation name (e.g. Add), 'const' or 'return'")
        schema = self.schemas.find(op_tok.text, 1, "")
        if schema is None:
            raise self.error(f"unknown HLO operation {op_tok.text!r} (see `opconv schema list hlo`)", op_tok)
        self.punct("(")
        inputs: list[Value | None] = []
        while not self.accept(")"):
            if inputs:
                self.punct(",")
            inputs.append(self.operand(scope))
        attrs = self.attributes(schema) if self.at("{") else {}
        while self.peek().kind == "ident" and _is_region(schema, self.peek().text):
            tok = self.next()
            if tok.text in attrs:
                raise self.error(f"attribute {tok.text!r} is given twice", tok)
            attrs[tok.text] = Attr(tok.text, "region", self.region(tok, graph, scope, depth))
        outputs = [None if r is None else Value(r[1], r[2]) for r in results]
        name = node_name if node_name is not None else _default_node_name(outputs)
        graph.add_node(Node(op_tok.text, inputs, outputs, domain="", version=1, name=name, attrs=attrs))
        for r, v in zip(results, outputs):
            if r is not None and v is not None:
                self.define(scope, v, r[0])

    def attributes(self, schema: OpSchema) -> dict[str, Attr]:
        self.punct("{")
        attrs: dict[str, Attr] = {}
        while not self.accept("}"):
            if attrs:
                self.punct(",")
            tok = self.expect("ident", what="an attribute name")
            spec = schema.attribute(tok.text)
            if spec is None:
                known = ", ".join(a.name for a in schema.attributes) or "none"
                raise self.error(f"{schema.name} has no attribute {tok.text!r} (it has: {known})", tok)
            if spec.type == "region":
                raise self.error(
                    f"{tok.text!r} is a region; write it as a block after the attributes: "
                    f"{tok.text}(%p: type, ...) {{ ... }}",
                    tok,
                )
            if tok.text in attrs:
                raise self.error(f"attribute {tok.text!r} is given twice", tok)
            self.punct("=")
            attrs[tok.text] = Attr(tok.text, spec.type, self.attr_value(spec.type, f"{schema.name}.{tok.text}"))
        return attrs

    def region(self, tok: _Tok, outer: Graph, scope: _Scope, depth: int) -> Graph:
        if depth >= MAX_DEPTH:
            raise self.error(f"regions nest deeper than {MAX_DEPTH} levels", tok)
        name = self.string(self.next()) if self.peek().kind == "string" else tok.text
        graph = Graph(name, parent=outer)
        self.graph_body(graph, _Scope(scope), depth + 1)
        return graph

    def attr_value(self, kind: str, label: str) -> Any:
        if kind in ("ints", "floats", "bools", "strings"):
            self.punct("[")
            items: list = []
            while not self.accept("]"):
                if items:
                    self.punct(",")
                items.append(self.attr_value(kind[:-1], label))
            return items
        if kind == "tensor":
            return self.tensor_literal()
        tok = self.next()
        if kind == "int" and tok.kind == "number" and _is_int(tok.text):
            return int(tok.text)
        if kind == "float" and tok.kind == "number" and tok.text == "nan" and self.at("("):
            return float(self.floats([_Bits(tok, self.nan_bits())], np.dtype(np.float64))[0])
        if kind == "float" and tok.kind == "number" and not tok.text.lstrip("-").startswith("0x"):
            return float(tok.text)
        if kind == "bool" and tok.kind == "ident" and tok.text in ("true", "false"):
            return tok.text == "true"
        if kind == "string" and tok.kind == "string":
            return self.string(tok)
        wanted = {"int": "an integer", "float": "a number", "bool": "true or false", "string": "a quoted string"}.get(
            kind
        )
        if wanted is None:
            raise self.error(f"attribute {label} has type {kind}, which the text format cannot hold", tok)
        article = "an" if kind == "int" else "a"
        raise self.error(f"attribute {label} is {article} {kind}: expected {wanted}, found {describe(tok)}", tok)

    # -- types and constants ---------------------------------------------------------
    def value_type(self, depth: int = 0):
        tok = self.peek()
        if depth >= MAX_DEPTH:
            raise self.error(f"tuple types nest deeper than {MAX_DEPTH} levels", tok)
        if self.accept("("):
            elements: list[ValueType | None] = []
            while not self.accept(")"):
                if elements:
                    self.punct(",")
                elements.append(self.value_type(depth + 1))
            return TupleType(tuple(elements))
        if self.accept("?"):
            if not self.at("["):
                return None
            dtype = None
        else:
            tok = self.expect("ident", what="a type (e.g. f32[2,3], s32[], (f32[2], pred[]))")
            dtype = _CANONICAL.get(tok.text)
            if dtype is None:
                raise self.error(
                    f"unknown element type {tok.text!r}; expected one of "
                    f"{', '.join(sorted(set(SHORT_NAMES.values())))}",
                    tok,
                )
        self.punct("[")
        if self.accept("*"):
            self.punct("]")
            return TensorType(dtype, None)
        dims: list = []
        while not self.accept("]"):
            if dims:
                self.punct(",")
            dims.append(self.dim())
        count = 1
        for d in dims:
            if isinstance(d, int):
                count *= d
        if count > MAX_ELEMENTS:
            raise self.error(f"absurd shape [{','.join(map(_format_dim, dims))}]: more than 2**40 elements", tok)
        return TensorType(dtype, tuple(dims))

    def dim(self):
        tok = self.next()
        if tok.kind == "number" and _is_int(tok.text):
            value = int(tok.text)
            if value < 0:
                raise self.error(f"dimension {value} is negative", tok)
            return value
        if tok.kind == "punct" and tok.text == "?":
            return None
        if tok.kind == "ident":
            return tok.text
        if tok.kind == "string":
            return self.string(tok)
        raise self.error(f"expected a dimension (an integer, ? or a symbolic name), found {describe(tok)}", tok)

    def tensor_literal(self) -> Tensor:
        tok = self.peek()
        t = self.value_type()
        if not isinstance(t, TensorType) or t.dtype is None or not t.is_static:
            raise self.error(f"a constant needs an element type and a static shape, got {format_type(t)}", tok)
        shape = tuple(d for d in t.shape or () if isinstance(d, int))  # all of them: the shape is static
        count = budget.elements(shape)
        if self.at("weights"):
            return self.weights_tensor(t.dtype, shape)
        open_tok = self.punct("{")
        array = self.elements(t.dtype, count, open_tok)
        return Tensor.from_array(array.reshape(shape), dtype=t.dtype)

    def weights_tensor(self, dtype: str, shape: tuple[int, ...]) -> Tensor:
        tok = self.next()
        self.punct("(")
        fields = {}
        for key in ("offset", "length"):
            if key == "length":
                self.punct(",")
            self.expect("ident", key, what=f"'{key}='")
            self.punct("=")
            number = self.expect("number", what=f"the {key} in bytes")
            if not _is_int(number.text) or int(number.text) < 0:
                raise self.error(f"the {key} must be a non-negative integer, found {number.text}", number)
            fields[key] = int(number.text)
        self.punct(")")
        if not self.weights_open or self.weights is None:
            raise self.error(
                'weights(...) needs a weights file named in the module header (HloModule name, weights="file")', tok
            )
        if dtype == "string":
            raise self.error("string constants cannot be stored in the weights file", tok)
        try:
            return self.weights.tensor(dtype, shape, fields["offset"], fields["length"])
        except ValueError as e:
            raise self.error(str(e), tok) from None

    def elements(self, dtype: str, count: int, open_tok: _Tok) -> np.ndarray:
        et = element_type(dtype)
        items: list = []
        while not self.accept("}"):
            if items:
                self.punct(",")
            if et.is_complex:
                self.punct("(")
                real = self.element_token()
                self.punct(",")
                items.append([real, self.element_token()])
                self.punct(")")
            else:
                items.append(self.element_token())
        if len(items) != count:
            raise self.error(f"a {SHORT_NAMES[dtype]} constant of {count} element(s) lists {len(items)}", open_tok)
        if dtype == "bool":
            return np.array([self.boolean(t) for t in items], dtype=np.bool_)
        if dtype == "string":
            strings = [
                self.string(t) if isinstance(t, _Tok) and t.kind == "string" else self.bad_element(t, "a quoted string")
                for t in items
            ]
            array = np.empty(len(strings), dtype=object)
            array[:] = strings
            return array
        if et.is_int:
            return self.integers(items, et)
        if et.is_complex:
            part = np.dtype(np.float32 if dtype == "complex64" else np.float64)
            flat = [t for pair in items for t in pair]
            return self.floats(flat, part).view(np.dtype(dtype))  # complex64 / complex128
        return self.floats(items, np.dtype(et.numpy))

    def element_token(self) -> _Tok | _Bits:
        tok = self.next()
        if tok.kind == "number" and tok.text == "nan" and self.at("("):
            return _Bits(tok, self.nan_bits())
        return tok

    def nan_bits(self) -> _Tok:
        self.punct("(")
        bits = self.expect("number", what="the NaN's bits in hex (0x...)")
        if not bits.text.startswith("0x"):
            raise self.error(f"expected the NaN's bits in hex (0x...), found {describe(bits)}", bits)
        self.punct(")")
        return bits

    def bad_element(self, tok, wanted: str) -> NoReturn:
        tok = tok.tok if isinstance(tok, _Bits) else tok
        raise self.error(f"expected {wanted} as a constant element, found {describe(tok)}", tok)

    def boolean(self, tok) -> bool:
        if isinstance(tok, _Tok) and tok.kind == "ident" and tok.text in ("true", "false"):
            return tok.text == "true"
        self.bad_element(tok, "true or false")

    def integers(self, items: list, et) -> np.ndarray:
        info = ml_dtypes.iinfo(et.numpy) if et.numpy.itemsize == 1 and et.bits < 8 else np.iinfo(et.numpy)
        values = []
        for tok in items:
            if not (isinstance(tok, _Tok) and tok.kind == "number" and _is_int(tok.text)):
                self.bad_element(tok, "an integer")
            value = int(tok.text)
            if not int(info.min) <= value <= int(info.max):
                raise self.error(
                    f"{value} is out of range for {SHORT_NAMES[et.name]} ({int(info.min)}..{int(info.max)})", tok
                )
            values.append(value)
        return np.array(values, dtype=np.int64 if et.name != "uint64" else np.uint64).astype(et.numpy)

    def floats(self, items: list, dtype: np.dtype) -> np.ndarray:
        wide = np.empty(len(items), dtype=np.float64)
        patches: list[tuple[int, int, _Tok]] = []
        for i, tok in enumerate(items):
            if isinstance(tok, _Bits):  # nan(0x...): exact bits
                patches.append((i, int(tok.bits.text, 16), tok.bits))
                wide[i] = np.nan
            elif isinstance(tok, _Tok) and tok.kind == "number" and "0x" not in tok.text:
                wide[i] = float(tok.text)
            else:
                self.bad_element(tok, "a number, inf or nan")
        with np.errstate(over="ignore", invalid="ignore"):
            array = wide.astype(dtype)
        overflow = ~np.isfinite(array.astype(np.float64)) & np.isfinite(wide)
        if overflow.any():
            tok = items[int(np.argmax(overflow))]
            raise self.error(f"{tok.text} is out of range for {SHORT_NAMES.get(_name_of(dtype), dtype)}", tok)
        if patches:
            bits = _uint_view(array)
            for i, value, tok in patches:
                if value > np.iinfo(bits.dtype).max:
                    raise self.error(f"{tok.text} has more bits than an element", tok)
                bits[i] = value
                with np.errstate(invalid="ignore"):
                    is_nan = np.isnan(array[i : i + 1].astype(np.float64))[0]
                if not is_nan:
                    raise self.error(f"{tok.text} is not the bit pattern of a NaN", tok)
        return array


class _Bits:
    """A ``nan(0x...)`` constant element: the NaN's exact bit pattern."""

    __slots__ = ("tok", "bits")

    def __init__(self, tok: _Tok, bits: _Tok):
        self.tok, self.bits = tok, bits


def _is_region(schema: OpSchema, name: str) -> bool:
    spec = schema.attribute(name)
    return spec is not None and spec.type == "region"


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _name_of(dtype: np.dtype) -> str:
    for name, et in ELEMENT_TYPES.items():
        if et.numpy is not None and et.numpy == dtype:
            return name
    return str(dtype)


def describe(tok: _Tok) -> str:
    """How an error message names a token."""
    if tok.kind == "eof":
        return "the end of the file"
    text = tok.text if len(tok.text) <= 40 else tok.text[:37] + "..."
    return f"'{text}'"
