"""The one in-memory graph shared by every dialect, converter and executor.

A :class:`Model` holds a :class:`Graph` of :class:`Node` objects connected by
:class:`Value` objects.  A value is produced by at most one node (or is a graph
input or a constant) and knows the nodes that use it, so rewrites can replace
every use of a value in one call.  Constant data lives in :class:`Tensor`
objects that load their bytes only when asked (memory-mapped for data in a
separate file), so converting a 10 GB model does not read 10 GB into memory.

Dialect specifics stay out of this module: a node carries its ``op`` name,
``domain`` and ``version`` as strings/ints, attributes are typed :class:`Attr`
values, and subgraphs (ONNX If/Loop bodies, OpenVINO TensorIterator bodies,
HLO regions) are nested :class:`Graph` objects whose nodes may use values of
the enclosing graphs directly (outer scope).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import GraphError
from .types import Shape, TensorType, ValueType, element_type, from_numpy

if TYPE_CHECKING:
    import onnx
    import openvino
    from numpy.typing import ArrayLike

    from .api import Dims, InputShapes


class Tensor:
    """Constant tensor data, loaded lazily.

    ``loader`` returns the array when first needed; ``origin`` is an opaque
    object a dialect's I/O module may keep to write the data back unchanged
    (e.g. the original ONNX TensorProto or an (file, offset, length) triple).
    """

    __slots__ = ("dtype", "shape", "name", "_array", "_loader", "origin", "nbytes")

    def __init__(
        self,
        dtype: str,
        shape: Sequence[int],
        *,
        name: str = "",
        array: np.ndarray | None = None,
        loader: Callable[[], np.ndarray] | None = None,
        origin: Any = None,
        nbytes: int | None = None,
    ):
        if array is None and loader is None:
            raise GraphError("a Tensor needs an array or a loader")
        self.dtype = dtype
        self.shape = tuple(map(int, shape))
        self.name = name
        self._array = array
        self._loader = loader
        self.origin = origin
        if nbytes is None:
            count = 1
            for d in self.shape:
                count *= d
            bits = element_type(dtype).bits or 64
            nbytes = (count * bits + 7) // 8
        self.nbytes = nbytes

    @classmethod
    def from_array(cls, array: ArrayLike, name: str = "", dtype: str | None = None) -> Tensor:
        """Wrap an in-memory numpy array (a copy is not made)."""
        array = np.asarray(array)
        if dtype is None:
            dtype = from_numpy(array.dtype).name
        return cls(dtype, array.shape, name=name, array=array)

    @property
    def is_loaded(self) -> bool:
        return self._array is not None

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (memory-mapped when the source allows)."""
        if self._array is None:
            assert self._loader is not None  # a Tensor without an array always has a loader (__init__, release)
            array = self._loader()
            if tuple(array.shape) != self.shape:
                raise GraphError(
                    f"tensor {self.name!r}: stored data has shape {tuple(array.shape)}, declared {self.shape}"
                )
            self._array = array
        return self._array

    def release(self) -> None:
        """Drop the loaded array if it can be loaded again (frees memory after a stream-out)."""
        if self._loader is not None:
            self._array = None

    @property
    def type(self) -> TensorType:
        return TensorType(self.dtype, self.shape)

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.type})"


@dataclass
class SparseTensor:
    """A COO sparse constant: ``values`` at ``indices`` of a dense tensor of ``dims``."""

    values: Tensor
    indices: Tensor
    dims: tuple[int, ...]

    @classmethod
    def from_coo(cls, values: ArrayLike, indices: ArrayLike, dims: Iterable[int]) -> SparseTensor:
        """A sparse run-time value (a feed for a ``sparse_tensor`` input) from numpy ``values`` and ``indices``:
        [NNZ] linear positions or [NNZ, rank] coordinates, as in ONNX's SparseTensorProto."""
        return cls(
            Tensor.from_array(np.asarray(values)),
            Tensor.from_array(np.asarray(indices, np.int64)),
            tuple(int(d) for d in dims),
        )


