"""OpenVINO IR (``model.xml`` + ``model.bin``) <-> graph core.

The mapping is fixed by ``docs/openvino-dialect.md``: Parameter layers become
graph inputs, Const layers initializers, Result layers graph outputs, every
other layer a :class:`~opconv.ir.Node` of domain ``opset1``.  The reader takes
IR v10 and the IR v11 files current OpenVINO writes, as long as every layer is
an opset1 operation; the writer produces IR v10 that old runtimes read.

Reading is hostile-input safe: the XML parser resolves no entities, loads no
DTD, reaches no network and refuses documents that declare a DOCTYPE; every
Const's ``offset``/``size`` is checked against the ``.bin`` and its declared
shape before anything is mapped.  Weights are memory-mapped lazily, so loading
a model reads none of them.

A layer with a ``<body>`` (TensorIterator) becomes a node whose ``body``
attribute is the body as a graph (body Parameters its inputs, Results its
outputs, in document order); the ``<port_map>`` and ``<back_edges>`` go into
``body.meta["port_map"]`` with ports and layers turned into positions (the
format is in :mod:`opconv.dialects.openvino.ops.tensor_iterator`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
from lxml import etree

from ... import budget
from ...atomic import OutputFiles, reserve
from ...attributes import format_text, parse_text, text_types
from ...errors import GraphError, ModelReadError, ModelWriteError
from ...ir import Attr, Graph, Model, Node, Tensor, Value
from ...schemas import OpSchema, dialect_schemas
from ...types import TensorType, element_type
from .. import read_model_file, read_slice

OPSET = "opset1"
#: IR versions the reader accepts (v11 only when its layers are all opset1)
READ_VERSIONS = (10, 11)
WRITE_VERSION = 10

# OpenVINO element-type names (``<data element_type=...>``) <-> canonical names (opconv/types.py).
ELEMENT_TYPES = {
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "bf16": "bfloat16",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "boolean": "bool",
}
_ELEMENT_NAMES = {v: k for k, v in ELEMENT_TYPES.items()}

# Port ``precision`` spellings <-> canonical names.  "BOOLEAN" appears in some older IRs.
PRECISIONS = {
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
    "BF16": "bfloat16",
    "I8": "int8",
    "I16": "int16",
    "I32": "int32",
    "I64": "int64",
    "U8": "uint8",
    "U16": "uint16",
    "U32": "uint32",
    "U64": "uint64",
    "BOOL": "bool",
    "BOOLEAN": "bool",
}
_PRECISION_NAMES = {v: k for k, v in PRECISIONS.items() if k != "BOOLEAN"}

#: layer types as OpenVINO writes them -> schema names (the specification's spellings)
TYPE_ALIASES = {"Const": "Constant", "Relu": "ReLU", "PRelu": "PReLU", "Softmax": "SoftMax"}
#: schema names -> the spelling the OpenVINO runtime reads back as opset1 (checked by the tests)
WRITE_SPELLINGS = {"Constant": "Const"}
#: opset1 operations the runtime registers (unchanged) in its opset2, and so writes with version="opset2"
OPSET1_OPS_WRITTEN_AS_OPSET2 = frozenset({"ROIPooling", "ReorgYolo"})

#: ops the reader does not map yet, with the reason given to the user
UNSUPPORTED_OPS: dict[str, str] = {}
#: the slicing fields of a ``<port_map>`` entry, all integers
PORT_MAP_SLICING = ("axis", "start", "end", "stride", "part_size")

_PARSER_OPTIONS = dict(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
_WRITE_CHUNK = 1 << 24  # bytes per write when streaming a tensor into the .bin
_FILL_CHUNK = 1 << 20  # bytes per write of a constant that repeats one value


# ---------------------------------------------------------------------------
# attribute spellings in <data>, by schema attribute type (opconv/attributes.py types the values)
# ---------------------------------------------------------------------------


def _split(text: str) -> list[str]:
    """Items of an IR comma list ("1, 1" or "1,1"); the empty string is the empty list."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"{text!r} is not a boolean")


def _parse_dim(text: str) -> int | None:
    # v11 writes dynamic dims as "?", "-1" or an interval "1..10"; the graph core calls them unknown.
    if text in ("?", "-1") or ".." in text:
        return None
    value = int(text)
    if value < 0:
        raise ValueError(f"negative dimension {value}")
    return value


def _parse_shape(text: str) -> list[int | None]:
    return [_parse_dim(d) for d in _split(text)]


def _parse_element_type(text: str) -> str:
    try:
        return ELEMENT_TYPES[text.strip()]
    except KeyError:
        raise ValueError(f"unsupported element type {text!r}") from None


def _format_element_type(name: str) -> str:
    try:
        return _ELEMENT_NAMES[name]
    except KeyError:
        raise ValueError(f"element type {name} has no IR v10 spelling") from None


def _format_dims(dims: Iterable) -> str:
    return ",".join(str(d) if isinstance(d, int) else "-1" for d in dims)


def _format_bool(value: Any) -> str:
    return "true" if value else "false"


