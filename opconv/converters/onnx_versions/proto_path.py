"""Version conversion on the protobuf itself: only the nodes that change go through the graph core.

Most nodes of a model need nothing from a version conversion but the model's new opset number:
the driver walks them through steps that leave them as they are.  :func:`driver.unchanged_form`
tells them apart by their form (op, given inputs, output count, attribute names and kinds),
computed once per form; some forms pass unchanged only if their operand types fit the older
schemas, which shape inference tells.  This module loads into the graph core only the other
("worked") nodes, one at a time in the source's order, with what their adapters read: their
operands and the operands' types, the initializers and Constant nodes behind them, and a
stand-in use for each of their outputs that some other node reads.  The same driver converts
each, and its resulting nodes are written in its place in a copy of the source protobuf.

Real models repeat their layers: a worked node that looks to the adapters like one converted
before (``memo.py``: the same memo key, and the same types wherever that conversion read one)
is written from that conversion's template, renamed, and never loaded.

Whatever this path does not handle (subgraphs, model-local functions, sparse initializers,
duplicate value names, a refusal, an output read by another node that an adapter renamed)
makes :func:`convert` return None, and the caller converts the whole model instead.  The two
ways give the same nodes up to the names of values and nodes a conversion makes; ``FALLBACKS``
counts why the second was taken, ``MEMO`` how many nodes were converted and reused.
"""

from __future__ import annotations

from collections import Counter

from ...dialects.onnx import io
from ...errors import ConversionError, OpconvError
from ...ir import Graph, Model, Node, Value
from ...types import TensorType, from_onnx_code, type_signature
from . import memo
from .driver import ONNX_DOMAINS, VersionConverter, infer_types, newest_opset, types_fit, unchanged_form
from .registry import UPGRADE_NEEDS_TYPES

#: why conversions went the whole-model way (reason -> count), for tests and profiling
FALLBACKS: Counter = Counter()
#: worked nodes the driver converted ("converted") and those written from a memo template ("reused")
MEMO: Counter = Counter()

_GRAPH_CODES = (io.pb.AttributeProto.GRAPH, io.pb.AttributeProto.GRAPHS)


def convert(proto, target: int, base_dir: str | None = None):
    """``proto`` (left as it is) converted to ai.onnx ``target``, or None when this path does not apply."""

    try:
        reason = _unsupported(proto, target)
        scan = None if reason else _Scan(proto, target)
        reason = reason or scan.fallback
        partial = None if reason else _Partial(proto, scan, io.ProtoReader(base_dir, None), io.ProtoWriter(None))
    except OpconvError:
        reason = "unreadable"  # the whole-model way reports it, as its loader words it
    if reason:
        FALLBACKS[reason] += 1
        return None
    try:
        reason = partial.convert()
        if reason:
            FALLBACKS[reason] += 1
            return None
        return partial.write(io.pb)
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
    """The driver on the partial graph, noting every type it reads while ``log`` is a list."""

    log: list | None = None  # (Value, what, found) per read while a memo template is recorded

    def tidy(self) -> None:
        pass  # the write-back orders each worked node's group itself; the rest keeps its order

    def type_of(self, value: Value | None):
        t = VersionConverter.type_of(self, value)
        if self.log is not None and value is not None:
            self.log.append((value, memo.TYPE, t))
        return t

    def dtype_of(self, value: Value | None) -> str | None:
        # Only the element type: Clip's bounds on tensors of any shape convert alike.
        dtype = getattr(VersionConverter.type_of(self, value), "dtype", None)
        if self.log is not None and value is not None:
            self.log.append((value, memo.DTYPE, dtype))
        return dtype