@dataclass
class Attr:
    """A typed attribute.

    ``type`` uses the schema vocabulary (``int``, ``floats``, ``string``,
    ``tensor``, ``graph``, ``type`` ...).  ``ref`` names an attribute of an
    enclosing function whose value this one takes (ONNX ``ref_attr_name``).
    """

    name: str
    type: str
    value: Any
    ref: str | None = None
    doc: str = ""


class Value:
    """An edge of the graph: a typed tensor (or sequence/optional/map) flowing between nodes."""

    __slots__ = ("name", "type", "producer", "index", "const", "uses", "doc", "meta")

    def __init__(self, name: str, type: ValueType | None = None, *, const: Tensor | None = None):
        self.name = name
        self.type = type
        self.producer: Node | None = None
        self.index = 0  # output position in the producer
        self.const = const  # set for initializers / constants
        self.uses: list[tuple[Node, int]] = []  # (consumer node, input position)
        self.doc = ""
        self.meta: dict[str, Any] = {}

    @property
    def shape(self) -> Shape:
        return getattr(self.type, "shape", None)

    @property
    def dtype(self) -> str | None:
        return getattr(self.type, "dtype", None)

    def consumers(self) -> list[Node]:
        seen: dict[int, Node] = {}
        for node, _ in self.uses:
            seen.setdefault(id(node), node)
        return list(seen.values())

    def replace_all_uses_with(self, other: Value) -> None:
        """Make every node that reads this value read ``other`` instead."""
        for node, i in list(self.uses):
            node.set_input(i, other)

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {self.type})"


class Node:
    """One operation.  ``inputs`` may hold ``None`` for an omitted optional input."""

    __slots__ = ("op", "domain", "version", "name", "inputs", "outputs", "attrs", "doc", "meta", "graph")

    def __init__(
        self,
        op: str,
        inputs: Iterable[Value | None] = (),
        outputs: Iterable[Value | None] = (),
        *,
        domain: str = "",
        version: int | None = None,
        name: str = "",
        attrs: Iterable[Attr] | dict[str, Attr] = (),
        doc: str = "",
    ):
        self.op = op
        self.domain = domain
        self.version = version
        self.name = name
        self.inputs: list[Value | None] = []
        self.outputs: list[Value | None] = []
        self.attrs: dict[str, Attr] = (
            (dict(attrs) if isinstance(attrs, dict) else {a.name: a for a in attrs}) if attrs else {}
        )
        self.doc = doc
        self.meta: dict[str, Any] = {}
        self.graph: Graph | None = None
        ins = self.inputs
        for v in inputs:  # append_input, inlined: graphs are built node by node
            if v is not None:
                v.uses.append((self, len(ins)))
            ins.append(v)
        outs = self.outputs
        for v in outputs:  # append_output, inlined
            if v is not None:
                if v.producer is not None and v.producer is not self:
                    raise GraphError(f"value {v.name!r} already has a producer ({v.producer.label})")
                v.producer = self
                v.index = len(outs)
            outs.append(v)

    # -- wiring -----------------------------------------------------------
    def append_input(self, value: Value | None) -> None:
        self.inputs.append(value)
        if value is not None:
            value.uses.append((self, len(self.inputs) - 1))

    def set_input(self, i: int, value: Value | None) -> None:
        old = self.inputs[i]
        if old is not None:
            old.uses.remove((self, i))
        self.inputs[i] = value
        if value is not None:
            value.uses.append((self, i))

    def append_output(self, value: Value | None) -> None:
        if value is not None:
            if value.producer is not None and value.producer is not self:
                raise GraphError(f"value {value.name!r} already has a producer ({value.producer.label})")
            value.producer = self
            value.index = len(self.outputs)
        self.outputs.append(value)

    def detach(self) -> None:
        """Unlink from the inputs' use lists (before removal from a graph)."""
        for i, v in enumerate(self.inputs):
            if v is not None:
                _drop_use(v.uses, self, i)

    # -- convenience ------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attrs.get(name)
        return default if a is None else a.value

    def subgraphs(self) -> Iterator[Graph]:
        for a in self.attrs.values():
            if isinstance(a.value, Graph):
                yield a.value
            elif isinstance(a.value, list):
                for item in a.value:
                    if isinstance(item, Graph):
                        yield item

    @property
    def label(self) -> str:
        """How errors name this node: its name if it has one, else op and first output."""
        if self.name:
            return f"node {self.name!r} ({self.op})"
        first = next((v.name for v in self.outputs if v is not None), "?")
        return f"{self.op} node producing {first!r}"

    def __repr__(self) -> str:
        ins = ", ".join("-" if v is None else v.name for v in self.inputs)
        outs = ", ".join("-" if v is None else v.name for v in self.outputs)
        return f"Node({self.op}: {ins} -> {outs})"


