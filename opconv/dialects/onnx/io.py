"""ONNX protobuf <-> graph core.

Loading keeps everything a ModelProto holds, so that ``save(load(m))`` is the
same model: doc strings, metadata, value_info types, functions, sparse
initializers, and (as opaque bytes) the rarely used fields opconv does not
interpret (training_info, quantization annotations, device configurations).

Constant data is not decoded at load time.  An embedded tensor keeps its
TensorProto as ``Tensor.origin`` and is written back unchanged; an external
tensor is memory-mapped from its data file when first read, and streamed
file-to-file on save.  External-data locations must stay inside the model's
folder: a location that is absolute, contains ``..`` past the folder, or
resolves (through links) outside it is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from ... import budget
from ...atomic import OutputFiles, reserve
from ...attributes import canonical
from ...errors import ModelReadError, ModelWriteError
from ...ir import Attr, Function, Graph, Model, Node, SparseTensor, Tensor, Value, quiet_collector
from ...types import (
    MapType,
    OptionalType,
    SequenceType,
    SparseTensorType,
    TensorType,
    ValueType,
    element_type,
    from_onnx_code,
)
from .. import read_model_file, read_slice
from .proto import messages as pb
from .proto import to_array

#: protobuf refuses messages of 2 GiB or more; stay clear of it
PROTOBUF_LIMIT = 2**31 - 2**20
#: tensors at least this large go to the data file when saving with external data
EXTERNAL_THRESHOLD = 1024
#: largest number of elements opconv accepts in one declared tensor shape (hostile input guard)
MAX_ELEMENTS = 2**40

_DEFAULT_DOMAINS = ("", "ai.onnx")


class ExternalData(NamedTuple):  # not a dataclass: defining one costs ~1 ms of a fresh process
    """Where an external tensor's bytes are: ``path`` (absolute), ``offset``, ``length``."""

    path: str
    offset: int
    length: int


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def load(source: str | os.PathLike | bytes | pb.ModelProto, *, base_dir: str | None = None) -> Model:
    """Load an ONNX model from a path, serialized bytes or a ModelProto."""
    where = None
    if isinstance(source, pb.ModelProto):
        proto = source
    else:
        if isinstance(source, bytes):
            data = source
        else:
            where = os.fspath(source)
            data = read_model_file(where)
            base_dir = base_dir or os.path.dirname(os.path.abspath(where))
        proto = pb.ModelProto()
        try:
            proto.ParseFromString(data)
        except (DecodeError, RuntimeError, ValueError) as e:
            raise ModelReadError(f"not a valid ONNX protobuf ({e})", where=where) from None
        if not proto.HasField("graph"):
            raise ModelReadError("not an ONNX model: the protobuf has no graph", where=where)
    reader = ProtoReader(base_dir, where)
    try:
        with quiet_collector():
            return reader.model(proto)
    except ModelReadError:
        raise
    except (ValueError, KeyError, TypeError, OverflowError) as e:
        raise ModelReadError(f"malformed ONNX model: {e}", where=where) from None


def keep_node_extras(node: Node, p: pb.NodeProto) -> None:
    """Keep the NodeProto fields opconv does not interpret in ``node.meta``, for the writer to put back."""
    if p.overload:
        node.meta["overload"] = p.overload
    if p.metadata_props:
        node.meta["metadata_props"] = {m.key: m.value for m in p.metadata_props}
    if p.device_configurations:
        node.meta["device_configurations"] = [d.SerializeToString() for d in p.device_configurations]


