"""Version conversion on the protobuf itself: only the nodes that change go through the graph core.

Most nodes of a model need nothing from a version conversion but the model's new opset number:
the driver walks them through steps that leave them as they are.  :func:`driver.unchanged_form`
tells them apart by their form (op, given inputs, output count, attribute names and kinds),
computed once per form; some forms pass unchanged only if their operand types fit the older
schemas, which shape inference tells.  This module loads into the graph core only the other
("worked") nodes, with what their adapters read: their operands and the operands' types, the
initializers and Constant nodes behind them, and a stand-in use for each of their outputs that
an untouched node reads.  The same driver converts that partial graph, and each worked node's
resulting nodes are written in its place in a copy of the source protobuf.

Whatever this path does not handle (subgraphs, model-local functions, sparse initializers,
duplicate value names, a refusal, an output read by an untouched node that an adapter renamed)
makes :func:`convert` return None, and the caller converts the whole model instead.  The two
ways give the same nodes; ``FALLBACKS`` counts why the second was taken.
"""

from __future__ import annotations

from collections import Counter

from ...dialects.onnx import io
from ...errors import ConversionError, OpconvError
from ...ir import Graph, Model, Node, Value
from ...types import TensorType, from_onnx_code, type_signature
from .driver import _ONNX_DOMAINS, VersionConverter, infer_types, newest_opset, types_fit, unchanged_form
from .registry import UPGRADE_NEEDS_TYPES

#: why conversions went the whole-model way (reason -> count), for tests and profiling
FALLBACKS: Counter = Counter()

_GRAPH_CODES = (io.pb.AttributeProto.GRAPH, io.pb.AttributeProto.GRAPHS)


def convert(proto, target: int, base_dir: str | None = None):
    """``proto`` (left as it is) converted to ai.onnx ``target``, or None when this path does not apply."""

    try:
        reason = _unsupported(proto, target)
        scan = None if reason else _Scan(proto, target)
        reason = reason or scan.fallback
        partial = None if reason else _Partial(proto, scan, io._Reader(base_dir, None))
    except OpconvError:
        reason = "unreadable"  # the whole-model way reports it, as its loader words it
    if reason:
        FALLBACKS[reason] += 1
        return None
    try:
        converter = _PartialConverter(partial.model, target, proto, inferred=scan.inferred,
                                      may_infer=scan.may_infer)
        converter.positions = partial.positions
        converter.run()
        reason = partial.broken()
        if reason:
            FALLBACKS[reason] += 1
            return None
        return partial.write(io._Writer(None), io.pb)
    except ConversionError:
        FALLBACKS["refused"] += 1  # the whole-model way reports it, in its own order and words
        return None
    finally:
        partial.release()


def _unsupported(proto, target: int) -> str:
    if not 1 <= target <= newest_opset():
        return "target out of range"
    if proto.functions:
        return "functions"
    if proto.graph.sparse_initializer:
        return "sparse initializers"
    return ""


class _PartialConverter(VersionConverter):
    """The driver, remembering for each node it builds the source position of the node it came from."""

    positions: dict  # id(node) -> position in the source graph of the worked node it belongs to

    def tidy(self) -> None:
        pass  # the write-back orders each worked node's group itself; the rest keeps its order

    def graph(self, graph: Graph, where: str) -> None:
        # The partial graph holds only ai.onnx nodes without subgraphs (what VersionConverter.graph checks).
        positions, nodes, convert = self.positions, graph.nodes, self.node
        for node in list(nodes):
            if node.graph is not graph:
                continue
            start = len(nodes)
            convert(graph, node, where)
            if len(nodes) > start:
                position = positions[id(node)]
                for made in nodes[start:]:
                    positions[id(made)] = position