class Graph:
    """An ordered list of nodes with graph inputs, outputs and constants.

    ``initializers`` maps names to constant values (``value.const`` set).  A
    constant that is also listed in ``inputs`` is an overridable default, as
    old ONNX models use them.  ``parent`` links a subgraph to its enclosing
    graph so that names can be resolved through outer scopes.
    """

    def __init__(self, name: str = "", *, parent: Graph | None = None):
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.initializers: dict[str, Value] = {}
        self.sparse_initializers: dict[str, SparseTensor] = {}
        self.doc = ""
        self.meta: dict[str, Any] = {}
        self.parent = parent
        self._names: set[str] | None = None
        self._counter = itertools.count()

    # -- construction -----------------------------------------------------
    def add_input(self, name: str, type: ValueType | None = None) -> Value:
        v = Value(name, type)
        self.inputs.append(v)
        self._claim(name)
        return v

    def add_initializer(self, name: str, tensor: Tensor) -> Value:
        if name in self.initializers:
            raise GraphError(f"duplicate initializer {name!r}")
        tensor.name = name
        v = Value(name, tensor.type, const=tensor)
        self.initializers[name] = v
        self._claim(name)
        return v

    def add_node(self, node: Node, *, before: Node | None = None) -> Node:
        node.graph = self
        if before is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(self.nodes.index(before), node)
        for v in node.outputs:
            if v is not None:
                self._claim(v.name)
        return node

    def remove_node(self, node: Node) -> None:
        """Remove a node; its outputs must be unused."""
        for v in node.outputs:
            if v is not None and v.uses:
                users = ", ".join(n.label for n in v.consumers())
                raise GraphError(f"cannot remove {node.label}: output {v.name!r} is used by {users}")
        node.detach()
        self.nodes.remove(node)
        node.graph = None

    # -- names ------------------------------------------------------------
    def _all_names(self) -> set[str]:
        if self._names is None:
            names = {v.name for v in self.inputs}
            names.update(self.initializers)
            for n in self.nodes:
                names.update(v.name for v in n.outputs if v is not None)
            self._names = names
        return self._names

    def _claim(self, name: str) -> None:
        if self._names is not None:
            self._names.add(name)

    def unique_name(self, hint: str) -> str:
        """A value/node name not used anywhere in this graph or its outer scopes."""
        taken = self._all_names()
        outer = self.parent
        while outer is not None:
            taken = taken | outer._all_names()
            outer = outer.parent
        if hint and hint not in taken:
            self._claim(hint)
            return hint
        while True:
            candidate = f"{hint or 'v'}_{next(self._counter)}"
            if candidate not in taken:
                self._claim(candidate)
                return candidate

    def copy(self, parent: Graph | None = None) -> Graph:
        """A copy to rewrite in place: new nodes and values (metadata copied), the same constant tensors (not read).

        Subgraphs (If branches, Loop and TensorIterator bodies, HLO regions) are copied too, and read the copies
        of the enclosing values; ``parent`` is the copy's enclosing graph.
        """
        return self._copy(parent, {})

    def _copy(self, parent: Graph | None, outer: dict[int, Value]) -> Graph:
        g = Graph(self.name, parent=parent)
        g.doc = self.doc
        g.meta = dict(self.meta)
        g.sparse_initializers = dict(self.sparse_initializers)
        mapped = dict(outer)  # id(value of this graph or an enclosing one) -> its copy

        def copied(v: Value, new: Value) -> Value:
            new.meta, new.doc = dict(v.meta), v.doc
            mapped[id(v)] = new
            return new

        for name, v in self.initializers.items():
            assert v.const is not None  # an initializer always holds its tensor
            copied(v, g.add_initializer(name, v.const)).type = v.type
        for v in self.inputs:
            if v.const is not None and id(v) in mapped:  # an initializer that is an input: an overridable default
                g.inputs.append(mapped[id(v)])
            else:
                copied(v, g.add_input(v.name, v.type))
        for node in self.nodes:
            outputs = [None if v is None else copied(v, Value(v.name, v.type)) for v in node.outputs]
            inputs = [None if v is None else mapped[id(v)] for v in node.inputs]
            attrs = {name: _copy_subgraphs(a, g, mapped) for name, a in node.attrs.items()}
            new_node = Node(
                node.op,
                inputs,
                outputs,
                domain=node.domain,
                version=node.version,
                name=node.name,
                attrs=attrs,
                doc=node.doc,
            )
            new_node.meta = dict(node.meta)
            g.add_node(new_node)
        g.outputs = [mapped[id(v)] for v in self.outputs]
        return g

    # -- queries ----------------------------------------------------------
    def values(self) -> Iterator[Value]:
        """Every value defined in this graph (inputs, constants, node outputs)."""
        yield from self.inputs
        for v in self.initializers.values():
            if v not in self.inputs:
                yield v
        for n in self.nodes:
            for out in n.outputs:
                if out is not None:
                    yield out

    def walk(self) -> Iterator[Node]:
        """Every node of this graph and, recursively, of its subgraphs."""
        for n in self.nodes:
            yield n
            for g in n.subgraphs():
                yield from g.walk()

    def topological_sort(self) -> None:
        """Order nodes so every node follows the producers of its inputs (stable).

        Values from outer scopes and values produced inside subgraphs' bodies
        count as dependencies of the node that owns the subgraph.
        """
        import heapq

        nodes = self.nodes
        position = {id(n): i for i, n in enumerate(nodes)}
        users: list[list[int]] = [[] for _ in nodes]  # by position: the nodes waiting on this one
        remaining = [0] * len(nodes)  # by position: producers not yet placed
        for i, n in enumerate(nodes):
            needed: set[int] = set()
            for v in free_inputs(n) if _has_subgraphs(n) else n.inputs:
                if v is None:
                    continue
                p = v.producer
                if p is not None and p is not n:
                    j = position.get(id(p))
                    if j is not None and j not in needed:
                        needed.add(j)
                        users[j].append(i)
            remaining[i] = len(needed)
        ready = [i for i, count in enumerate(remaining) if count == 0]  # positions: heap order = stable
        heapq.heapify(ready)
        ordered: list[Node] = []
        while ready:
            i = heapq.heappop(ready)
            ordered.append(nodes[i])
            for u in users[i]:
                remaining[u] -= 1
                if remaining[u] == 0:
                    heapq.heappush(ready, u)
        if len(ordered) != len(nodes):
            stuck = [n.label for i, n in enumerate(nodes) if remaining[i] > 0][:5]
            raise GraphError(f"graph {self.name!r} has a cycle through {', '.join(stuck)}")
        self.nodes = ordered

    # -- builder ----------------------------------------------------------
    def const(self, array: ArrayLike, name: str = "const") -> Value:
        """Add a constant initializer holding ``array``."""
        return self.add_initializer(self.unique_name(name), Tensor.from_array(np.asarray(array)))

    def op(
        self,
        op: str,
        *inputs: Value | None,
        domain: str = "",
        version: int | None = None,
        outputs: int = 1,
        name: str = "",
        attrs: dict[str, Attr] | None = None,
        before: Node | None = None,
        **attr_values: Any,
    ) -> Value | list[Value]:
        """Append a node and return its output value (a list when ``outputs`` > 1).

        Keyword arguments become attributes, typed by :func:`infer_attr`.
        """
        node_name = self.unique_name(name or op)
        all_attrs = dict(attrs or {})
        for k, v in attr_values.items():
            all_attrs[k] = infer_attr(k, v)
        outs = [Value(self.unique_name(f"{node_name}_out{i}" if outputs > 1 else node_name)) for i in range(outputs)]
        node = Node(op, inputs, outs, domain=domain, version=version, name=node_name, attrs=all_attrs)
        self.add_node(node, before=before)
        return outs[0] if outputs == 1 else outs

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes)"