class ProtoReader:
    def __init__(self, base_dir: str | None, where: str | None):
        self.base_dir = base_dir
        self.where = where

    def error(self, message: str) -> ModelReadError:
        return ModelReadError(message, where=self.where)

    def not_utf8(self, what: str, *texts) -> ModelReadError:
        """Protobuf hands text that is not UTF-8 over as bytes, which every later step would trip on."""
        text = next(t for t in texts if type(t) is not str)
        return self.error(f"{what} is not UTF-8 text: {bytes(text[:40])!r}")

    def model(self, p: pb.ModelProto) -> Model:
        opsets = {}
        for imp in p.opset_import:
            opsets[imp.domain] = imp.version
        graph = self.graph(p.graph, opsets, parent=None, scope=None)
        functions = [self.function(f, opsets) for f in p.functions]
        meta: dict[str, Any] = {"ir_version": p.ir_version}
        if p.domain:
            meta["domain"] = p.domain
        if p.model_version:
            meta["model_version"] = p.model_version
        if p.training_info:
            meta["training_info"] = [t.SerializeToString() for t in p.training_info]
        if p.configuration:
            meta["configuration"] = [c.SerializeToString() for c in p.configuration]
        if any(v.const is not None and isinstance(v.const.origin, ExternalData) for v in graph.initializers.values()):
            meta["external_data"] = True
        texts = [
            p.producer_name,
            p.producer_version,
            p.doc_string,
            p.domain,
            *(t for m in p.metadata_props for t in (m.key, m.value)),
        ]
        if any(type(t) is not str for t in texts):
            raise self.not_utf8("the model's producer, doc string, domain or metadata", *texts)
        return Model(
            graph=graph,
            dialect="onnx",
            opsets=opsets,
            functions=functions,
            producer=p.producer_name,
            producer_version=p.producer_version,
            doc=p.doc_string,
            metadata={m.key: m.value for m in p.metadata_props},
            meta=meta,
            path=self.where,
        )

    # -- graphs -------------------------------------------------------------
    # One pass over a GraphProto's fields in the order ONNX resolves names (initializers, inputs, nodes,
    # outputs, value infos), each with its own error message; split, the scope would be threaded through all.
    def graph(self, p: pb.GraphProto, opsets: dict, parent: Graph | None, scope: _Scope | None) -> Graph:  # noqa: C901
        g = Graph(p.name, parent=parent)
        g.doc = p.doc_string
        if type(g.name) is not str or type(g.doc) is not str:
            raise self.not_utf8("the graph's name or doc string", g.name, g.doc)
        local = _Scope(scope)
        for t in p.initializer:
            v = g.add_initializer(t.name, self.tensor(t))
            local.define(v)
        for st in p.sparse_initializer:
            g.sparse_initializers[st.values.name] = self.sparse(st)
            local.define(
                Value(st.values.name, SparseTensorType(from_onnx_code(st.values.data_type).name, tuple(st.dims)))
            )
        for vi in p.input:
            if type(vi.name) is not str:
                raise self.not_utf8("an input name", vi.name)
            if vi.name in g.initializers:  # an input with a default value (IR < 4 style)
                v = g.initializers[vi.name]
                v.type = self.value_type(vi.type) or v.type
                g.inputs.append(v)
            else:
                v = g.add_input(vi.name, self.value_type(vi.type))
                local.define(v)
            self.value_info_extras(v, vi)
        # Create every node's outputs first so that inputs (and subgraphs) may refer forward.
        nodes = []
        define = local.names.setdefault  # _Scope.define, inlined
        for np_ in p.node:
            outs: list[Value | None] = []
            for name in np_.output:
                if name:
                    if type(name) is not str:
                        raise self.not_utf8("an output name", name)
                    v = Value(name)
                    define(name, v)
                    outs.append(v)
                else:
                    outs.append(None)
            nodes.append((np_, outs))
        defined, resolve = local.names.get, local.resolve
        versions: dict[str, int | None] = {}
        for np_, outs in nodes:
            domain = np_.domain
            version = versions.get(domain)
            if version is None:
                version = versions[domain] = _version(opsets, domain)
            inputs = [(defined(name) or resolve(name)) if name else None for name in np_.input]
            node = Node(np_.op_type, inputs, outs, domain=domain, name=np_.name, doc=np_.doc_string, version=version)
            if not (type(node.op) is str and type(domain) is str and type(node.name) is str and type(node.doc) is str):
                raise self.not_utf8(
                    "the op type, domain, name or doc string of a node", node.op, domain, node.name, node.doc
                )
            g.add_node(node)
            if np_.attribute:
                attrs = node.attrs
                for ap in np_.attribute:
                    attrs[ap.name] = self.attr(ap, opsets, g, local)
            if np_.overload or np_.metadata_props or np_.device_configurations:
                keep_node_extras(node, np_)
        for vi in p.value_info:
            v = local.lookup_here(vi.name)
            if v is not None:
                v.type = self.value_type(vi.type)
                self.value_info_extras(v, vi)
            else:  # type info for a name this graph does not define; keep it for the round trip
                g.meta.setdefault("foreign_value_info", []).append(vi.SerializeToString())
        for vi in p.output:
            v = local.resolve(vi.name)
            t = self.value_type(vi.type)
            if t is not None and v.const is None:
                v.type = t
            self.value_info_extras(v, vi, output=True)
            g.outputs.append(v)
        if p.quantization_annotation:
            g.meta["quantization_annotation"] = [q.SerializeToString() for q in p.quantization_annotation]
        if p.metadata_props:
            g.meta["metadata_props"] = {m.key: m.value for m in p.metadata_props}
        g.meta["undefined"] = local.undefined
        return g

    def value_info_extras(self, v: Value, vi: pb.ValueInfoProto, output: bool = False) -> None:
        if type(vi.doc_string) is not str:
            raise self.not_utf8(f"the doc string of {v.name!r}", vi.doc_string)
        if vi.doc_string:
            v.meta["output_doc" if output else "doc"] = vi.doc_string
        if vi.metadata_props:
            v.meta["metadata_props"] = {m.key: m.value for m in vi.metadata_props}

    def function(self, p: pb.FunctionProto, model_opsets: dict) -> Function:
        opsets = {imp.domain: imp.version for imp in p.opset_import}
        gp = pb.GraphProto(name=p.name, node=p.node, value_info=p.value_info)
        gp.input.extend(pb.ValueInfoProto(name=n) for n in p.input)
        gp.output.extend(pb.ValueInfoProto(name=n) for n in p.output)
        graph = self.graph(gp, opsets, parent=None, scope=None)
        defaults = {}
        for ap in p.attribute_proto:
            defaults[ap.name] = self.attr(ap, opsets, graph, _Scope(None))
        meta = {}
        if p.metadata_props:
            meta["metadata_props"] = {m.key: m.value for m in p.metadata_props}
        return Function(
            name=p.name,
            domain=p.domain,
            graph=graph,
            attributes=list(p.attribute),
            attribute_defaults=defaults,
            opsets=opsets,
            overload=p.overload,
            doc=p.doc_string,
            meta=meta,
        )

    # -- attributes ---------------------------------------------------------
    # One branch per AttributeProto type (the shared attribute codec of issue 19 replaces this switch).
    def attr(self, p: pb.AttributeProto, opsets: dict, graph: Graph, scope: _Scope) -> Attr:  # noqa: C901
        kind = _ATTR_KIND.get(p.type)
        if type(p.name) is not str:
            raise self.not_utf8("an attribute name", p.name)
        if kind is None:
            raise self.error(f"attribute {p.name!r} has unknown type {p.type}")
        if p.ref_attr_name:
            return Attr(p.name, kind, None, ref=p.ref_attr_name, doc=p.doc_string)
        value: Any
        if kind == "int":
            value = p.i
        elif kind == "float":
            value = p.f
        elif kind == "string":
            value = _text(p.s)
        elif kind == "ints":
            value = list(p.ints)
        elif kind == "floats":
            value = list(p.floats)
        elif kind == "strings":
            value = [_text(s) for s in p.strings]
        elif kind == "tensor":
            value = self.tensor(p.t)
        elif kind == "tensors":
            value = [self.tensor(t) for t in p.tensors]
        elif kind == "sparse_tensor":
            value = self.sparse(p.sparse_tensor)
        elif kind == "sparse_tensors":
            value = [self.sparse(t) for t in p.sparse_tensors]
        elif kind == "graph":
            value = self.graph(p.g, opsets, graph, scope)
        elif kind == "graphs":
            value = [self.graph(x, opsets, graph, scope) for x in p.graphs]
        elif kind == "type":
            value = self.value_type(p.tp)
        else:  # types
            value = [self.value_type(t) for t in p.type_protos]
        return Attr(p.name, kind, value, doc=p.doc_string)

    # -- types and tensors ----------------------------------------------------
    def value_type(self, t: pb.TypeProto) -> ValueType | None:
        which = t.WhichOneof("value")
        if which == "tensor_type":
            return TensorType(_elem_name(t.tensor_type.elem_type), _shape(t.tensor_type))
        if which == "sparse_tensor_type":
            return SparseTensorType(_elem_name(t.sparse_tensor_type.elem_type), _shape(t.sparse_tensor_type))
        if which == "sequence_type":
            return SequenceType(self.value_type(t.sequence_type.elem_type))
        if which == "optional_type":
            return OptionalType(self.value_type(t.optional_type.elem_type))
        if which == "map_type":
            return MapType(_elem_name(t.map_type.key_type), self.value_type(t.map_type.value_type))
        return None

    def tensor(self, t: pb.TensorProto) -> Tensor:
        if type(t.name) is not str:
            raise self.not_utf8("a tensor name", t.name)
        if t.data_type == 0:
            raise self.error(f"tensor {t.name!r} has no data type")
        dtype = from_onnx_code(t.data_type).name
        shape = tuple(t.dims)
        if any(d < 0 for d in shape):
            raise self.error(f"tensor {t.name!r} has a negative dimension in {list(shape)}")
        count = 1
        for d in shape:
            count *= d
        if count > MAX_ELEMENTS:
            raise self.error(f"tensor {t.name!r} declares an absurd shape {list(shape)}")
        if t.data_location == pb.TensorProto.EXTERNAL:
            return self.external_tensor(t, dtype, shape)
        if t.segment.begin or t.segment.end:
            raise self.error(f"tensor {t.name!r} is segmented; segmented tensors are not supported")
        raw_length = len(t.raw_data) if t.HasField("raw_data") else None  # one copy of the bytes, not two
        self.check_data_length(t, dtype, shape, count, raw_length)
        return Tensor(dtype, shape, name=t.name, loader=lambda: to_array(t), origin=t, nbytes=raw_length or None)

    def check_data_length(
        self, t: pb.TensorProto, dtype: str, shape: tuple, count: int, raw_length: int | None
    ) -> None:
        """The data a tensor holds must be what its dims and type say, before anything decodes it."""
        et = element_type(dtype)
        if raw_length is not None:
            if dtype == "string":
                raise self.error(f"tensor {t.name!r}: string tensors cannot hold raw_data")
            held, expected, unit = raw_length, (count * et.bits + 7) // 8, "bytes"
        else:
            # ONNX keeps every other type in int32_data: float8 one bit pattern an entry, the sub-byte types
            # (int4, float4e2m1, int2 ...) packed, one byte an entry (onnx's decoder raised ValueError at run time)
            field = _TYPED_FIELDS.get(dtype, "int32_data")
            expected = (count * et.bits + 7) // 8 if 0 < et.bits < 8 else count * (2 if et.is_complex else 1)
            held, unit = len(getattr(t, field)), field
        if held != expected:
            raise self.error(f"tensor {t.name!r} of {dtype}{list(shape)} holds {held} {unit}, {expected} expected")

    def external_tensor(self, t: pb.TensorProto, dtype: str, shape: tuple) -> Tensor:
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location")
        if not location:
            raise self.error(f"external tensor {t.name!r} has no location")
        path = self.resolve_external(location, t.name)
        try:
            offset = int(info.get("offset", 0))
            size = os.path.getsize(path)
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError:
            raise self.error(f"external tensor {t.name!r} has a non-numeric offset or length") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise self.error(
                f"external tensor {t.name!r}: bytes {offset}..{offset + length} lie outside {location!r} ({size} bytes)"
            )
        expected = Tensor(dtype, shape, array=np.empty(0)).nbytes
        if dtype == "string":
            raise self.error(f"external tensor {t.name!r}: string tensors cannot be stored externally")
        if length != expected:
            raise self.error(
                f"external tensor {t.name!r}: {length} bytes stored, {expected} expected for {dtype}{list(shape)}"
            )
        where = ExternalData(path, offset, length)
        return Tensor(
            dtype, shape, name=t.name, loader=lambda: _map_external(where, dtype, shape), origin=where, nbytes=length
        )

    def resolve_external(self, location: str, name: str) -> str:
        if self.base_dir is None:
            raise self.error(f"tensor {name!r} uses external data but the model was not loaded from a file")
        if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
            raise self.error(
                f"external data path {location!r} of tensor {name!r} is absolute; it must be "
                "relative to the model's folder"
            )
        base = os.path.realpath(self.base_dir)
        path = os.path.realpath(os.path.join(base, location))
        if os.path.commonpath([base, path]) != base:
            raise self.error(f"external data path {location!r} of tensor {name!r} escapes the model's folder")
        if not os.path.isfile(path):
            raise self.error(f"external data file {location!r} of tensor {name!r} does not exist")
        return path

    def sparse(self, st: pb.SparseTensorProto) -> SparseTensor:
        return SparseTensor(self.tensor(st.values), self.tensor(st.indices), tuple(st.dims))