class _Scan:
    """One pass over the nodes: which need the converter, what the others read, every name in use."""

    def __init__(self, proto, target: int):
        graph = proto.graph
        self.opsets = opsets = {}
        for imp in proto.opset_import:
            opsets[imp.domain] = imp.version
        self.source = opsets.get("", opsets.get("ai.onnx", 1))
        self.target = target
        self.fallback = ""
        self.worked: list[tuple] = []  # (position, NodeProto, input names, output names, op, domain), by position
        self.read_outside: set[str] = set()  # names read by the nodes left as they are
        self.constants: dict[str, object] = {}  # output name -> the Constant NodeProto making it
        self.inferred: dict | None = None  # shape inference's types, when the scan needed them
        self.may_infer = False  # whether adapters may read inferred types (as VersionConverter.run decides)
        self.types: _OperandTypes | None = None
        forms: dict = {}  # cheap key -> classify()
        typed = []  # a worked record, then the schema versions whose types the operands must fit
        produced: set[str] = set()
        listed = 0
        worked, read_update, produce, constants = self.worked, self.read_outside.update, produced.update, self.constants
        # Slices of upb's repeated fields are read at C speed; iterating the fields themselves is not.
        for i, n in enumerate(graph.node[:]):
            op, domain, ins, outs, attrs = n.op_type, n.domain, n.input[:], n.output[:], n.attribute
            attr_key = tuple([(a.name, a.type) for a in attrs[:]]) if attrs else ()
            key = (op, domain, tuple([bool(x) for x in ins]) if "" in ins else len(ins), len(outs), attr_key)
            form = forms.get(key)
            if form is None:
                form = forms[key] = self.classify(op, domain, ins, len(outs), attr_key, io._ATTR_KIND)
                if self.fallback:
                    return
            produce(outs)
            listed += len(outs) - (outs.count("") if "" in outs else 0)
            if form is False:
                worked.append((i, n, ins, outs, op, domain))
            elif form:
                typed.append((i, n, ins, outs, op, domain, form))
            else:
                read_update(ins)
                if op == "Constant" and outs:
                    constants[outs[0]] = n
        produced.discard("")
        self.initializers = initializers = {t.name: t for t in graph.initializer[:]}  # name -> TensorProto
        self.inputs = [vi.name for vi in graph.input]
        declared = initializers.keys()
        if len(produced) != listed or len(initializers) != len(graph.initializer) \
                or not produced.isdisjoint(declared) or not produced.isdisjoint(self.inputs):
            self.fallback = "duplicate names"
            return
        self.names = produced | declared
        self.names.update(self.inputs)
        if not (worked or typed):
            return
        # Types come from shape inference when the whole-model way would have them (VersionConverter.run);
        # the scan needs them now only for nodes whose passing depends on them, else adapters ask.
        self.may_infer = target < self.source or bool(UPGRADE_NEEDS_TYPES.intersection(key[0] for key in forms))
        if typed and self.may_infer:
            self.inferred = infer_types(None, proto)
        self.types = types = _OperandTypes(proto, self)
        signature = types.signature
        for i, n, ins, outs, op, domain, checks in typed:
            if types_fit(op, checks, tuple(map(signature, ins)), tuple(map(signature, outs))):
                read_update(ins)
                if op == "Constant" and outs:
                    constants[outs[0]] = n
            else:
                worked.append((i, n, ins, outs, op, domain))
        if typed:
            worked.sort(key=lambda record: record[0])

    def classify(self, op, domain, ins, outputs, attr_key, kinds):
        """False: the node needs the converter; else :func:`unchanged_form`'s type checks (() for none)."""
        attrs = []
        for name, code in attr_key:
            kind = kinds.get(code)
            if kind is None or code in _GRAPH_CODES:
                self.fallback = "subgraphs" if code in _GRAPH_CODES else "unknown attribute type"
                return False
            attrs.append((name, kind))
        if domain not in _ONNX_DOMAINS:
            return ()  # the driver leaves other domains alone
        form = unchanged_form(op, self.source, self.target, tuple(bool(x) for x in ins), outputs, tuple(attrs))
        return False if form is None else form


