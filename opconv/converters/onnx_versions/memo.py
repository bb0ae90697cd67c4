"""Repeated node forms converted once: the protobuf path's memo.

Real models repeat their layers, so most worked nodes look exactly like an earlier one to the
adapters.  A node's **memo key** is everything an adapter (and the driver's generic steps) can
observe of it locally, names aside:

* op, domain, whether it has a name (hints for new names start from it), its attributes (bytes);
* per input: absent; which earlier input it repeats; a constant (an initializer or a Constant
  node's ``value``: its content when small, else its name) with its declared type; or a value
  computed at run time with its declared type;
* per output: absent, or whether anything reads it, whether it is a graph output, its declared
  type.

Adapters also read types that shape inference completes (``VersionConverter.type_of``).  Those
reads are recorded while the first node of a key converts, as **facts** (operand, type, or only
the element type where that is all ``Context.dtype`` asked); a later node of the key reuses its
result only if the same facts hold for its operands.

The first node's result becomes a :class:`Template`: the NodeProtos it became, the initializers
and value_info it added, and a plan to rename them.  A reuse copies the protobufs and puts in the
node's own operand names; each new name is asked again from the graph's ``unique_name`` with
the hint the adapters gave, rewritten for this node (``b7/Flatten`` for node ``b7`` where the
first node ``b0`` got ``b0/Flatten``), in the same order, so names are unique, deterministic and
usually those the whole-model way picks.

A result is kept as a template only if it is self-contained: its nodes (none with a subgraph)
read only the node's operands and what the conversion made, every output something reads keeps its name, no node of
it is a Constant (whose readers would see its data), every type the adapters read is one of the
node's operands' (or of what they made).  ``proto_path`` converts every other node the usual way.
"""

from __future__ import annotations

from ...dialects.onnx import io

#: what a fact holds: the type ``type_of`` returned, or only its element type (``Context.dtype``)
TYPE, DTYPE = "type", "dtype"
#: constants up to this many serialized bytes are keyed by content, larger ones by name
INLINE_BYTES = 4096
#: at most this many templates per key (each with other facts); further nodes convert one by one
MAX_TEMPLATES = 8

_TENSOR_NAME, _TENSOR_DOC = 8, 12  # TensorProto field numbers left out of a content key
_SCALARS = (int, float, str, bytes)