def _copy_subgraphs(attr: Attr, parent: Graph, outer: dict[int, Value]) -> Attr:
    """``attr`` with each graph it holds copied into ``parent``'s scope (other values are shared: never mutated)."""
    if isinstance(attr.value, Graph):
        return dataclasses.replace(attr, value=attr.value._copy(parent, outer))
    if isinstance(attr.value, list) and any(isinstance(x, Graph) for x in attr.value):
        return dataclasses.replace(
            attr, value=[x._copy(parent, outer) if isinstance(x, Graph) else x for x in attr.value]
        )
    return attr


def _has_subgraphs(node: Node) -> bool:
    return (
        any(a.type in ("graph", "graphs") or isinstance(a.value, Graph) for a in node.attrs.values())
        if node.attrs
        else False
    )


def _drop_use(uses: list[tuple[Node, int]], node: Node, i: int) -> None:
    """Remove the entry ``(node, i)`` from a value's use list, if there.

    The entry is usually the first or the last (rewrites visit nodes in order and re-wire the
    node they just touched): those are tried before a search, so that unlinking the thousands
    of readers of one shared constant stays linear.
    """
    if not uses:
        return
    last = uses[-1]
    if last[0] is node and last[1] == i:
        uses.pop()
        return
    first = uses[0]
    if first[0] is node and first[1] == i:
        del uses[0]
        return
    for k in range(len(uses) - 2, 0, -1):
        u = uses[k]
        if u[0] is node and u[1] == i:
            del uses[k]
            return