class _Scope:
    """Name -> Value for one graph, falling back to the enclosing graphs."""

    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.names: dict[str, Value] = {}
        self.undefined: list[Value] = []

    def define(self, v: Value) -> None:
        self.names.setdefault(v.name, v)

    def lookup_here(self, name: str) -> Value | None:
        return self.names.get(name)

    def resolve(self, name: str) -> Value:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        if type(name) is not str:
            raise ValueError(f"the name {name[:40]!r} is not UTF-8 text")  # bytes: protobuf could not decode it
        v = Value(name)  # used but never defined: kept so `check` can report it
        self.names[name] = v
        self.undefined.append(v)
        return v


def _version(opsets: dict, domain: str) -> int | None:
    if domain in _DEFAULT_DOMAINS:
        return opsets.get("", opsets.get("ai.onnx"))
    return opsets.get(domain)


#: the typed field that holds each element type's data when raw_data is absent (complex: two values each)
_TYPED_FIELDS = {
    "float32": "float_data",
    "complex64": "float_data",
    "float64": "double_data",
    "complex128": "double_data",
    "int64": "int64_data",
    "int32": "int32_data",
    "int16": "int32_data",
    "int8": "int32_data",
    "uint16": "int32_data",
    "uint8": "int32_data",
    "bool": "int32_data",
    "float16": "int32_data",
    "bfloat16": "int32_data",
    "uint32": "uint64_data",
    "uint64": "uint64_data",
    "string": "string_data",
}