class FormKeys:
    """Memo keys of worked nodes (see the module's docstring)."""

    def __init__(self, scan, types):
        self.initializers = scan.initializers  # name -> TensorProto
        self.constants = scan.constants  # name -> the untouched Constant NodeProto making it
        self.annotations = types.annotations  # name -> the TypeProto io.load takes the value's type from
        self.source = types.source
        self.graph_outputs = scan.graph_outputs
        self.read = scan.read  # every name some node reads
        # Readers of a Constant that itself converts see its data through the partial graph only.
        self.worked_constants = {name for record in scan.worked if record[4] == "Constant" for name in record[3]}
        # constant inputs' keys, by name (_UNSEEN until a node reads it); a name not in it is computed at run time
        self._constants = dict.fromkeys(self.initializers, _UNSEEN)
        self._constants.update(dict.fromkeys(self.constants, _UNSEEN))
        self._constants.update(dict.fromkeys(self.worked_constants, _UNSEEN))

    def key(self, record) -> tuple | None:
        """The node's memo key, or None when it always converts on its own."""
        _, p, ins, outs, op, domain, attr_key = record
        if op == "Constant" or p.overload or p.metadata_props or p.device_configurations:
            return None
        annotations, constants = self.annotations, self._constants
        # Most operands are untyped values computed at run time, read by some node: say so at C speed.
        if constants.keys().isdisjoint(ins) and annotations.keys().isdisjoint(ins) and "" not in ins:
            operands = _RUNS.get(len(ins)) or _RUNS.setdefault(len(ins), (_RUN,) * len(ins))
        else:
            operands = self.operands(ins)
            if operands is None:
                return None
        repeats = tuple([ins.index(name) for name in ins]) if len(ins) > 1 and len(set(ins)) < len(ins) else ()
        read, graph_outputs = self.read, self.graph_outputs
        if read.issuperset(outs) and annotations.keys().isdisjoint(outs) and graph_outputs.isdisjoint(outs):
            results = _READS.get(len(outs)) or _READS.setdefault(len(outs), (_READ,) * len(outs))
        else:
            results = self.results(outs)
        return op, domain, bool(p.name), attr_key, operands, repeats, results

    def operands(self, ins: list) -> tuple | None:
        """The inputs' part of a key (None: a node that reads a Constant which converts itself)."""
        annotations, constants = self.annotations, self._constants
        operands = []
        for name in ins:
            part = constants.get(name)
            if part is None:  # computed at run time, or absent
                if name:
                    found = annotations.get(name)
                    part = _RUN if found is None else ("run", found.SerializeToString())
                else:
                    part = 0
            else:
                if part is _UNSEEN:
                    part = constants[name] = self.constant_key(name)
                if part is False:
                    return None
            operands.append(part)
        return tuple(operands)

    def results(self, outs: list) -> tuple:
        """The outputs' part of a key: absent, or whether something reads it, whether it is a graph
        output, and its declared type."""
        annotations, read, graph_outputs = self.annotations, self.read, self.graph_outputs
        results = []
        for name in outs:
            if not name:
                results.append(0)
                continue
            found = annotations.get(name)  # (an output is no initializer: the scan checked)
            if found is None and name not in graph_outputs:
                results.append(_READ if name in read else _UNREAD)
            else:
                results.append(
                    (name in read, name in graph_outputs, None if found is None else found.SerializeToString())
                )
        return tuple(results)

    def constant_key(self, name: str) -> tuple | bool:
        """An initializer's or Constant node's data and type; False for a Constant that converts itself."""
        if name in self.worked_constants:
            return False
        tensor = self.initializers.get(name)
        if tensor is None:
            value = next((a for a in self.constants[name].attribute if a.name == "value"), None)
            if value is None or value.type != io.pb.AttributeProto.TENSOR:
                return "run", self.declared_key(name)  # rewrite.constant_value sees no data in it
            tensor = value.t
        return "const", content_key(tensor, name), self.declared_key(name)

    def declared_key(self, name: str):
        """What ``io.load`` would set as the value's type, as a hashable key (None: no type)."""
        type_proto, tensor = self.source(name)
        if type_proto is not None:
            return type_proto.SerializeToString()
        if tensor is not None:
            return tensor.data_type, tuple(tensor.dims)
        return None


_RUN = ("run", None)
_READ, _UNREAD = (True, False, None), (False, False, None)
_RUNS: dict[int, tuple] = {}  # n -> (_RUN,) * n
_READS: dict[int, tuple] = {}  # n -> (_READ,) * n
_UNSEEN = object()


def content_key(tensor, name: str):
    """A small tensor's content (every field but its name and doc), else its name."""
    if tensor.data_location == io.pb.TensorProto.EXTERNAL or tensor.ByteSize() > INLINE_BYTES:
        return "name", name
    key = tuple(
        [
            (fd.number, v if isinstance(v, _SCALARS) else tuple(v))
            for fd, v in tensor.ListFields()
            if fd.number not in (_TENSOR_NAME, _TENSOR_DOC)
        ]
    )
    try:
        hash(key)
    except TypeError:  # message fields (segment, external data, metadata): keyed by name
        return "name", name
    return "content", key