class _RecordingGraph(Graph):
    """The partial graph, noting each name it gives out and each initializer added while recording."""

    log: list | None = None  # (hint, name) per unique_name
    made: list | None = None  # (name, Value) per initializer added

    def unique_name(self, hint: str) -> str:
        name = super().unique_name(hint)
        if self.log is not None:
            self.log.append((hint, name))
        return name

    def add_initializer(self, name: str, tensor) -> Value:
        v = super().add_initializer(name, tensor)
        if self.made is not None:
            self.made.append((name, v))
        return v


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
        # (position, NodeProto, input names, output names, op, domain, attributes serialized), by position
        self.worked: list[tuple] = []
        self.read: set[str] = set()  # names some node reads ("" aside)
        self.constants: dict[str, object] = {}  # output name -> the Constant NodeProto making it
        self.inferred: dict | None = None  # shape inference's types, when the scan needed them
        self.may_infer = False  # whether adapters may read inferred types (as VersionConverter.run decides)
        self.types: _OperandTypes | None = None
        forms: dict = {}  # op, domain, given inputs, output count, attributes -> classify()
        typed = []  # (a worked record, the schema versions whose types the operands must fit)
        produced: set[str] = set()
        listed = 0
        worked, read_update, produce, constants = self.worked, self.read.update, produced.update, self.constants
        # Slices of upb's repeated fields are read at C speed; iterating the fields themselves is not.
        for i, n in enumerate(graph.node[:]):
            op, domain, ins, outs, attrs = n.op_type, n.domain, n.input[:], n.output[:], n.attribute
            # The attributes' bytes: as cheap to read as their names and kinds, and the memo's key wants them.
            attr_key = tuple([a.SerializeToString() for a in attrs[:]]) if attrs else ()
            key = (op, domain, tuple([bool(x) for x in ins]) if "" in ins else len(ins), len(outs), attr_key)
            form = forms.get(key)
            if form is None:
                form = forms[key] = self.classify(op, domain, ins, len(outs), attrs, io._ATTR_KIND)
                if self.fallback:
                    return
            produce(outs)
            read_update(ins)
            listed += len(outs) - (outs.count("") if "" in outs else 0)
            if form is False:
                worked.append((i, n, ins, outs, op, domain, attr_key))
            elif form:
                typed.append(((i, n, ins, outs, op, domain, attr_key), form))
            elif op == "Constant" and outs:
                constants[outs[0]] = n
        produced.discard("")
        self.read.discard("")
        self.initializers = initializers = {t.name: t for t in graph.initializer[:]}  # name -> TensorProto
        self.inputs = [vi.name for vi in graph.input]
        self.graph_outputs = {vi.name for vi in graph.output}
        declared = initializers.keys()
        if (
            len(produced) != listed
            or len(initializers) != len(graph.initializer)
            or not produced.isdisjoint(declared)
            or not produced.isdisjoint(self.inputs)
        ):
            self.fallback = "duplicate names"
            return
        self.names = produced  # every name of the graph
        produced.update(declared)
        produced.update(self.inputs)
        if not (worked or typed):
            return
        # Types come from shape inference when the whole-model way would have them (VersionConverter.run);
        # the scan needs them now only for nodes whose passing depends on them, else adapters ask.
        self.may_infer = target < self.source or bool(UPGRADE_NEEDS_TYPES.intersection(key[0] for key in forms))
        if typed and self.may_infer:
            self.inferred = infer_types(None, proto)
        self.types = types = _OperandTypes(proto, self)
        signature = types.signature
        for record, checks in typed:
            _, n, ins, outs, op, _, _ = record
            if types_fit(op, checks, tuple(map(signature, ins)), tuple(map(signature, outs))):
                if op == "Constant" and outs:
                    constants[outs[0]] = n
            else:
                worked.append(record)
        if typed:
            worked.sort(key=lambda record: record[0])

    def classify(self, op, domain, ins, outputs, attributes, kinds):
        """False: the node needs the converter; else :func:`unchanged_form`'s type checks (() for none)."""
        attrs = []
        for a in attributes:
            code = a.type
            kind = kinds.get(code)
            if kind is None or code in _GRAPH_CODES:
                self.fallback = "subgraphs" if code in _GRAPH_CODES else "unknown attribute type"
                return False
            attrs.append((a.name, kind))
        if domain not in ONNX_DOMAINS:
            return ()  # the driver leaves other domains alone
        form = unchanged_form(op, self.source, self.target, tuple(bool(x) for x in ins), outputs, tuple(attrs))
        return False if form is None else form