def free_inputs(node: Node) -> Iterator[Value]:
    """Inputs of ``node`` plus values its subgraphs read from outside themselves."""
    for v in node.inputs:
        if v is not None:
            yield v
    for g in node.subgraphs():
        yield from outer_references(g)


def outer_references(graph: Graph) -> list[Value]:
    """Values used inside ``graph`` (or its subgraphs) but defined outside it."""
    defined = {id(v) for v in graph.values()}
    seen: dict[int, Value] = {}
    for n in graph.nodes:
        for v in free_inputs(n):
            if id(v) not in defined:
                seen.setdefault(id(v), v)
    for v in graph.outputs:
        if id(v) not in defined:
            seen.setdefault(id(v), v)
    return list(seen.values())


_PY_ATTR_TYPES = [
    (bool, "int"),
    (int, "int"),
    (float, "float"),
    (str, "string"),
    (Tensor, "tensor"),
    (Graph, "graph"),
]


def infer_attr(name: str, value: Any) -> Attr:
    """Type a plain Python attribute value (used by the builder)."""
    if isinstance(value, Attr):
        return value
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    if isinstance(value, np.ndarray):
        return Attr(name, "tensor", Tensor.from_array(value))
    for py, kind in _PY_ATTR_TYPES:
        if isinstance(value, py):
            return Attr(name, kind, int(bool(value)) if py is bool else value)
    if isinstance(value, (list, tuple)):
        items = [v.item() if isinstance(v, (np.integer, np.floating)) else v for v in value]
        if all(isinstance(v, (int, bool)) for v in items):
            return Attr(name, "ints", [int(v) for v in items])
        if all(isinstance(v, (int, float)) for v in items):
            return Attr(name, "floats", [float(v) for v in items])
        if all(isinstance(v, str) for v in items):
            return Attr(name, "strings", list(items))
        if all(isinstance(v, Graph) for v in items):
            return Attr(name, "graphs", list(items))
        if all(isinstance(v, Tensor) for v in items):
            return Attr(name, "tensors", list(items))
    raise GraphError(f"cannot infer the attribute type of {name}={value!r}")