class Template:
    """What one worked node became, as protobufs, and how to write it for another node of its key.

    A node's *name vector* is its name, its input names, its output names (slots 1 and up: the
    operands), then the names its conversion made, in the order they were asked for.  The
    template records where each name of its protobufs comes from as an index into that vector,
    so that another node of the key is written with its own vector.  ``reusable`` is False when
    the result is not self-contained: it is then written as it is, for its own node only.
    """

    __slots__ = (
        "nodes",
        "initializers",
        "value_info",
        "gone",
        "node_renames",
        "initializer_names",
        "value_info_names",
        "gone_slots",
        "hints",
        "facts",
        "output_types",
        "self_index",
        "reusable",
    )

    def __init__(self):
        self.nodes: list = []  # NodeProto, in the order they are written
        self.initializers: list = []  # TensorProto the conversion added
        self.value_info: list = []  # ValueInfoProto of values the conversion made
        self.gone: list[str] = []  # the node's outputs that no node produces any more
        self.node_renames: list[list] = []  # per NodeProto: (field, position, name index)
        # name indexes of the initializers, value_info and gone outputs (planned for a reusable template only)
        self.initializer_names: list[int] = []
        self.value_info_names: list[int] = []
        self.gone_slots: list[int] = []
        self.hints: list[tuple] = []  # per made name: (name index it extends or -1, the rest of its hint)
        self.facts: tuple = ()  # (operand slot, TYPE or DTYPE, what was read)
        self.output_types: list[tuple] = []  # (output slot, the type the conversion gave it)
        self.self_index = -1  # which NodeProto is the node itself (it keeps its doc_string)
        self.reusable = False

    @classmethod
    def record(
        cls,
        node,
        ins: list,
        outs: list,
        group: list,
        made_initializers: list,
        hints: list,
        facts: list,
        start_types: list,
        original: set,
        needed: list,
        writer,
    ) -> Template:
        """The result of converting ``node`` (operand Values ``ins``/``outs`` as loaded).

        ``group``: the nodes it became, ordered; ``made_initializers``: (name, Value) added while it
        converted; ``hints``: the (hint, name) pairs ``unique_name`` gave meanwhile; ``facts``: the
        (Value, TYPE or DTYPE, what) types read; ``start_types``: the outputs' types before;
        ``original``: every name of the source graph; ``needed``: per output, whether something
        reads it or it is a graph output.
        """
        t = cls()
        t.nodes = [writer.node(n) for n in group]
        t.initializers = [writer.tensor(v.const, name, allow_external=True) for name, v in made_initializers]
        made_values = [v for n in group for v in n.outputs if v is not None and v.name not in original]
        t.value_info = [writer.value_info(v, v.meta.get("doc", "")) for v in made_values if v.type is not None]
        produced = {v.name for n in group for v in n.outputs if v is not None}
        t.gone = [v.name for v in outs if v is not None and v.name not in produced]
        if any(n.op == "Constant" for n in group):
            return t  # its readers would see its data (rewrite.constant_value); a reuse hides it
        if any(True for n in group for _ in n.subgraphs()):
            return t  # a subgraph reads the node's operands by name, which a reuse does not rename
        if any(v is not None and need and v.name not in produced for v, need in zip(outs, needed)):
            return t  # another value took the place of an output something reads
        index = t.plan_names(node, [*ins, *outs], hints)
        t.reusable = t.plan_protobufs(node, group, index, len(ins) + len(outs)) and t.plan_types(
            ins, outs, facts, start_types, original
        )
        return t

    def plan_names(self, node, operands: list, hints: list) -> dict[str, int]:
        """Name -> its index in the name vector; each made name's hint as (index it extends, rest)."""
        index: dict[str, int] = {}
        for i, v in enumerate(operands, start=1):
            if v is not None:
                index.setdefault(v.name, i)
        # A hint is rewritten from the longest name it extends at a separator: the node's name,
        # an operand's, or an earlier made name ("b0/Flatten", then "b0/Flatten" for its output).
        sources = [(node.name, 0)] if node.name else []
        sources += index.items()
        base = 1 + len(operands)
        for k, (hint, name) in enumerate(hints):
            src, rest, longest = -1, hint, -1
            for candidate, i in sources:
                n = len(candidate)
                if n > longest and hint.startswith(candidate) and (len(hint) == n or hint[n] in "/_"):
                    src, rest, longest = i, hint[n:], n
            self.hints.append((src, rest))
            index[name] = base + k
            sources.append((name, base + k))
        return index

    def plan_protobufs(self, node, group: list, index: dict, operands: int) -> bool:
        """Where each name of the protobufs comes from; False if one is neither an operand nor made."""
        for k, (n, p) in enumerate(zip(group, self.nodes)):
            renames = []
            if n is node:
                renames.append((_NAME, 0, 0))
                self.self_index = k
            elif n.name:
                i = index.get(n.name)
                if i is None or i <= operands:
                    return False
                renames.append((_NAME, 0, i))
            for field, names in ((_INPUT, p.input), (_OUTPUT, p.output)):
                for position, name in enumerate(names):
                    if name:
                        i = index.get(name)
                        if i is None:
                            return False  # a value from beyond the node's operands
                        renames.append((field, position, i))
            self.node_renames.append(renames)
        try:
            self.initializer_names = [index[t.name] for t in self.initializers]
            self.value_info_names = [index[vi.name] for vi in self.value_info]
            self.gone_slots = [index[name] for name in self.gone]
        except KeyError:
            return False
        return True

    def plan_types(self, ins: list, outs: list, facts: list, start_types: list, original: set) -> bool:
        """The facts, by operand slot, and the types the conversion gave outputs; False if a type was
        read from beyond the node's operands."""
        slots: dict[int, int] = {}
        for i, v in enumerate((*ins, *outs), start=1):
            if v is not None:
                slots.setdefault(id(v), i)
        seen: dict[tuple, object] = {}
        for v, what, found in facts:
            i = slots.get(id(v))
            if i is None:
                if v.name in original:
                    return False
                continue  # a value this conversion made: the same for every node of the key
            seen.setdefault((i, what), found)
        self.facts = tuple((i, what, found) for (i, what), found in seen.items())
        self.output_types = [
            (1 + len(ins) + j, v.type)
            for j, (v, before) in enumerate(zip(outs, start_types))
            if v is not None and v.type is not before and v.type != before
        ]
        # An output's new type is the same for every node of the key when Context.replace set it (from
        # what the conversion made) or when the whole type was a fact; inference completing it after
        # only its element type was read gives each node its own.
        typed = {i for i, what in seen if what == TYPE}
        return not any((i, DTYPE) in seen and i not in typed for i, _ in self.output_types)

    # -- another node of the key ----------------------------------------------------------
    def names_for(self, p, ins: list, outs: list, taken: set, unique_name) -> list:
        """The name vector of node ``p``: its own names, then a fresh name per made one.

        ``taken``: the graph's names; ``unique_name`` its general case (a hint already taken).
        """
        names = [p.name, *ins, *outs]
        append, claim = names.append, taken.add
        for src, rest in self.hints:
            hint = names[src] + rest if src >= 0 else rest
            if hint and hint not in taken:
                claim(hint)
                append(hint)
            else:
                append(unique_name(hint))
        return names

    def fill(self, p, k: int, names: list | None, doc: str) -> None:
        """Write the template's ``k``-th node into ``p`` with ``names`` (None: as recorded)."""
        p.CopyFrom(self.nodes[k])
        if names is None:
            return
        inputs, outputs = p.input, p.output
        for field, position, i in self.node_renames[k]:
            if field is _INPUT:
                inputs[position] = names[i]
            elif field is _OUTPUT:
                outputs[position] = names[i]
            else:
                p.name = names[i]
        if k == self.self_index and doc != self.nodes[k].doc_string:
            if doc:
                p.doc_string = doc
            else:
                p.ClearField("doc_string")

    def write_initializers(self, add, names: list | None) -> None:
        _write_renamed(add, self.initializers, self.initializer_names, names)

    def write_value_info(self, add, names: list | None) -> None:
        _write_renamed(add, self.value_info, self.value_info_names, names)

    def gone_names(self, names: list | None) -> list[str]:
        return self.gone if names is None else [names[i] for i in self.gone_slots]


def _write_renamed(add, protos: list, slots: list, names: list | None) -> None:
    """Copy each of ``protos`` into ``add()``, named ``names[slot]`` (None: keep the recorded names)."""
    for k, proto in enumerate(protos):
        p = add()
        p.CopyFrom(proto)
        if names is not None:
            p.name = names[slots[k]]


_NAME, _INPUT, _OUTPUT = "name", "input", "output"  # the NodeProto fields a template renames