class _OperandTypes:
    """The types the graph core would give values (as the ONNX loader sets them), read from the protobuf."""

    def __init__(self, proto, scan: _Scan):
        graph = proto.graph
        self.value_type = io._Reader(None, None).value_type
        self.inferred = scan.inferred or {}
        self.initializers = initializers = scan.initializers
        # name -> the TypeProto whose type io.load leaves on the value, in its order: a graph input's
        # (an empty one leaves an initializer's type), value_info's, then a graph output's (when not empty)
        self.annotations = annotations = {}
        for vi in graph.input:
            if vi.name not in initializers or vi.type.WhichOneof("value"):
                annotations[vi.name] = vi.type
        for vi in graph.value_info[:]:
            if vi.name in scan.names:
                annotations[vi.name] = vi.type
        for vi in graph.output:
            if vi.name not in initializers and vi.type.WhichOneof("value"):
                annotations[vi.name] = vi.type
        self._signatures: dict[str, str | None] = {}

    def source(self, name: str) -> tuple:
        """Where ``io.load`` takes the value's type from: ``(TypeProto, None)``, ``(None, TensorProto)``
        for an initializer's, or ``(None, None)``."""
        found = self.annotations.get(name)
        return (found, None) if found is not None else (None, self.initializers.get(name))

    def declared(self, name: str):
        """The value's type after ``io.load``."""
        type_proto, tensor = self.source(name)
        if type_proto is not None:
            return self.value_type(type_proto)
        if tensor is not None:
            return TensorType(from_onnx_code(tensor.data_type).name, tuple(tensor.dims))
        return None

    def signature(self, name: str) -> str | None:
        """``type_signature(VersionConverter.type_of(value))`` for the value ``name``."""
        if not name:
            return None
        sig = self._signatures.get(name, _UNSEEN)
        if sig is not _UNSEEN:
            return sig
        type_proto, tensor = self.source(name)
        if type_proto is not None:
            sig, complete = self.type_proto_signature(type_proto)
        elif tensor is not None:
            sig, complete = _tensor_signature(tensor.data_type), True
        else:
            sig, complete = None, False
        if not complete and name in self.inferred:
            inferred = self.inferred[name]
            if inferred.WhichOneof("value"):  # type_of keeps the declared type when inference says nothing
                sig = self.type_proto_signature(inferred)[0]
        self._signatures[name] = sig
        return sig

    def type_proto_signature(self, tp) -> tuple[str | None, bool]:
        """The type signature of a TypeProto and whether it is complete (type_of asks inference otherwise)."""
        if tp.WhichOneof("value") == "tensor_type":
            tt = tp.tensor_type
            return _tensor_signature(tt.elem_type), tt.HasField("shape")
        t = self.value_type(tp)
        return type_signature(t), t is not None and not (isinstance(t, TensorType) and t.shape is None)


_UNSEEN = object()


def _tensor_signature(code: int) -> str | None:
    sig = _TENSOR_SIGNATURES.get(code, _UNSEEN)
    if sig is _UNSEEN:
        sig = _TENSOR_SIGNATURES[code] = None if code == 0 else f"tensor({from_onnx_code(code).name})"
    return sig


_TENSOR_SIGNATURES: dict[int, str | None] = {}