@dataclass
class Function:
    """A model-local function (ONNX FunctionProto): a named graph with attribute parameters."""

    name: str
    domain: str
    graph: Graph
    attributes: list[str] = field(default_factory=list)  # parameters without defaults
    attribute_defaults: dict[str, Attr] = field(default_factory=dict)
    opsets: dict[str, int] = field(default_factory=dict)
    overload: str = ""
    doc: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Model:
    """A graph plus what its dialect records around it.

    ``dialect`` is 'onnx', 'openvino' or 'hlo'; ``opsets`` maps domains to the
    operator-set version the graph uses (ONNX opset imports; ``{"opset1": 1}``
    for OpenVINO IR).  ``meta`` keeps format fields opconv does not interpret
    so that a load/save round trip is lossless.
    """

    graph: Graph
    dialect: str
    opsets: dict[str, int] = field(default_factory=dict)
    functions: list[Function] = field(default_factory=list)
    producer: str = ""
    producer_version: str = ""
    doc: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None  # the file it was loaded from, for messages

    def weight_bytes(self) -> int:
        total = 0
        stack = [self.graph] + [f.graph for f in self.functions]
        while stack:
            g = stack.pop()
            total += sum(v.const.nbytes for v in g.initializers.values() if v.const is not None)
            for n in g.nodes:
                for a in n.attrs.values():
                    if isinstance(a.value, Tensor):
                        total += a.value.nbytes
                stack.extend(n.subgraphs())
        return total

    def to_onnx(self, *, opset: int | None = None) -> onnx.ModelProto:
        """This model as an ``onnx.ModelProto`` (converted first unless ONNX; see :func:`opconv.to_onnx`)."""
        from .api import to_onnx

        return to_onnx(self, opset=opset)

    def to_openvino(self, *, input_shapes: InputShapes | None = None, dims: Dims | None = None) -> openvino.Model:
        """This model as an ``openvino.Model``, in memory (see :func:`opconv.to_openvino`)."""
        from .api import to_openvino

        return to_openvino(self, input_shapes=input_shapes, dims=dims)

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.graph.walk():
            key = f"{n.domain}::{n.op}" if n.domain and n.domain != "ai.onnx" else n.op
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Keep the cyclic garbage collector off while a graph is built (loaded, converted).

    Building a graph creates many small objects (nodes, values, attributes) that live
    on: the collector would walk the whole graph again and again for nothing (a fifth
    of a 1,000-node conversion, a third of a 20,000-node one).  What the work drops is
    collected later, as usual.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        to_old_generation()
        if collecting:
            gc.enable()


def to_old_generation() -> None:
    """File the objects just built with the long-lived ones.

    Left in the youngest generation, the hundreds of thousands of objects a big graph
    is made of would all be traversed by the first collection after the collector is back
    on, although most of them are the result, meant to live on.  (A freeze and unfreeze
    moves every tracked object to the oldest generation without visiting them.)  Skipped
    when the program froze objects itself, since ``gc.unfreeze`` would release those too.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