def _text(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b  # not text: keep the bytes so they are written back unchanged


def _elem_name(code: int) -> str | None:
    return None if code == 0 else from_onnx_code(code).name


def _shape(t) -> tuple | None:
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        which = d.WhichOneof("value")
        dims.append(d.dim_value if which == "dim_value" else d.dim_param if which == "dim_param" else None)
    return tuple(dims)


def _map_external(where: ExternalData, dtype: str, shape: tuple) -> np.ndarray:
    et = element_type(dtype)
    if et.bits % 8 == 0 and et.numpy is not None and et.bits:
        if where.length == 0:
            return np.zeros(shape, dtype=et.numpy)
        return read_slice(where.path, et.numpy.newbyteorder("<"), where.offset, shape)
    # Sub-byte types are packed: decode through a TensorProto.
    with open(where.path, "rb") as f:
        f.seek(where.offset)
        raw = f.read(where.length)
    t = pb.TensorProto(data_type=et.onnx, dims=shape, raw_data=raw)
    return to_array(t)


_ATTR_KIND = {
    pb.AttributeProto.INT: "int",
    pb.AttributeProto.FLOAT: "float",
    pb.AttributeProto.STRING: "string",
    pb.AttributeProto.INTS: "ints",
    pb.AttributeProto.FLOATS: "floats",
    pb.AttributeProto.STRINGS: "strings",
    pb.AttributeProto.TENSOR: "tensor",
    pb.AttributeProto.TENSORS: "tensors",
    pb.AttributeProto.GRAPH: "graph",
    pb.AttributeProto.GRAPHS: "graphs",
    pb.AttributeProto.SPARSE_TENSOR: "sparse_tensor",
    pb.AttributeProto.SPARSE_TENSORS: "sparse_tensors",
    pb.AttributeProto.TYPE_PROTO: "type",
    pb.AttributeProto.TYPE_PROTOS: "types",
}
_ATTR_CODE = {v: k for k, v in _ATTR_KIND.items()}
#: numpy dtypes whose raw bytes are the ONNX encoding as they are (native little-endian, one code each)
_PLAIN_CODES = {
    np.dtype(t).newbyteorder("<"): code
    for t, code in (
        (np.float32, pb.TensorProto.FLOAT),
        (np.float64, pb.TensorProto.DOUBLE),
        (np.float16, pb.TensorProto.FLOAT16),
        (np.int64, pb.TensorProto.INT64),
        (np.int32, pb.TensorProto.INT32),
        (np.int16, pb.TensorProto.INT16),
        (np.int8, pb.TensorProto.INT8),
        (np.uint8, pb.TensorProto.UINT8),
        (np.uint16, pb.TensorProto.UINT16),
        (np.uint32, pb.TensorProto.UINT32),
        (np.uint64, pb.TensorProto.UINT64),
        (np.bool_, pb.TensorProto.BOOL),
    )
}


# ---------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------


def to_proto(model: Model, *, data_sink: _DataSink | None = None, refer_from: str | None = None) -> pb.ModelProto:
    """Build a ModelProto (tensors embedded unless ``data_sink`` takes them).

    ``refer_from``: a folder; external tensors inside it stay references to their bytes (a location
    relative to that folder), so a proto read back with ``base_dir=refer_from`` maps the same bytes
    and never holds them (what the version converter works on).
    """
    with quiet_collector():
        return ProtoWriter(data_sink, refer_from).model(model)


def save(
    model: Model,
    path: str | os.PathLike,
    *,
    external_data: bool | None = None,
    location: str | None = None,
    threshold: int = EXTERNAL_THRESHOLD,
) -> None:
    """Write ``model`` to ``path`` atomically.

    ``external_data``: True puts tensors of ``threshold`` bytes or more into
    ``location`` (default ``<model file name>.data``) beside the model; None
    decides by itself (external when the model was loaded that way or is too
    large for one protobuf).  On any failure no file is left behind.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if external_data is None:
        external_data = bool(model.meta.get("external_data")) or model.weight_bytes() > PROTOBUF_LIMIT // 2
    location = location or (os.path.basename(path) + ".data")
    if external_data and (os.path.isabs(location) or os.path.normpath(location).startswith("..")):
        raise ModelWriteError(
            f"external data location {location!r} must be a file name inside the model's folder", where=path
        )
    with OutputFiles(path) as files:
        sink = _DataSink(files.temp(os.path.join(folder, location)), location, threshold) if external_data else None
        proto = to_proto(model, data_sink=sink)
        if sink is not None:
            sink.close()
            if sink.written == 0:
                files.discard(os.path.join(folder, location))
        size = proto.ByteSize()
        if size > PROTOBUF_LIMIT:
            raise ModelWriteError(
                f"the model is {size / 2**30:.1f} GiB, more than one protobuf can hold; save it with external data",
                where=path,
            )
        with files.open(path) as f:
            data = proto.SerializeToString()
            reserve(f, 0, len(data))
            f.write(data)


class _DataSink:
    """Appends tensor bytes to one external data file."""

    ALIGN = 64  # keeps every tensor's start aligned for memory mapping

    def __init__(self, path: str, location: str, threshold: int):
        self.file = open(path, "r+b")  # the new, empty temporary OutputFiles made (no truncation: see OutputFiles.open)
        self.location = location
        self.threshold = threshold
        self.written = 0

    def accepts(self, tensor: Tensor) -> bool:
        # Tensors that were external when loaded stay external, whatever their size.
        if tensor.dtype == "string":
            return False
        return tensor.nbytes >= self.threshold or isinstance(tensor.origin, ExternalData)

    def write(self, tensor: Tensor) -> tuple[int, int]:
        pad = (-self.written) % self.ALIGN
        if pad:
            self.file.write(b"\0" * pad)
            self.written += pad
        offset = self.written
        reserve(self.file, offset, tensor.nbytes)
        for chunk in _raw_chunks(tensor):
            self.file.write(chunk)
            self.written += len(chunk)
        return offset, self.written - offset

    def close(self) -> None:
        self.file.close()


def _raw_chunks(tensor: Tensor, chunk: int = 1 << 24) -> Iterator[bytes]:
    """The tensor's little-endian raw bytes, in chunks, without loading external data whole."""
    budget.check_bytes(tensor.nbytes, f"tensor {tensor.name!r}")
    origin = tensor.origin
    if isinstance(origin, ExternalData):
        with open(origin.path, "rb") as f:
            f.seek(origin.offset)
            left = origin.length
            while left:
                data = f.read(min(chunk, left))
                if not data:
                    raise ModelWriteError(f"external data of {tensor.name!r} ended early", where=origin.path)
                left -= len(data)
                yield data
        return
    if isinstance(origin, pb.TensorProto) and origin.raw_data:
        yield origin.raw_data
        return
    et = element_type(tensor.dtype)
    array = tensor.numpy()
    if et.bits % 8 == 0 and et.numpy is not None:
        flat = np.ascontiguousarray(array, dtype=et.numpy.newbyteorder("<")).reshape(-1).view(np.uint8)
        for start in range(0, flat.size, chunk):
            yield flat[start : start + chunk].tobytes()
    else:
        from onnx import numpy_helper  # packed sub-byte types

        yield numpy_helper.from_array(np.asarray(array), tensor.name).raw_data


class ProtoWriter:
    def __init__(self, sink: _DataSink | None, refer_from: str | None = None):
        self.sink = sink
        self.refer_from = os.path.realpath(refer_from) if refer_from is not None else None

    def model(self, m: Model) -> pb.ModelProto:
        p = pb.ModelProto()
        p.ir_version = int(m.meta.get("ir_version") or pb.IR_VERSION)
        for domain, version in m.opsets.items():
            p.opset_import.add(domain=domain, version=version)
        _set(p, producer_name=m.producer, producer_version=m.producer_version, doc_string=m.doc)
        if m.meta.get("domain"):
            p.domain = m.meta["domain"]
        if m.meta.get("model_version"):
            p.model_version = m.meta["model_version"]
        for k, v in m.metadata.items():
            p.metadata_props.add(key=k, value=v)
        self.fill_graph(p.graph, m.graph, top=True)
        for f in m.functions:
            p.functions.append(self.function(f))
        for raw in m.meta.get("training_info", ()):
            p.training_info.add().ParseFromString(raw)
        for raw in m.meta.get("configuration", ()):
            p.configuration.add().ParseFromString(raw)
        return p

    def graph(self, g: Graph, top: bool = False) -> pb.GraphProto:
        p = pb.GraphProto()
        self.fill_graph(p, g, top)
        return p

    def fill_graph(self, p: pb.GraphProto, g: Graph, top: bool = False) -> None:
        # Messages are built in place (``add``) rather than built and appended: an append copies.
        _set(p, name=g.name, doc_string=g.doc)
        for v in g.initializers.values():
            if v.const is not None:  # an initializer always holds one
                self.tensor_into(p.initializer.add(), v.const, v.name, allow_external=top)
        for st in g.sparse_initializers.values():
            p.sparse_initializer.append(self.sparse(st))
        for v in g.inputs:
            p.input.append(self.value_info(v, v.meta.get("doc", "")))
        io = {id(v) for v in g.inputs} | {id(v) for v in g.outputs}
        add_node, value_info = p.node.add, p.value_info
        for n in g.nodes:
            self.node_into(add_node(), n)
            for v in n.outputs:
                if v is not None and v.type is not None and id(v) not in io:
                    value_info.append(self.value_info(v, v.meta.get("doc", "")))
        for v in g.outputs:
            p.output.append(self.value_info(v, v.meta.get("output_doc", "")))
        for raw in g.meta.get("foreign_value_info", ()):
            p.value_info.add().ParseFromString(raw)
        for raw in g.meta.get("quantization_annotation", ()):
            p.quantization_annotation.add().ParseFromString(raw)
        for k, v in g.meta.get("metadata_props", {}).items():
            p.metadata_props.add(key=k, value=v)

    def function(self, f: Function) -> pb.FunctionProto:
        p = pb.FunctionProto()
        _set(p, name=f.name, domain=f.domain, doc_string=f.doc, overload=f.overload)
        p.input.extend(v.name for v in f.graph.inputs)
        p.output.extend(v.name for v in f.graph.outputs)
        p.attribute.extend(f.attributes)
        for a in f.attribute_defaults.values():
            p.attribute_proto.append(self.attr(a))
        for domain, version in f.opsets.items():
            p.opset_import.add(domain=domain, version=version)
        for n in f.graph.nodes:
            self.node_into(p.node.add(), n)
            for v in n.outputs:
                if v is not None and v.type is not None:
                    p.value_info.append(self.value_info(v, v.meta.get("doc", "")))
        for k, v in f.meta.get("metadata_props", {}).items():
            p.metadata_props.add(key=k, value=v)
        return p

    def node(self, n: Node) -> pb.NodeProto:
        p = pb.NodeProto()
        self.node_into(p, n)
        return p

    def node_into(self, p: pb.NodeProto, n: Node) -> None:
        if n.op:
            p.op_type = n.op
        if n.domain:
            p.domain = n.domain
        if n.name:
            p.name = n.name
        if n.doc:
            p.doc_string = n.doc
        p.input.extend(["" if v is None else v.name for v in n.inputs])
        p.output.extend(["" if v is None else v.name for v in n.outputs])
        if n.attrs:
            add = p.attribute.add
            for a in n.attrs.values():
                self.attr_into(add(), a)
        if not n.meta:
            return
        if n.meta.get("overload"):
            p.overload = n.meta["overload"]
        for k, v in n.meta.get("metadata_props", {}).items():
            p.metadata_props.add(key=k, value=v)
        for raw in n.meta.get("device_configurations", ()):
            p.device_configurations.add().ParseFromString(raw)

    def attr(self, a: Attr) -> pb.AttributeProto:
        p = pb.AttributeProto()
        self.attr_into(p, a)
        return p

    # One branch per attribute type (the shared attribute codec of issue 19 replaces this switch).
    def attr_into(self, p: pb.AttributeProto, a: Attr) -> None:  # noqa: C901
        p.name = a.name
        p.type = _ATTR_CODE[a.type]
        if a.doc:
            p.doc_string = a.doc
        if a.ref is not None:
            p.ref_attr_name = a.ref
            return
        k, v = a.type, canonical(a.type, a.value)
        if k == "int":
            p.i = v
        elif k == "float":
            p.f = v
        elif k == "string":
            p.s = _bytes(v)
        elif k == "ints":
            p.ints.extend(v)
        elif k == "floats":
            p.floats.extend(v)
        elif k == "strings":
            p.strings.extend(_bytes(x) for x in v)
        elif k == "tensor":
            self.tensor_into(p.t, v, v.name, allow_external=False)
        elif k == "tensors":
            p.tensors.extend(self.tensor(t, t.name, allow_external=False) for t in v)
        elif k == "sparse_tensor":
            p.sparse_tensor.CopyFrom(self.sparse(v))
        elif k == "sparse_tensors":
            p.sparse_tensors.extend(self.sparse(t) for t in v)
        elif k == "graph":
            self.fill_graph(p.g, v)
        elif k == "graphs":
            p.graphs.extend(self.graph(g) for g in v)
        elif k == "type":
            p.tp.CopyFrom(type_proto(v))
        elif k == "types":
            p.type_protos.extend(type_proto(t) for t in v)

    def value_info(self, v: Value, doc: str) -> pb.ValueInfoProto:
        p = pb.ValueInfoProto(name=v.name)
        _set(p, doc_string=doc)
        if v.type is not None:
            p.type.CopyFrom(type_proto(v.type))
        for k, val in v.meta.get("metadata_props", {}).items():
            p.metadata_props.add(key=k, value=val)
        return p

    def reference(self, origin: ExternalData) -> str | None:
        """``origin``'s file relative to ``refer_from`` (None: no references wanted, or it lies outside)."""
        if self.refer_from is None:
            return None
        location = os.path.relpath(origin.path, self.refer_from)
        return None if location.startswith("..") or os.path.isabs(location) else location.replace(os.sep, "/")

    def tensor(self, t: Tensor, name: str, allow_external: bool) -> pb.TensorProto:
        p = pb.TensorProto()
        self.tensor_into(p, t, name, allow_external)
        return p

    def tensor_into(self, p: pb.TensorProto, t: Tensor, name: str, allow_external: bool) -> None:
        if self.sink is not None and allow_external and self.sink.accepts(t):
            offset, length = self.sink.write(t)
            p.name = name
            p.data_type = element_type(t.dtype).onnx
            p.dims.extend(t.shape)
            p.data_location = pb.TensorProto.EXTERNAL
            for key, value in (("location", self.sink.location), ("offset", str(offset)), ("length", str(length))):
                p.external_data.add(key=key, value=value)
            t.release()
            return
        origin = t.origin
        if isinstance(origin, pb.TensorProto) and origin.data_location != pb.TensorProto.EXTERNAL:
            p.CopyFrom(origin)
            p.name = name
            return
        if isinstance(origin, ExternalData):
            p.name = name
            p.data_type = element_type(t.dtype).onnx
            p.dims.extend(t.shape)
            location = self.reference(origin) if allow_external else None
            if location is None:
                p.raw_data = b"".join(_raw_chunks(t))
                return
            p.data_location = pb.TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(origin.offset)), ("length", str(origin.length))):
                p.external_data.add(key=key, value=value)
            return
        array = np.asarray(t.numpy())
        code = _PLAIN_CODES.get(array.dtype)
        if code is not None and code == element_type(t.dtype).onnx:
            # What numpy_helper.from_array writes for a fixed-width little-endian type, in fewer calls.
            p.dims.extend(array.shape)
            if name:
                p.name = name
            p.data_type = code
            p.raw_data = array.tobytes()
            return
        from onnx import numpy_helper  # strings, sub-byte and other non-plain encodings

        p.CopyFrom(numpy_helper.from_array(array, name))
        if p.data_type != element_type(t.dtype).onnx:  # e.g. a float8 payload held as uint8
            p.data_type = element_type(t.dtype).onnx

    def sparse(self, st: SparseTensor) -> pb.SparseTensorProto:
        p = pb.SparseTensorProto(dims=st.dims)
        p.values.CopyFrom(self.tensor(st.values, st.values.name, allow_external=False))
        p.indices.CopyFrom(self.tensor(st.indices, st.indices.name, allow_external=False))
        return p


