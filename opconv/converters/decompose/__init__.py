"""``opconv decompose``: rewrite ONNX Runtime's contrib operators, and on request the ai.onnx composites, into
standard ai.onnx operators.

One ONNX-to-ONNX pass, used by the command, by ``opconv.decompose`` and at the start of ``onnx-to-ir`` /
``onnx-to-hlo`` (whose rules then only see standard operators); the version converter uses it when asked
(``decompose=True``).  The **composites** -- ai.onnx operators made of other ai.onnx operators (Attention,
RNN/GRU/LSTM, RotaryEmbedding, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: the ``onnx_*`` modules) --
are decomposed here once for every target: both converters call :func:`decompose_composites` on their static
copy (an RNN is unrolled over its static sequence length), ``opconv decompose --composites`` on request, and
the version converter's downgrade of such an op below its first version calls the same functions.
Each family module registers its decompositions by (domain, op, since version) beside
their code (:mod:`.registry`, on the lowering registry's route ("onnx", "standard"); the package imports
every module with ``lowering.discover``); the emitted nodes are of the model's ai.onnx opset, and a node that cannot be
expressed at that opset is refused with the reason, never silently moved to another opset.
See ``docs/decompose.md``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ...errors import ConversionError, SchemaError
from ...ir import Graph, Model, Node
from ...schemas import lookup as schema_lookup
from ...validation import require_valid
from .. import lowering
from ..rewrite import MALFORMED
from . import nchwc
from .registry import COMPOSITES, DROPPABLE, MS, Emitter, Refusal, decompositions, lookup, registered

lowering.discover(__name__)  # every module registers its decompositions beside its code

__all__ = [
    "decompose",
    "decompose_contrib",
    "decompose_composites",
    "decompositions",
    "has_contrib",
    "is_composite",
    "replace_in_step",
]

#: the domains decomposed by default
DEFAULT_DOMAINS = (MS, nchwc.NCHWC)


#: what ``_decomposition_of`` answers for a node the pass leaves as it is
_STANDARD = object()


def _domain(node) -> str:
    return "" if node.domain == "ai.onnx" else node.domain


def _is_candidate(node, wanted: set[str]) -> bool:
    """A node of a wanted domain, or an ai.onnx node whose op onnxruntime also defines in that domain."""
    domain = _domain(node)
    return domain in wanted or (domain == "" and (domain, node.op) not in COMPOSITES and registered(domain, node.op))


def has_contrib(model: Model, domains: Iterable[str] = DEFAULT_DOMAINS) -> bool:
    """Whether ``model`` has a node the pass would rewrite."""
    wanted = set(domains)
    opsets = model.opsets
    for node in model.graph.walk():
        if _is_candidate(node, wanted) and _decomposition_of(node, opsets) is not _STANDARD:
            return True
    return False


def _decomposition_of(node, opsets: dict):
    """The decomposition in force for ``node``; ``_STANDARD`` for an ai.onnx op ONNX itself defines at that
    version; None for a contrib op without one."""
    domain = _domain(node)
    version = node.version or (opsets.get("", opsets.get("ai.onnx", 1)) if domain == "" else opsets.get(domain, 1))
    found = lookup(domain, node.op, version)
    return _STANDARD if found is None and domain == "" else found


def decompose(
    model, domains: Iterable[str] = DEFAULT_DOMAINS, *, strict: bool = True, composites: bool = False
) -> Model:
    """A copy of ``model`` with every node of ``domains`` (and onnxruntime's ai.onnx-domain contrib
    operators) rewritten into standard ai.onnx operators at the model's opset; with ``composites``, the ai.onnx
    composites too (Attention, RNN/GRU/LSTM unrolled, RotaryEmbedding, the losses: see ``COMPOSITES``),
    which need static shapes for some forms (an RNN's sequence length).

    Raises :class:`ConversionError` listing every node that cannot be decomposed, one entry per reason with
    the count and the node names (with ``strict=False`` such nodes stay as they are); ``model`` (a path,
    ModelProto or Model) is never modified.
    """
    import opconv

    from ...dialects.onnx import io

    source = opconv.load(model, "onnx") if not isinstance(model, Model) else model
    if source.dialect != "onnx":
        raise ConversionError(f"decomposition needs an ONNX model, not {source.dialect}", where=source.path)
    require_valid(source)
    copy = io.load(io.to_proto(source))
    copy.path = source.path
    if composites:  # they read their inputs' shapes
        from ..static_inputs import with_inferred_types

        copy = with_inferred_types(copy)
    wanted = set(domains)
    refused = _decompose_model(copy, lambda node: _is_candidate(node, wanted) or (composites and is_composite(node)))
    if refused and strict:
        _refuse(refused, source.path)
    remaining = {_domain(n) for n in copy.graph.walk()}
    for domain in wanted:
        if domain not in remaining:
            copy.opsets.pop(domain, None)
    return copy


def is_composite(node) -> bool:
    """Whether ``node`` is an ai.onnx composite the pass decomposes on request."""
    return (_domain(node), node.op) in COMPOSITES


def decompose_composites(model: Model) -> bool:
    """Decompose the ai.onnx composites of ``model`` in place (a converter's private copy, its shapes static):
    whether there were any.  Raises :class:`ConversionError` with the reasons of the nodes it cannot decompose
    (no target has another form of them)."""
    if not any(is_composite(node) for node in model.graph.walk()):
        return False
    refused = _decompose_model(model, is_composite)
    if refused:
        _refuse(refused, model.path)
    return True


def _decompose_model(model: Model, is_candidate) -> dict[str, list[str]]:
    """Decompose the candidate nodes of ``model`` in place; the refused ones by reason."""
    refused: dict[str, list[str]] = defaultdict(list)
    opset = model.opsets.get("", model.opsets.get("ai.onnx", 1))
    _decompose_graph(model.graph, model.opsets, opset, is_candidate, refused)
    _drop_unread_droppable(model.graph)
    return refused


def _refuse(refused: dict[str, list[str]], where) -> None:
    lines = [
        f"{len(names)} node(s): {reason}: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"
        for reason, names in refused.items()
    ]
    total = sum(len(n) for n in refused.values())
    raise ConversionError(
        f"{total} node(s) cannot be decomposed into standard operators: " + " | ".join(lines),
        [f"{r}: {', '.join(n)}" for r, n in refused.items()],
        where=where,
    )


def decompose_contrib(model: Model) -> Model:
    """The hook the converters call first: ``model`` itself when it has no contrib node, else its decomposition.

    A node the pass cannot decompose stays for the direction's own rules (a MatMulNBits with float zero points
    has an HLO form), which refuse it with their reason if they cannot map it either."""
    return decompose(model, strict=False) if has_contrib(model) else model


def _decompose_graph(graph: Graph, opsets: dict, opset: int, is_candidate, refused: dict) -> None:
    """Rewrite ``graph`` (and its subgraphs) in place; the replacement nodes take the place of the node they
    replace.  Refused nodes stay, and are recorded under their reason."""
    original = graph.nodes
    graph.nodes = []
    for node in original:
        for sub in node.subgraphs():
            _decompose_graph(sub, opsets, opset, is_candidate, refused)
        if not is_candidate(node):
            graph.nodes.append(node)
            continue
        fn = _decomposition_of(node, opsets)
        if fn is _STANDARD:
            graph.nodes.append(node)
            continue
        label = node.name or f"{node.op}->{next((v.name for v in node.outputs if v is not None), '?')}"
        if fn is None:
            refused[f"no decomposition of {node.domain or 'ai.onnx'}::{node.op}"].append(label)
            graph.nodes.append(node)
            continue
        emitter = Emitter(graph, node, opset, _defaults(node))
        try:
            try:
                results = fn(emitter)
                _bind_outputs(emitter, node, results)
            except MALFORMED as e:  # a rank, attribute or operand count a valid node would have: malformed
                raise Refusal(f"cannot take this node ({type(e).__name__}: {e})") from None
        except Refusal as why:
            for emitted in emitter.nodes:
                emitted.detach()  # the inputs forget the nodes that will not be used
            refused[f"{node.op}: {why}"].append(label)
            graph.nodes.append(node)
            continue
        for value in emitter.constants:
            graph.initializers[value.name] = value
        graph.nodes.extend(emitter.nodes)
        for node_added in emitter.nodes:
            node_added.graph = graph
        _drop_unread_constants(graph, node)
    graph.topological_sort()  # onnxruntime's float16 converter leaves graphs unsorted, which ONNX forbids


def _defaults(node) -> dict:
    """The attribute defaults of ``node``'s schema (none for a schema-less node)."""
    try:
        schema = schema_lookup("onnx", node.op, node.version or 1, _domain(node))
    except SchemaError:
        return {}
    return {a.name: a.default for a in schema.attributes if a.default is not None}


def replace_in_step(ctx, node, decomposition) -> None:
    """Let ``decomposition`` (a function of an :class:`Emitter`) replace ``node`` in a version converter step
    (``ctx``, its nodes at the step's opset): a downgrade below an op's first version is the op's decomposition,
    so that each formula exists once.  Raises the step's ``Refuse`` with the decomposition's reason."""
    from ..rewrite import Refuse

    for value in node.inputs:  # the decompositions read their inputs' types
        if value is not None and value.type is None:
            value.type = ctx.converter.type_of(value)
    e = Emitter(ctx.graph, node, ctx.version, _defaults(node))
    try:
        results = decomposition(e)
    except Refusal as why:
        for emitted in e.nodes:
            emitted.detach()
        raise Refuse(str(why)) from None
    _type_emitted(e, ctx.version)  # later steps (a Mul taken below opset 7) read the types of what it made
    placed = {}
    for value in e.constants:  # through the step's constants (a function body has Constant nodes instead)
        placed[id(value)] = made = ctx.const(value.const.numpy(), "const")
        value.replace_all_uses_with(made)
    for emitted in e.nodes:
        ctx.graph.nodes.append(emitted)
        emitted.graph = ctx.graph
        ctx.created.append(emitted)
    ctx.converter.changed.add(ctx.graph)
    ctx.replace(node, [None if v is None else placed.get(id(v), v) for v in results])


def _type_emitted(e: Emitter, opset: int) -> None:
    """Give the values ``e`` emitted their types by ONNX shape inference over the emitted nodes alone."""
    from ...dialects.onnx import io
    from ...dialects.onnx.proto import infer_shapes, inference_failures

    sub = Graph("decomposition")
    sub.nodes = list(e.nodes)  # a view for the protobuf: the nodes stay in their graph
    made = {id(v) for n in e.nodes for v in n.outputs if v is not None}
    read = {id(v): v for n in e.nodes for v in n.inputs if v is not None and id(v) not in made}
    sub.inputs = [v for v in read.values() if v.const is None]
    sub.initializers = {v.name: v for v in list(read.values()) + e.constants if v.const is not None}
    sub.outputs = [v for n in e.nodes for v in n.outputs if v is not None]
    try:
        inferred = io.load(infer_shapes(io.to_proto(Model(sub, "onnx", {"": opset})), data_prop=True))
    except inference_failures():  # types are a help to the later steps, which refuse without them
        return
    types = {v.name: v.type for v in inferred.graph.outputs}
    for value in sub.outputs:
        if value.type is None and types.get(value.name) is not None:
            value.type = types[value.name]


def _drop_unread_droppable(graph: Graph) -> None:
    """Remove the emitted nodes marked droppable (``registry.DROPPABLE``) that nothing reads, and the constants
    only they read; consumers first, so whole chains go."""
    for node in graph.nodes:
        for sub in node.subgraphs():
            _drop_unread_droppable(sub)
    outputs = {id(v) for v in graph.outputs}
    for node in reversed(list(graph.nodes)):
        if not node.meta.get(DROPPABLE) or any(v is not None and (v.uses or id(v) in outputs) for v in node.outputs):
            continue
        graph.remove_node(node)
        _drop_unread_constants(graph, node)


def _drop_unread_constants(graph: Graph, replaced) -> None:
    """Drop the initializers only ``replaced`` read (a quantized weight its decomposition turned into a float one
    at decomposition time), so that the result does not carry both."""
    kept = {id(v) for v in graph.inputs} | {id(v) for v in graph.outputs}
    for value in replaced.inputs:
        if (
            value is not None
            and not value.uses
            and id(value) not in kept
            and graph.initializers.get(value.name) is value
        ):
            del graph.initializers[value.name]


def _bind_outputs(e: Emitter, node, results: list) -> None:
    """Make the emitted values carry the contrib node's output names (so consumers and graph outputs keep them)."""
    results = list(results) + [None] * (len(node.outputs) - len(results))
    graph_outputs = {id(v) for v in e.graph.outputs}
    for i, original in enumerate(node.outputs):
        if original is None or not original.name or results[i] is not None:
            continue
        if original.uses or id(original) in graph_outputs:
            raise Refusal(f"output {i} ({original.name!r}) has no decomposition")
        node.outputs[i] = None  # declared but read by nothing: dropped
    own = {id(n) for n in e.nodes}
    node.detach()
    renamed: dict[int, object] = {}  # id(emitted value) -> the original value that took its place
    for original, new in zip(node.outputs, results):
        if original is None or not original.name:
            continue
        original.producer = None
        if original.type is None or (original.shape is None and new.shape is not None):
            original.type = new.type  # what the decomposition knows of it (later decompositions read it)
        producer = new.producer
        if id(new) not in renamed and producer is not None and id(producer) in own:
            producer.outputs[new.index] = original
            original.producer, original.index = producer, new.index
            for user, j in list(new.uses):
                user.set_input(j, original)
            renamed[id(new)] = original
        else:  # a graph input, a constant, or a value already bound to another output: copy it
            source = renamed.get(id(new), new)
            e.nodes.append(
                Node(
                    "Identity",
                    [source],
                    [original],
                    version=e.opset,
                    name=e.graph.unique_name(f"{original.name}/Identity"),
                )
            )
    node.outputs = []