class _OperandTypes:
    """The types the graph core would give values (as the ONNX loader sets them), read from the protobuf."""

    def __init__(self, proto, scan: _Scan):
        graph = proto.graph
        self.value_type = io.ProtoReader(None, None).value_type
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
            inferred = self.inferred[name].type
            which = inferred.WhichOneof("value")
            if which == "tensor_type":  # (most of them: the short way)
                sig = _tensor_signature(inferred.tensor_type.elem_type)
            elif which:  # type_of keeps the declared type when inference says nothing
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
    """The worked nodes, loaded one at a time into a graph of their own, and how to write them back.

    Nodes are taken in the source's order.  A node whose memo key has a template whose facts
    hold for it is written from that template and never loaded; any other is loaded with what
    its adapters read (its operands and their types, the initializers and Constant nodes behind
    them, a stand-in use for each output something reads, so ``uses`` says what it says for the
    whole graph), converted by the driver, and recorded as a template for the nodes after it.
    """

    def __init__(self, proto, scan: _Scan, reader, writer):
        self.proto, self.scan, self.reader, self.writer = proto, scan, reader, writer
        self.types = scan.types
        g = self.graph = _RecordingGraph(proto.graph.name)
        g._names = set(scan.names)  # every name of the whole graph, as its unique_name would see them
        self.model = Model(
            graph=g, dialect="onnx", opsets=dict(scan.opsets), functions=[], meta={"ir_version": proto.ir_version}
        )
        self.converter = _PartialConverter(
            self.model, scan.target, proto, inferred=scan.inferred, may_infer=scan.may_infer
        )
        self.version = scan.opsets.get("", scan.opsets.get("ai.onnx"))
        self.values: dict[str, Value] = {}  # name -> the loaded value
        self.loaded: set[str] = set()  # initializers of the source that loaded nodes read
        self.outside: list[tuple[Node, str]] = []  # stand-in users of loaded outputs, with the name they read
        self.worked_outputs: set[str] = set()  # outputs of loaded nodes
        self.makers: list[Node] = []  # Constant nodes that loaded nodes read, outside the graph
        # type an output of a node written from a template took in its conversion (Context.replace)
        self.overrides: dict[str, object] = {}
        self.pieces: list[tuple] = []  # (position, Template, name vector or None, doc), by position
        self.keys = None
        self.preloaded: dict[int, Node] = {}  # position -> a loaded node not converted yet
        if scan.worked:
            g.outputs = [self.value(vi.name) for vi in proto.graph.output]

    def convert(self) -> str:
        """Convert every worked node; why the result cannot be written back ('' when it can)."""
        converter, scan = self.converter, self.scan
        if scan.worked:
            converter.start()
            self.keys = keys = memo.FormKeys(scan, self.types)
            templates: dict[tuple, list] = {}
            try:
                # Constants that convert are loaded first: a reader before them sees their data, as in
                # the whole graph (rewrite.constant_value).  They and their readers are never reused.
                self.preloaded = {record[0]: self.load(record) for record in scan.worked if record[4] == "Constant"}
            except OpconvError:
                return "unreadable"
            for record in scan.worked:
                key = keys.key(record)
                known = templates.get(key) if key is not None else None
                if known and self.reuse(record, known):
                    continue
                try:
                    template = self.convert_node(record)
                except OpconvError:
                    return "unreadable"  # the whole-model way reports it, as its loader words it
                if converter.problems:
                    return "refused"  # the whole-model way reports every node, in its own order and words
                if key is not None and template.reusable and len(known or ()) < memo.MAX_TEMPLATES:
                    templates.setdefault(key, []).append(template)
        try:
            converter.conclude()
        except ConversionError:
            return "refused"
        MEMO["reused"] += sum(names is not None for _, _, names, _ in self.pieces)
        return self.broken()

    def reuse(self, record, templates: list) -> bool:
        """Write node ``record`` from the first template whose facts hold for it, if any."""
        i, p, ins, outs = record[:4]
        for template in templates:
            if template.facts and not self.facts_hold(template.facts, ins + outs):
                continue
            names = template.names_for(p, ins, outs, self.graph._names, self.graph.unique_name)
            for slot, t in template.output_types:
                self.override(names[slot], t)
            self.pieces.append((i, template, names, p.doc_string))
            return True
        return False

    def facts_hold(self, facts: tuple, operands: list) -> bool:
        """Whether the node's operands (slot k is ``operands[k - 1]``) have the types a template read."""
        effective = self.effective_type
        for slot, what, found in facts:
            t = effective(operands[slot - 1])
            if (t if what is memo.TYPE else getattr(t, "dtype", None)) != found:
                return False
        return True

    def effective_type(self, name: str):
        """What ``type_of`` would return for the value ``name`` in the whole graph at this point."""
        v = self.values.get(name)
        if v is not None:
            return self.converter.type_of(v)
        t = self.overrides.get(name, _UNSEEN)
        if t is _UNSEEN:
            t = self.types.declared(name)
        if t is not None and not (isinstance(t, TensorType) and t.shape is None):
            return t
        return self.converter.completed(name, t, keep=True)

    def override(self, name: str, t) -> None:
        self.overrides[name] = t
        v = self.values.get(name)
        if v is not None:
            v.type = t

    def convert_node(self, record) -> memo.Template:
        """Load the node, convert it with the driver, and record what it became."""
        i, p = record[:2]
        node = self.preloaded.pop(i, None) or self.load(record)
        g, converter = self.graph, self.converter
        inputs, outputs = list(node.inputs), list(node.outputs)
        start = len(g.nodes)
        start_types = [None if v is None else v.type for v in outputs]
        g.log, g.made, converter.log = hints, made, facts = [], [], []
        try:
            converter.node(g, node, "")
        finally:
            g.log = g.made = converter.log = None
        group = _ordered(([node] if node.graph is g else []) + [n for n in g.nodes[start:] if n.graph is g])
        read, graph_outputs = self.keys.read, self.scan.graph_outputs
        needed = [v is not None and (v.name in read or v.name in graph_outputs) for v in outputs]
        template = memo.Template.record(
            node, inputs, outputs, group, made, hints, facts, start_types, self.scan.names, needed, self.writer
        )
        self.pieces.append((i, template, None, p.doc_string))
        MEMO["converted"] += 1
        return template

    def load(self, record) -> Node:
        """The node in the partial graph, with its operands (see the class's docstring)."""
        _, p, ins, outs, op, domain, _ = record
        g, values, read = self.graph, self.values, self.keys.read
        outputs = []
        for name in outs:
            v = None
            if name:
                v = values.get(name)
                if v is None:
                    v = values[name] = Value(name, self.types.declared(name))
                self.worked_outputs.add(name)
            outputs.append(v)
        inputs = [self.value(name) if name else None for name in ins]
        node = Node(op, inputs, outputs, domain=domain, name=p.name, doc=p.doc_string, version=self.version)
        node.graph = g  # Graph.add_node, whose names are all claimed already
        g.nodes.append(node)
        attrs = p.attribute
        if attrs:
            opsets = self.scan.opsets
            node.attrs = {ap.name: self.reader.attr(ap, opsets, g, None) for ap in attrs[:]}
        if p.overload or p.metadata_props or p.device_configurations:
            io.keep_node_extras(node, p)
        for v in outputs:
            if v is not None and v.name in read:
                self.outside.append((Node("", [v]), v.name))
        return node

    def value(self, name: str) -> Value:
        """The value ``name`` as loaded nodes see it (made on first use)."""
        v = self.values.get(name)
        if v is not None:
            return v
        tensor = self.types.initializers.get(name)
        if tensor is not None:
            v = self.graph.add_initializer(name, self.reader.tensor(tensor))
            v.type = self.types.declared(name)
            self.loaded.add(name)
        else:
            t = self.overrides.get(name, _UNSEEN)
            v = Value(name, self.types.declared(name) if t is _UNSEEN else t)
            p = self.scan.constants.get(name)
            if p is not None:  # adapters read a Constant node's value (rewrite.constant_value)
                opsets = self.scan.opsets
                maker = Node(p.op_type, [], [v], domain=p.domain, name=p.name, version=self.version)
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

    def write(self, pb):
        """A copy of the source with each worked node's group in its place, new constants and opsets."""
        proto, pieces = self.proto, self.pieces
        out = pb.ModelProto()
        out.CopyFrom(proto)
        gp = out.graph
        if all(len(t.nodes) == 1 for _, t, _, _ in pieces):
            nodes = gp.node
            for i, t, names, doc in pieces:  # one node for one: rewrite it where it is
                t.fill(nodes[i], 0, names, doc)
        else:
            source, add, extend = proto.graph.node, gp.node.add, gp.node.extend
            del gp.node[:]
            start = 0
            for i, t, names, doc in pieces:
                if start < i:
                    extend(source[start:i])
                for k in range(len(t.nodes)):
                    t.fill(add(), k, names, doc)
                start = i + 1
            extend(source[start:])
        add_initializer = gp.initializer.add
        for _, t, names, _ in pieces:
            if t.initializers:
                t.write_initializers(add_initializer, names)
        self.write_value_info(gp)
        del out.opset_import[:]
        for domain, version in self.model.opsets.items():
            out.opset_import.add(domain=domain, version=version)
        out.ir_version = int(self.model.meta.get("ir_version") or pb.IR_VERSION)
        return out

    def write_value_info(self, gp) -> None:
        """The types of the values adapters made; value_info of values that went goes too.

        (Types that shape inference gave existing values are not recorded: the whole-model way
        writes them because it cannot tell them apart, and they change nothing.)
        """
        if len(gp.value_info):
            gone = {name for _, t, names, _ in self.pieces if t.gone for name in t.gone_names(names)}
            if gone:
                kept = [vi for vi in gp.value_info if vi.name not in gone]
                del gp.value_info[:]
                gp.value_info.extend(kept)
        add = gp.value_info.add
        for _, t, names, _ in self.pieces:
            if t.value_info:
                t.write_value_info(add, names)


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
            if all(
                v is None
                or v.producer is None
                or v.producer is n
                or id(v.producer) not in members
                or id(v.producer) in placed
                for v in n.inputs
            ):
                ordered.append(n)
                placed.add(id(n))
            else:
                waiting.append(n)
        if len(waiting) == len(pending):
            raise ConversionError("the converted nodes depend on each other in a cycle")
        pending = waiting
    return ordered