def type_proto(t: ValueType) -> pb.TypeProto:
    """The ONNX TypeProto of a graph-core value type."""
    p = pb.TypeProto()
    if isinstance(t, (TensorType, SparseTensorType)):
        inner = p.tensor_type if isinstance(t, TensorType) else p.sparse_tensor_type
        inner.elem_type = element_type(t.dtype).onnx if t.dtype else 0
        if t.shape is not None:
            inner.shape.SetInParent()
            for d in t.shape:
                dim = inner.shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif isinstance(d, str):
                    dim.dim_param = d
    elif isinstance(t, SequenceType):
        p.sequence_type.SetInParent()
        if t.elem is not None:
            p.sequence_type.elem_type.CopyFrom(type_proto(t.elem))
    elif isinstance(t, OptionalType):
        p.optional_type.SetInParent()
        if t.elem is not None:
            p.optional_type.elem_type.CopyFrom(type_proto(t.elem))
    elif isinstance(t, MapType):
        p.map_type.key_type = element_type(t.key).onnx if t.key is not None else 0  # 0: undefined, as read
        if t.value is not None:
            p.map_type.value_type.CopyFrom(type_proto(t.value))
    return p


def _set(p, **fields) -> None:
    """Set only non-empty string fields: ONNX's protos are proto2, where an empty string set is still 'present'."""
    for k, v in fields.items():
        if v:
            setattr(p, k, v)


def _bytes(s: str | bytes) -> bytes:
    return s if isinstance(s, bytes) else s.encode("utf-8")


def function_from_proto(proto: pb.FunctionProto) -> Function:
    """Load one FunctionProto (e.g. an op's function body from onnx.defs) into the graph core."""
    return ProtoReader(None, None).function(proto, {})