#: how ``<data>`` spells one value of each schema type; a list type (``ints``) joins its items' spellings with commas
SPELLINGS: dict[str, Callable[[Any], str]] = {
    "int": str,
    "float": repr,
    "bool": _format_bool,
    "string": str,
    "shape": _format_dims,
    "element_type": _format_element_type,
}
#: how ``<data>`` text is read back, per schema type (list types: their items', split at commas)
PARSERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bool": _parse_bool,
    "string": str,
    "shape": _parse_shape,
    "element_type": _parse_element_type,
}
#: the attribute types ``<data>`` can hold
TEXT_TYPES = text_types(SPELLINGS)


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def load(path: str | os.PathLike) -> Model:
    """Load an IR ``.xml`` and the ``.bin`` beside it (same stem) into the graph core."""
    where = os.fspath(path)
    root = _parse_xml(read_model_file(where), where)
    return _Reader(where, os.path.splitext(where)[0] + ".bin").model(root)


def _parse_xml(data: bytes, where: str) -> etree._Element:
    """Parse untrusted XML: no entities, no DTD, no network, no DOCTYPE at all."""
    # IR files never declare a DOCTYPE; refusing one up front rules out entity-expansion and
    # external-entity tricks whatever the parser would do with them.
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise ModelReadError(
            "the XML declares a DOCTYPE or entities; IR files have none and opconv refuses them", where=where
        )
    parser = etree.XMLParser(**_PARSER_OPTIONS)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        raise ModelReadError(f"malformed XML: {e}", where=where) from None
    if root is None:
        raise ModelReadError("empty XML document", where=where)
    if root.getroottree().docinfo.doctype:  # e.g. a UTF-16 file the byte scan above cannot see into
        raise ModelReadError("the XML declares a DOCTYPE; IR files have none and opconv refuses it", where=where)
    return root


# Small records here are NamedTuples or plain classes: defining a dataclass costs about a millisecond of every
# fresh process that imports this module.
class _Port(NamedTuple):
    id: int
    precision: str | None
    dims: list[str] | None  # None when the port's rank is unknown
    names: list[str]


class _Layer(NamedTuple):
    id: int
    name: str
    type: str
    version: str
    data: dict[str, str]
    inputs: list[_Port]
    outputs: list[_Port]
    element: etree._Element | None = None  # the <layer>, for the <body> of ops that take one

    @property
    def label(self) -> str:
        return f"layer {self.id} {self.name!r}"