class _Partial:
    """The worked nodes in a graph of their own, and how to write them back."""

    def __init__(self, proto, scan: _Scan, reader):
        self.proto, self.scan, self.reader = proto, scan, reader
        self.types = scan.types
        g = self.graph = Graph(proto.graph.name)
        g._names = set(scan.names)  # every name of the whole graph, as its unique_name would see them
        self.model = Model(graph=g, dialect="onnx", opsets=dict(scan.opsets), functions=[],
                           meta={"ir_version": proto.ir_version})
        self.values: dict[str, Value] = {}
        self.loaded: set[str] = set()  # initializers of the source that worked nodes read
        self.positions: dict[int, int] = {}
        self.outside: list[tuple[Node, str]] = []  # stand-in users of worked outputs, with the name they read
        self.worked_outputs: set[str] = set()
        self.makers: list[Node] = []  # Constant nodes that worked nodes read, outside the graph
        if not scan.worked:
            return
        opsets, values = scan.opsets, self.values
        declared = self.types.declared
        for _, _, _, outs, _, _ in scan.worked:  # every output first: inputs may refer forward
            for name in outs:
                if name:
                    values[name] = Value(name, declared(name))
        self.worked_outputs.update(values)
        version = opsets.get("", opsets.get("ai.onnx"))
        attr, value, positions, add_node = reader.attr, self.value, self.positions, g.nodes.append
        for i, p, ins, outs, op, domain in scan.worked:
            inputs = [(values.get(name) or value(name)) if name else None for name in ins]
            node = Node(op, inputs, [values[name] if name else None for name in outs], domain=domain,
                        name=p.name, doc=p.doc_string, version=version)
            node.graph = g  # Graph.add_node, whose names are all claimed already
            add_node(node)
            attrs = p.attribute
            if attrs:
                node.attrs = {ap.name: attr(ap, opsets, g, None) for ap in attrs[:]}
            if p.overload or p.metadata_props or p.device_configurations:
                io.keep_node_extras(node, p)
            positions[id(node)] = i
        for name in scan.read_outside.intersection(self.worked_outputs):
            self.outside.append((Node("", [values[name]]), name))
        g.outputs = [value(vi.name) for vi in proto.graph.output]

    def value(self, name: str) -> Value:
        """The value ``name`` as the worked nodes see it (made on first use)."""
        v = self.values.get(name)
        if v is not None:
            return v
        tensor = self.types.initializers.get(name)
        if tensor is not None:
            v = self.graph.add_initializer(name, self.reader.tensor(tensor))
            v.type = self.types.declared(name)
            self.loaded.add(name)
        else:
            v = Value(name, self.types.declared(name))
            p = self.scan.constants.get(name)
            if p is not None:  # adapters read a Constant node's value (rewrite.constant_value)
                opsets = self.scan.opsets
                maker = Node(p.op_type, [], [v], domain=p.domain, name=p.name,
                             version=opsets.get("", opsets.get("ai.onnx")))
                maker.attrs = {ap.name: self.reader.attr(ap, opsets, self.graph, None) for ap in p.attribute}
                self.makers.append(maker)
        self.values[name] = v
        return v

    def release(self) -> None:
        """Break the partial graph's reference cycles (node <-> value) so that it is freed at once.

        Every node ever added stays in ``graph.nodes`` (the converter's tidy step is skipped), so
        clearing their links, the stand-in users' and the Constant makers' leaves no cycle.
        """
        for n in self.graph.nodes:
            n.inputs = n.outputs = n.graph = None
        for user, _ in self.outside:
            user.inputs = None
        for maker in self.makers:
            maker.outputs = None
        self.graph.nodes = []

    def broken(self) -> str:
        """Why the result cannot be written back in place ('' when it can)."""
        g = self.graph
        for user, name in self.outside:
            v = user.inputs[0]
            if v.name != name or v.producer is None or v.producer.graph is not g:
                return "output renamed"
        for v, p in zip(g.outputs, self.proto.graph.output):
            if v.name != p.name or p.name in self.worked_outputs and (v.producer is None or v.producer.graph is not g):
                return "output renamed"
        return ""

    def write(self, writer, pb):
        """A copy of the source with each worked node's group in its place, new constants and opsets."""
        proto, g, scan = self.proto, self.graph, self.scan
        out = pb.ModelProto()
        out.CopyFrom(proto)
        gp = out.graph
        groups: dict[int, list[Node]] = {}
        positions = self.positions
        for n in g.nodes:
            if n.graph is g:
                groups.setdefault(positions[id(n)], []).append(n)
        node_into = writer.node_into
        worked = [record[0] for record in scan.worked]
        if all(len(groups.get(i, ())) == 1 for i in worked):
            nodes = gp.node
            for i in worked:  # one node for one: rewrite it where it is
                p = nodes[i]
                p.Clear()
                node_into(p, groups[i][0])
        else:
            source, add = proto.graph.node, gp.node.add
            del gp.node[:]
            start = 0
            for i in worked:
                if start < i:
                    gp.node.extend(source[start:i])
                for n in _ordered(groups.get(i, [])):
                    node_into(add(), n)
                start = i + 1
            gp.node.extend(source[start:])
        add_initializer, tensor_into = gp.initializer.add, writer.tensor_into
        for name, v in g.initializers.items():
            if name not in self.loaded:
                tensor_into(add_initializer(), v.const, name, allow_external=True)
        self.write_value_info(gp, groups, writer)
        del out.opset_import[:]
        for domain, version in self.model.opsets.items():
            out.opset_import.add(domain=domain, version=version)
        out.ir_version = int(self.model.meta.get("ir_version") or pb.IR_VERSION)
        return out

    def write_value_info(self, gp, groups: dict, writer) -> None:
        """The types of the values adapters made; value_info of values that went goes too.

        (Types that shape inference gave existing values are not recorded: the whole-model way
        writes them because it cannot tell them apart, and they change nothing.)
        """
        values = self.values
        made = [v for group in groups.values() for n in group for v in n.outputs
                if v is not None and v.name not in values and v.type is not None]
        gone = self.worked_outputs.difference(v.name for group in groups.values() for n in group
                                              for v in n.outputs if v is not None)
        if gone and len(gp.value_info):
            kept = [vi for vi in gp.value_info if vi.name not in gone]
            del gp.value_info[:]
            gp.value_info.extend(kept)
        for v in made:
            gp.value_info.append(writer.value_info(v, v.meta.get("doc", "")))


def _ordered(group: list[Node]) -> list[Node]:
    """The nodes of one group, each after the producers of its inputs within the group."""
    if len(group) < 2:
        return group
    members = {id(n) for n in group}
    placed: set[int] = set()
    ordered: list[Node] = []
    pending = group
    while pending:
        waiting = []
        for n in pending:
            if all(v is None or v.producer is None or v.producer is n or id(v.producer) not in members
                   or id(v.producer) in placed for v in n.inputs):
                ordered.append(n)
                placed.add(id(n))
            else:
                waiting.append(n)
        if len(waiting) == len(pending):
            raise ConversionError("the converted nodes depend on each other in a cycle")
        pending = waiting
    return ordered