class _Reader:
    def __init__(self, where: str, bin_path: str):
        self.where = where
        self.bin_path = bin_path
        self.bin_size: int | None = None
        self.schemas = dialect_schemas("openvino")
        self.taken: set[str] = set()

    def error(self, message: str) -> ModelReadError:
        return ModelReadError(message, where=self.where)

    # -- structure ----------------------------------------------------------
    def model(self, root: etree._Element) -> Model:
        if root.tag != "net":
            raise self.error(f"not an OpenVINO IR: the root element is <{root.tag}>, expected <net>")
        version = root.get("version", "")
        if not version.isdigit() or int(version) not in READ_VERSIONS:
            raise self.error(
                f"IR version {version or '(none)'} is not supported; opconv reads versions "
                f"{', '.join(map(str, READ_VERSIONS))}"
            )
        layers_el = root.find("layers")
        if layers_el is None:
            raise self.error("the IR has no <layers>")
        layers = self.layers(layers_el)
        edges = self.edges(root.find("edges"), layers)
        graph = self.graph(root.get("name", ""), layers, edges)
        meta: dict[str, Any] = {"ir_version": int(version)}
        rt_info = root.find("rt_info")
        if rt_info is not None:
            meta["rt_info"] = etree.tostring(rt_info, encoding="unicode")
        return Model(graph=graph, dialect="openvino", opsets={OPSET: 1}, meta=meta, path=self.where)

    def layers(self, layers_el: etree._Element) -> dict[int, _Layer]:
        layers: dict[int, _Layer] = {}
        for el in layers_el.iterchildren("layer"):
            layer = self.layer(el)
            if layer.id in layers:
                raise self.error(f"{layer.label}: duplicate layer id {layer.id}")
            layers[layer.id] = layer
        return layers

    def layer(self, el: etree._Element) -> _Layer:
        lid = self.integer(el.get("id"), f"a layer (line {el.sourceline}) has a missing or bad id")
        name = el.get("name", "")
        label = f"layer {lid} {name!r}"
        kind = el.get("type")
        if not kind:
            raise self.error(f"{label}: no type")
        data_el = el.find("data")
        data = dict(data_el.attrib) if data_el is not None else {}
        inputs = self.ports(el.find("input"), label)
        outputs = self.ports(el.find("output"), label)
        ids = [p.id for p in inputs + outputs]
        if len(set(ids)) != len(ids):
            raise self.error(f"{label}: two ports share an id")
        return _Layer(lid, name, kind, el.get("version", ""), data, inputs, outputs, el)

    def ports(self, el: etree._Element | None, label: str) -> list[_Port]:
        if el is None:
            return []
        ports = []
        for p in el.iterchildren("port"):
            pid = self.integer(p.get("id"), f"{label}: a port has a missing or bad id")
            dims = [(d.text or "").strip() for d in p.iterchildren("dim")]
            names = _split_names(p.get("names", ""))
            ports.append(_Port(pid, p.get("precision"), dims, names))
        return ports

    def edges(self, el: etree._Element | None, layers: dict[int, _Layer]) -> dict[tuple[int, int], tuple[int, int]]:
        """{(to layer, to port): (from layer, from port)}, every end checked to exist."""
        edges: dict[tuple[int, int], tuple[int, int]] = {}
        if el is None:
            return edges
        for e in el.iterchildren("edge"):
            ends = [
                self.integer(e.get(k), f"edge on line {e.sourceline}: missing or bad {k}")
                for k in ("from-layer", "from-port", "to-layer", "to-port")
            ]
            src, dst = (ends[0], ends[1]), (ends[2], ends[3])
            self.check_end(layers, src, "output", e)
            self.check_end(layers, dst, "input", e)
            if dst in edges:
                raise self.error(f"{layers[dst[0]].label}: input port {dst[1]} has two incoming edges")
            edges[dst] = src
        return edges

    def check_end(self, layers: dict[int, _Layer], end: tuple[int, int], side: str, e) -> None:
        layer = layers.get(end[0])
        if layer is None:
            raise self.error(f"edge on line {e.sourceline} refers to layer {end[0]}, which does not exist")
        ports = layer.outputs if side == "output" else layer.inputs
        if all(p.id != end[1] for p in ports):
            raise self.error(f"edge on line {e.sourceline}: {layer.label} has no {side} port {end[1]}")

    def integer(self, text: str | None, message: str) -> int:
        try:
            return int(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise self.error(message) from None

    # -- graph ----------------------------------------------------------------
    def graph(self, name: str, layers: dict[int, _Layer], edges: dict) -> Graph:
        g = Graph(name)
        values: dict[tuple[int, int], Value] = {}
        wiring: list[tuple[Node, _Layer]] = []
        results: list[_Layer] = []
        for layer in layers.values():
            op = self.op_name(layer)
            if op == "Parameter":
                values[(layer.id, self.single_output(layer).id)] = self.parameter(g, layer)
            elif op == "Constant":
                values[(layer.id, self.single_output(layer).id)] = self.constant(g, layer)
            elif op == "Result":
                results.append(layer)
            else:
                node = self.node(layer, op)
                if any(p.type == "graph" for p in self.schema(op).attributes):
                    node.attrs["body"] = Attr("body", "graph", self.body(layer, g))
                g.add_node(node)
                for port, value in zip(layer.outputs, node.outputs):
                    if value is not None:  # self.node makes every output
                        values[(layer.id, port.id)] = value
                wiring.append((node, layer))
        for node, layer in wiring:
            for port in sorted(layer.inputs, key=lambda p: p.id):
                node.append_input(self.input_value(values, layer, port, edges))
        g.meta["result_names"] = []
        for layer in results:
            if len(layer.inputs) != 1:
                raise self.error(f"{layer.label}: a Result has exactly one input port, found {len(layer.inputs)}")
            value = self.input_value(values, layer, layer.inputs[0], edges)
            value.meta.setdefault("result_name", layer.name)
            g.meta["result_names"].append(layer.name)
            g.outputs.append(value)
        try:
            g.topological_sort()
        except GraphError as e:
            raise self.error(e.message) from None
        return g

    def body(self, layer: _Layer, outer: Graph) -> Graph:
        """A layer's ``<body>`` as a graph, its ``<port_map>``/``<back_edges>`` as ``meta["port_map"]``."""
        el = layer.element
        body_el = el.find("body") if el is not None else None
        if el is None or body_el is None or body_el.find("layers") is None:
            raise self.error(f"{layer.label}: a {layer.type} needs a <body> with <layers>")
        layers = self.layers(body_el.find("layers"))
        body = self.graph(f"{layer.name or layer.id}/body", layers, self.edges(body_el.find("edges"), layers))
        body.parent = outer
        kinds = {lid: TYPE_ALIASES.get(b.type, b.type) for lid, b in layers.items()}
        body_inputs = {lid: k for k, lid in enumerate(i for i, t in kinds.items() if t == "Parameter")}
        body_outputs = {lid: k for k, lid in enumerate(i for i, t in kinds.items() if t == "Result")}
        input_ports = {p.id: k for k, p in enumerate(sorted(layer.inputs, key=lambda p: p.id))}
        output_ports = {p.id: k for k, p in enumerate(layer.outputs)}
        port_map_el = el.find("port_map")
        entries: dict[str, list[dict[str, Any]]] = {"inputs": [], "outputs": []}
        for kind, ports, internal in (("input", input_ports, body_inputs), ("output", output_ports, body_outputs)):
            for entry in port_map_el.iterchildren(kind) if port_map_el is not None else ():
                where = f"{layer.label}: port_map {kind} on line {entry.sourceline}"
                external = self.integer(entry.get("external_port_id"), f"{where}: missing or bad external_port_id")
                inner = self.integer(entry.get("internal_layer_id"), f"{where}: missing or bad internal_layer_id")
                if external not in ports:
                    raise self.error(f"{where}: the layer has no {kind} port {external}")
                if inner not in internal:
                    raise self.error(
                        f"{where}: body layer {inner} is not a {'Parameter' if kind == 'input' else 'Result'}"
                    )
                rule = {"external": ports[external], "internal": internal[inner]}
                for key in PORT_MAP_SLICING:
                    if entry.get(key) is not None:
                        rule[key] = self.integer(entry.get(key), f"{where}: {key} is not an integer")
                entries[kind + "s"].append(rule)
        back_edges = []
        back_el = el.find("back_edges")
        for edge in back_el.iterchildren("edge") if back_el is not None else ():
            where = f"{layer.label}: back edge on line {edge.sourceline}"
            frm = self.integer(edge.get("from-layer"), f"{where}: missing or bad from-layer")
            to = self.integer(edge.get("to-layer"), f"{where}: missing or bad to-layer")
            if frm not in body_outputs or to not in body_inputs:
                raise self.error(f"{where}: must lead from a body Result to a body Parameter")
            back_edges.append({"from": body_outputs[frm], "to": body_inputs[to]})
        body.meta["port_map"] = {**entries, "back_edges": back_edges}
        return body

    def input_value(self, values: dict, layer: _Layer, port: _Port, edges: dict) -> Value:
        """The value an edge brings to ``port`` of ``layer``; its source must be a port that produces one."""
        source = self.source(layer, port, edges)
        value = values.get(source)
        if value is None:
            raise self.error(
                f"{layer.label}: input port {port.id} is fed by port {source[1]} of layer "
                f"{source[0]}, which produces no value (a Result, or a port it does not have)"
            )
        return value

    def source(self, layer: _Layer, port: _Port, edges: dict) -> tuple[int, int]:
        try:
            return edges[(layer.id, port.id)]
        except KeyError:
            raise self.error(f"{layer.label}: input port {port.id} has no incoming edge") from None

    def op_name(self, layer: _Layer) -> str:
        """The schema name of a layer's type, after checking it is an opset1 operation opconv maps."""
        op = TYPE_ALIASES.get(layer.type, layer.type)
        if layer.version != OPSET and not (layer.version == "opset2" and op in OPSET1_OPS_WRITTEN_AS_OPSET2):
            raise self.error(f"{layer.label}: {layer.type} version {layer.version or '(none)'} is not {OPSET}")
        if self.schemas.find(op, 1, OPSET) is None:
            raise self.error(f"{layer.label}: {layer.type} is not an {OPSET} operation")
        if op in UNSUPPORTED_OPS:
            raise self.error(f"{layer.label}: {UNSUPPORTED_OPS[op]}")
        return op

    def schema(self, op: str) -> OpSchema:
        """The schema of ``op`` (an operation :meth:`op_name` accepted)."""
        schema = self.schemas.find(op, 1, OPSET)
        if schema is None:
            raise self.error(f"{op} is not an {OPSET} operation")
        return schema

    def single_output(self, layer: _Layer) -> _Port:
        if len(layer.outputs) != 1:
            raise self.error(f"{layer.label}: a {layer.type} has exactly one output port, found {len(layer.outputs)}")
        return layer.outputs[0]

    def unique(self, hint: str) -> str:
        """``hint``, or ``hint_N`` when another value already took it (IR names need not be unique)."""
        name, n = hint, 0
        while name in self.taken:
            n += 1
            name = f"{hint}_{n}"
        self.taken.add(name)
        return name

    def attrs(self, layer: _Layer, schema: OpSchema) -> dict[str, Attr]:
        attrs = {}
        for key, raw in layer.data.items():
            spec = schema.attribute(key)
            kind = spec.type if spec is not None else "string"  # unknown: kept verbatim, `check` reports it
            if kind not in TEXT_TYPES:
                raise self.error(f"{layer.label}: attribute {key!r} of type {kind} cannot be read from <data>")
            try:
                attrs[key] = Attr(key, kind, parse_text(kind, raw, PARSERS, _split))
            except ValueError as e:
                raise self.error(f"{layer.label}: attribute {key}={raw!r} is not a valid {kind} ({e})") from None
        return attrs

    def port_type(self, layer: _Layer, port: _Port) -> TensorType | None:
        if port.precision is None:
            return None
        dtype = PRECISIONS.get(port.precision)
        if dtype is None:
            raise self.error(f"{layer.label}: port {port.id} has unsupported precision {port.precision!r}")
        try:
            shape = tuple(_parse_dim(d) for d in port.dims) if port.dims is not None else None
        except ValueError as e:
            raise self.error(f"{layer.label}: port {port.id} has a bad dimension ({e})") from None
        return TensorType(dtype, shape)

    # -- layer kinds -------------------------------------------------------------
    def parameter(self, g: Graph, layer: _Layer) -> Value:
        attrs = self.attrs(layer, self.schema("Parameter"))
        port = self.single_output(layer)
        port_type = self.port_type(layer, port)
        if "element_type" in attrs and "shape" in attrs:
            shape = attrs["shape"].value
            rank_unknown = layer.data.get("shape", "").strip() == "..."
            vtype = TensorType(attrs["element_type"].value, None if rank_unknown else tuple(shape))
        elif port_type is not None:
            vtype = port_type
        else:
            raise self.error(f"{layer.label}: a Parameter needs element_type and shape")
        value = g.add_input(self.unique(layer.name or f"parameter_{layer.id}"), vtype)
        value.meta["ir_layer_id"] = layer.id
        if port.names:
            value.meta["tensor_names"] = port.names
        return value

    def constant(self, g: Graph, layer: _Layer) -> Value:
        attrs = self.attrs(layer, self.schema("Constant"))
        missing = [k for k in ("element_type", "shape", "offset", "size") if k not in attrs]
        if missing:
            raise self.error(f"{layer.label}: Const lacks {', '.join(missing)}")
        dtype, shape = attrs["element_type"].value, attrs["shape"].value
        offset, size = attrs["offset"].value, attrs["size"].value
        if any(d is None for d in shape):
            raise self.error(f"{layer.label}: Const has a dynamic shape {layer.data['shape']!r}")
        np_dtype = element_type(dtype).numpy
        if np_dtype is None:
            raise self.error(f"{layer.label}: a Const of {dtype} has no fixed-size binary form")
        expected = budget.elements(shape) * np_dtype.itemsize  # Python ints: no overflow
        if size != expected:
            raise self.error(
                f"{layer.label}: Const size {size} does not match {expected} bytes of "
                f"{_ELEMENT_NAMES[dtype]}{list(shape)}"
            )
        bin_size = self.weights_size(layer)
        if offset < 0 or offset + size > bin_size:
            raise self.error(
                f"{layer.label}: Const bytes {offset}..{offset + size} lie outside "
                f"{os.path.basename(self.bin_path)} ({bin_size} bytes)"
            )
        where = _BinSlice(self.bin_path, offset, size)
        tensor = Tensor(dtype, shape, loader=lambda: _map(where, dtype, shape), origin=where, nbytes=size)
        value = g.add_initializer(self.unique(layer.name or f"const_{layer.id}"), tensor)
        value.meta["ir_layer_id"] = layer.id
        return value

    def weights_size(self, layer: _Layer) -> int:
        if self.bin_size is None:
            try:
                self.bin_size = os.path.getsize(self.bin_path)
            except OSError:
                raise self.error(
                    f"{layer.label}: Const needs weights, but {os.path.basename(self.bin_path)} cannot be read"
                ) from None
        return self.bin_size

    def node(self, layer: _Layer, op: str) -> Node:
        schema = self.schema(op)
        single = len(layer.outputs) == 1
        outputs = []
        for port in layer.outputs:
            hint = port.names[0] if port.names else (layer.name if single else f"{layer.name}.{port.id}")
            outputs.append(Value(self.unique(hint), self.port_type(layer, port)))
        node = Node(op, (), outputs, domain=OPSET, version=1, name=layer.name, attrs=self.attrs(layer, schema))
        node.meta["ir_layer_id"] = layer.id
        return node


def _join_names(names: Iterable[str]) -> str:
    """A port's ``names`` attribute: the tensor names, comma separated, a comma inside a name escaped."""
    return ",".join(n.replace(",", "\\,") for n in names)


def _split_names(text: str) -> list[str]:
    """Tensor names of a v11 port: comma separated, a literal comma escaped as ``\\,``."""
    names, current, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i + 1])
            i += 2
            continue
        if ch == ",":
            names.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    names.append("".join(current).strip())
    return [n for n in names if n]


class _BinSlice(NamedTuple):
    """Where a Const's bytes are: ``path`` of the .bin, ``offset``, ``length`` (checked at load)."""

    path: str
    offset: int
    length: int


def _map(where: _BinSlice, dtype: str, shape) -> np.ndarray:
    np_dtype = element_type(dtype).numpy
    assert np_dtype is not None  # checked when the Const was read
    if where.length == 0:  # np.memmap cannot map zero bytes
        return np.zeros(shape, np_dtype)
    return read_slice(where.path, np_dtype, where.offset, tuple(shape))


def _file_slice(tensor: Tensor) -> tuple[str, int, int] | None:
    """(path, offset, length) when the tensor's little-endian bytes sit unchanged in a file, else None.

    Both an IR ``.bin`` slice and an ONNX external-data slice qualify (any
    origin with ``path``/``offset``/``length`` covering exactly the tensor).
    """
    origin = tensor.origin
    path, start, length = (getattr(origin, k, None) for k in ("path", "offset", "length"))
    if not isinstance(path, str) or not isinstance(start, int) or length != tensor.nbytes or sys.byteorder != "little":
        return None
    et = element_type(tensor.dtype)
    if et.numpy is None or (et.bits or 0) % 8:
        return None
    return path, start, length


def _chunks(array: np.ndarray, per_chunk: int, fills: dict[tuple, np.ndarray]):
    """The array's bytes in C order (buffers), ``per_chunk`` elements at a time, never copying it whole.

    ``fills`` keeps the chunk made for each value found broadcast, for the next array of that value.
    """
    if array.size and not any(array.strides):
        # One value broadcast over the shape (a folded ConstantOfShape): the same chunk again and again.  A
        # small chunk, made once per value, stays in the CPU's cache while it is copied into the page cache.
        value = array[(0,) * array.ndim]
        key = (array.dtype.str, value.tobytes())
        if key not in fills:
            fills[key] = np.full(max(1, _FILL_CHUNK // array.itemsize), value, array.dtype).view(np.uint8)
        full = fills[key][: array.nbytes]
        whole, rest = divmod(array.size, full.size // array.itemsize)
        for _ in range(whole):
            yield full.data
        if rest:
            yield full[: rest * array.itemsize].data
        return
    if array.flags.c_contiguous:
        flat = array.reshape(-1)
        for start in range(0, flat.size, per_chunk):
            yield flat[start : start + per_chunk].view(np.uint8).data  # written as is, no copy
        return
    for chunk in np.nditer(array, flags=["external_loop", "buffered", "zerosize_ok"], buffersize=per_chunk, order="C"):
        yield np.asarray(chunk).tobytes()


# ---------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------


def save(model: Model, path: str | os.PathLike) -> None:
    """Write ``model`` as IR v10: ``path`` (.xml) and the .bin beside it, atomically.

    The graph's nodes are put in topological order first (a stable sort: an
    ordered graph keeps its order).
    """
    path = os.fspath(path)
    if model.dialect != "openvino":
        raise ModelWriteError(f"a {model.dialect} model cannot be saved as OpenVINO IR; convert it first", where=path)
    bin_path = os.path.splitext(path)[0] + ".bin"
    with OutputFiles(path) as files:
        with files.open(bin_path) as weights:
            xml = _xml(model, path, weights)
        with files.open(path) as f:
            f.write(xml)


def to_bytes(model: Model) -> tuple[bytes, bytes]:
    """What :func:`save` writes, in memory: the IR v10 ``.xml`` text and its ``.bin`` weights.

    ``openvino.Core().read_model(xml, weights)`` reads the pair without a file.
    """
    import io

    if model.dialect != "openvino":
        raise ModelWriteError(f"a {model.dialect} model is not OpenVINO IR; convert it first", where=model.path)
    weights = io.BytesIO()
    xml = _xml(model, model.path or "<in-memory model>", weights)
    return xml, weights.getvalue()


def _xml(model: Model, where: str, weights) -> bytes:
    """The IR's XML text, its constants written to ``weights`` (a binary stream) on the way."""
    try:
        net = _Writer(model, where, weights).net()
    except ValueError as e:  # lxml refuses NUL, control characters and bytes that are not UTF-8
        if "XML compatible" not in str(e):
            raise
        raise ModelWriteError(
            f"{_not_xml_text(model)} holds characters XML cannot hold "
            "(NUL, control characters or bytes that are not UTF-8)",
            where=where,
        ) from None
    return etree.tostring(net, xml_declaration=True, encoding="utf-8", pretty_print=True)


def _not_xml_text(model: Model) -> str:
    """What in ``model`` lxml refused: the first name or string attribute that is not XML text."""
    import re

    bad = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

    def refused(text) -> bool:
        return isinstance(text, bytes) or (isinstance(text, str) and bad.search(text) is not None)

    if refused(model.graph.name):
        return f"the graph name {model.graph.name!r}"
    for node in model.graph.walk():
        if refused(node.name) or refused(node.op):
            return f"node {node.name or node.op!r}'s name"
        for a in node.attrs.values():
            values = a.value if isinstance(a.value, list) else [a.value]
            if any(refused(v) for v in values):
                return f"attribute {a.name!r} of node {node.label}"
        for v in node.outputs:
            if v is not None and refused(v.name):
                return f"value name {v.name!r}"
    for v in model.graph.inputs:
        if refused(v.name):
            return f"input name {v.name!r}"
    return "a name or string attribute"


class _Writer:
    def __init__(self, model: Model, where: str, weights):
        self.model = model
        self.where = where
        self.weights = weights
        self.offset = 0
        self.schemas = dialect_schemas("openvino")
        self.layers = etree.Element("layers")
        self.edges = etree.Element("edges")
        self.next_id = 0
        self.sources: dict[int, tuple[int, int]] = {}  # id(value) -> (layer id, port id)
        self.result_ids: list[int] = []  # layer ids of the Results, in graph output order
        self.written: dict[tuple, tuple[int, int]] = {}  # what a Const holds -> (offset, size) in the .bin
        self.fills: dict[tuple, np.ndarray] = {}  # (dtype, value) -> a chunk of that value repeated
        self.ports: dict[tuple, etree._Element] = {}  # (id, precision, dims) -> a <port> to copy

    def error(self, message: str) -> ModelWriteError:
        return ModelWriteError(message, where=self.where)

    def net(self) -> etree._Element:
        g = self.model.graph
        self.write_graph(g)
        net = etree.Element("net", name=g.name or "model", version=str(WRITE_VERSION))
        net.append(self.layers)
        net.append(self.edges)
        return net

    def write_graph(self, g: Graph) -> None:
        """Every layer and edge of ``g`` into ``self.layers`` / ``self.edges``."""
        try:
            g.topological_sort()
        except GraphError as e:
            raise self.error(e.message) from None
        self.outputs = {id(v) for v in g.outputs}
        for value in g.inputs:
            self.parameter(value)
        for value in self.used_constants(g):
            self.constant(value)
        for node in g.nodes:
            self.node(node)
        for value, name in zip(g.outputs, self.result_names(g)):
            self.result_ids.append(self.result(value, name))

    def body_graph(self, node: Node, schema: OpSchema, attr: Attr) -> Graph:
        """The graph of a graph attribute the schema declares (an IR ``<body>``)."""
        spec = schema.attribute(attr.name)
        if spec is None or spec.type != "graph" or not isinstance(attr.value, Graph):
            raise self.error(f"{node.label}: attribute {attr.name!r} of type graph cannot be written to IR")
        return attr.value

    def body(self, layer: etree._Element, node: Node, body: Graph, first_output_port: int) -> etree._Element:
        """A ``<body>`` (own layer ids, the same .bin) plus the ``<port_map>``/``<back_edges>`` it needs."""
        port_map = body.meta.get("port_map")
        if not isinstance(port_map, dict):
            raise self.error(f"{node.label}: its body graph has no port map (body.meta['port_map'])")
        inner = _Writer(self.model, self.where, self.weights)
        inner.offset = self.offset
        inner.written, inner.fills = self.written, self.fills
        inner.write_graph(body)
        self.offset = inner.offset
        parameter_ids = [inner.sources[id(v)][0] for v in body.inputs]
        port_map_el = etree.SubElement(layer, "port_map")
        try:
            for kind, first_port, internal_ids in (
                ("input", 0, parameter_ids),
                ("output", first_output_port, inner.result_ids),
            ):
                for rule in port_map[kind + "s"]:
                    attrib = {
                        "external_port_id": str(first_port + rule["external"]),
                        "internal_layer_id": str(internal_ids[rule["internal"]]),
                    }
                    attrib.update((key, str(int(rule[key]))) for key in PORT_MAP_SLICING if rule.get(key) is not None)
                    etree.SubElement(port_map_el, kind, attrib)
            back_el = etree.SubElement(layer, "back_edges")
            for edge in port_map.get("back_edges", ()):
                etree.SubElement(
                    back_el,
                    "edge",
                    {
                        "from-layer": str(inner.result_ids[edge["from"]]),
                        "from-port": "0",
                        "to-layer": str(parameter_ids[edge["to"]]),
                        "to-port": "0",
                    },
                )
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise self.error(f"{node.label}: malformed port map in its body's meta ({type(e).__name__}: {e})") from None
        body_el = etree.Element("body")
        body_el.append(inner.layers)
        body_el.append(inner.edges)
        return body_el

    # -- layers -------------------------------------------------------------
    def layer(self, name: str, kind: str, data: dict[str, str] | None = None) -> tuple[int, etree._Element]:
        lid = self.next_id
        self.next_id += 1
        el = etree.SubElement(self.layers, "layer", id=str(lid), name=name, type=kind, version=OPSET)
        if data:
            etree.SubElement(el, "data", data)
        return lid, el

    def port(self, parent: etree._Element, pid: int, value: Value, owner: str, named: bool = False) -> None:
        vtype = value.type
        if not isinstance(vtype, TensorType) or vtype.dtype is None or vtype.shape is None:
            raise self.error(
                f"value {value.name!r} ({owner}) has no known element type and rank; IR v10 needs both on every port"
            )
        precision = _PRECISION_NAMES.get(vtype.dtype)
        if precision is None:
            raise self.error(f"value {value.name!r} ({owner}) is {vtype.dtype}, which IR v10 cannot hold")
        # Ports repeat (the same id, type and dims on many layers): copying a finished one is cheaper than
        # building it element by element.
        key = (pid, precision, tuple(vtype.shape))
        port = self.ports.get(key)
        if port is None:
            port = self.ports[key] = etree.Element("port", id=str(pid), precision=precision)
            for d in vtype.shape:
                etree.SubElement(port, "dim").text = str(d) if isinstance(d, int) else "-1"
        port = port.__copy__()
        if named:  # the tensor name OpenVINO gives the value (``names``, read from IR v10 on as well)
            port.set("names", _join_names([value.name]))
        parent.append(port)

    def connect(self, value: Value, layer_id: int, port_id: int, owner: str) -> None:
        source = self.sources.get(id(value))
        if source is None:
            raise self.error(f"{owner} reads {value.name!r}, which no layer written before it produces")
        etree.SubElement(
            self.edges,
            "edge",
            {
                "from-layer": str(source[0]),
                "from-port": str(source[1]),
                "to-layer": str(layer_id),
                "to-port": str(port_id),
            },
        )

    def parameter(self, value: Value) -> None:
        vtype = value.type
        if not isinstance(vtype, TensorType) or vtype.shape is None or vtype.dtype not in _ELEMENT_NAMES:
            raise self.error(f"graph input {value.name!r} needs a known element type and rank, got {vtype}")
        data = {"element_type": _ELEMENT_NAMES[vtype.dtype], "shape": _format_dims(vtype.shape)}
        lid, el = self.layer(value.name, "Parameter", data)
        self.port(etree.SubElement(el, "output"), 0, value, "graph input", named=True)
        self.sources[id(value)] = (lid, 0)

    def used_constants(self, g: Graph) -> list[Value]:
        """Initializers read by a node or a graph output (graph inputs with defaults are Parameters)."""
        used = {id(v) for n in g.nodes for v in n.inputs if v is not None}
        used.update(id(v) for v in g.outputs)
        inputs = {id(v) for v in g.inputs}
        return [v for v in g.initializers.values() if id(v) in used and id(v) not in inputs]

    def constant(self, value: Value) -> None:
        tensor = value.const
        if tensor is None:
            raise self.error(f"constant {value.name!r} holds no data")
        if tensor.dtype not in _ELEMENT_NAMES:
            raise self.error(f"constant {value.name!r} is {tensor.dtype}, which IR v10 cannot hold")
        offset, size = self.write_weights(tensor, value.name)
        data = {
            "element_type": _ELEMENT_NAMES[tensor.dtype],
            "shape": _format_dims(tensor.shape),
            "offset": str(offset),
            "size": str(size),
        }
        lid, el = self.layer(value.name, WRITE_SPELLINGS["Constant"], data)
        # The port describes the stored data, whatever type the value claims.
        described = value if value.type == tensor.type else Value(value.name, tensor.type)
        self.port(etree.SubElement(el, "output"), 0, described, "constant")
        self.sources[id(value)] = (lid, 0)

    def write_weights(self, tensor: Tensor, name: str) -> tuple[int, int]:
        """Stream a tensor's bytes into the .bin in bounded chunks; (offset, size) of what was written.

        Bytes that sit unchanged in a file (an ONNX external-data slice, another
        IR's .bin) are copied file to file with plain reads, so a large model's
        weights never become resident in this process; other data is written
        from its array in chunks, without a whole-tensor copy.  Constants known
        to hold the same bytes without reading them (the same file slice, or one
        value broadcast over the same number of elements) share one copy in the
        .bin, as OpenVINO's own writer shares identical constants.
        """
        offset = self.offset
        budget.check_bytes(tensor.nbytes, f"constant {name!r} in the .bin", where=self.where)
        source = _file_slice(tensor)
        if source is not None:
            if source not in self.written:
                reserve(self.weights, offset, source[2])
                self.copy_file_slice(*source, name)
                self.written[source] = (offset, self.offset - offset)
            return self.written[source]
        array = np.asarray(tensor.numpy())
        np_dtype = element_type(tensor.dtype).numpy
        if array.dtype != np_dtype:
            raise self.error(f"constant {name!r} declares {tensor.dtype} but holds {array.dtype} data")
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        uniform = array.size and not any(array.strides)  # one value broadcast over the shape
        key = ("uniform", array.dtype.str, array[(0,) * array.ndim].tobytes(), array.nbytes) if uniform else None
        if key in self.written:
            return self.written[key]
        per_chunk = max(1, _WRITE_CHUNK // max(1, np_dtype.itemsize))
        reserve(self.weights, offset, array.nbytes)
        for chunk in _chunks(array, per_chunk, self.fills):
            self.weights.write(chunk)
            self.offset += len(chunk)
        tensor.release()  # a memory-mapped source is dropped again (it can be mapped anew)
        if key is not None:
            self.written[key] = (offset, self.offset - offset)
        return offset, self.offset - offset

    def copy_file_slice(self, path: str, start: int, length: int, name: str) -> None:
        with open(path, "rb") as source:
            source.seek(start)
            left = length
            while left:
                data = source.read(min(_WRITE_CHUNK, left))
                if not data:
                    raise self.error(f"the data of constant {name!r} in {path} ends early")
                self.weights.write(data)
                self.offset += len(data)
                left -= len(data)

    def node(self, node: Node) -> None:
        schema = self.schema(node)
        inputs = list(node.inputs)
        while inputs and inputs[-1] is None:  # omitted trailing optional inputs have no port
            inputs.pop()
        if any(v is None for v in inputs) or any(v is None for v in node.outputs):
            raise self.error(f"{node.label}: IR has no way to omit an input or output that is not the last")
        ins = [v for v in inputs if v is not None]
        outs = [v for v in node.outputs if v is not None]
        bodies = [self.body_graph(node, schema, a) for a in node.attrs.values() if a.type == "graph"]
        data = {name: self.encode(node, attr) for name, attr in node.attrs.items() if attr.type != "graph"}
        # Defaults are written out: readers differ on an absent attribute (OpenVINO reads a missing
        # DeformableConvolution group as 0, the specification says 1).
        for a in schema.attributes:
            if a.name not in data and a.default is not None and a.type != "graph":
                data[a.name] = self.encode(node, Attr(a.name, a.type, a.default))
        fallback = outs[0].name if outs else node.op
        lid, el = self.layer(node.name or fallback, WRITE_SPELLINGS.get(schema.name, schema.name), data)
        # A body comes after the ports; its port map and back edges before them, as OpenVINO writes them.
        body_els = [self.body(el, node, body, len(ins)) for body in bodies]
        if ins:
            ports = etree.SubElement(el, "input")
            for i, value in enumerate(ins):
                self.port(ports, i, value, f"input {i} of {node.label}")
        if outs:
            ports = etree.SubElement(el, "output")
            for j, value in enumerate(outs):
                self.port(ports, len(ins) + j, value, f"output {j} of {node.label}", id(value) in self.outputs)
                self.sources[id(value)] = (lid, len(ins) + j)
        el.extend(body_els)
        for i, value in enumerate(ins):
            self.connect(value, lid, i, node.label)

    def schema(self, node: Node) -> OpSchema:
        schema = None
        if node.domain in (OPSET, "") and node.version in (1, None):
            schema = self.schemas.find(TYPE_ALIASES.get(node.op, node.op), 1, OPSET)
        if schema is None:
            where = f"{node.domain}::{node.op}" if node.domain else node.op
            raise self.error(f"{node.label}: {where} (version {node.version}) is not an {OPSET} operation")
        if schema.name in ("Parameter", "Result", "Constant") or schema.name in UNSUPPORTED_OPS:
            raise self.error(
                f"{node.label}: {schema.name} nodes cannot be written; the graph's inputs, outputs "
                "and initializers become those layers"
            )
        return schema

    def encode(self, node: Node, attr: Attr) -> str:
        if attr.type not in TEXT_TYPES or attr.ref is not None:
            raise self.error(f"{node.label}: attribute {attr.name!r} of type {attr.type} cannot be written to IR")
        try:
            return format_text(attr.type, attr.value, SPELLINGS, ",".join)
        except (TypeError, ValueError) as e:
            raise self.error(f"{node.label}: attribute {attr.name!r} = {attr.value!r} ({e})") from None

    def result_names(self, g: Graph) -> list[str]:
        stored = g.meta.get("result_names")
        if isinstance(stored, list) and len(stored) == len(g.outputs):
            return stored
        return [v.meta.get("result_name") or f"{v.name}/sink_port_0" for v in g.outputs]

    def result(self, value: Value, name: str) -> int:
        lid, el = self.layer(name, "Result")
        self.port(etree.SubElement(el, "input"), 0, value, f"graph output {name!r}")
        self.connect(value, lid, 0, f"Result {name!r}")
        return lid
