"""The graph interpreter shared by the three reference executors.

A dialect supplies an :class:`OpRegistry` (kernels registered by op name and
the version they take effect at) and a *binder* that turns a node into a
:class:`BoundNode`: the kernel in force at the node's version plus its
attributes, decoded once (with schema defaults) into plain Python values.
:class:`Interpreter` compiles each graph once into a plan of bound nodes, runs
it on numpy values, frees every intermediate value after its last use, and
runs subgraphs (If/Loop/Scan bodies, TensorIterator bodies, HLO regions) for
kernels that ask through :class:`ExecContext`.

Kernel calling convention: ``kernel(ctx, *inputs, **attributes)`` returns one
value or a tuple/list of values, one per node output.  An omitted optional
input arrives as ``None``.  A kernel may write its result into input ``i``'s
buffer when ``ctx.owns(i)``: the value dies at this node and nothing else
(another value, a view, a folded constant, the caller's feeds) refers to it.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import re
import sys
import time
import zlib
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

import numpy as np

from . import budget
from .attributes import decode_attributes
from .errors import BudgetError, ExecutionError, OpconvError
from .ir import Graph, Model, Node, SparseTensor, Value, free_inputs, outer_references
from .schemas import dialect_schemas
from .types import Dim, SparseTensorType

Kernel = Callable[..., Any]


@dataclass(frozen=True)
class Registration:
    op: str
    domain: str
    since: int
    fn: Kernel
    deterministic: bool = True  # False for random ops: never folded, and drawn afresh every run


class OpRegistry:
    """Kernels of one dialect keyed by (domain, op), each valid from ``since`` up to the next registration."""

    def __init__(self, dialect: str):
        self.dialect = dialect
        self._by_op: dict[tuple[str, str], list[Registration]] = {}

    def register(
        self, op: str, since: int | Iterable[int] = 1, domain: str = "", *, deterministic: bool = True
    ) -> Callable[[Kernel], Kernel]:
        """Decorator: ``fn`` computes ``domain::op`` from version ``since`` (or each version in a list)."""
        versions = [since] if isinstance(since, int) else list(since)

        def wrap(fn: Kernel) -> Kernel:
            for v in versions:
                entries = self._by_op.setdefault((domain, op), [])
                if any(e.since == v for e in entries):
                    raise OpconvError(f"{self.dialect} kernel {domain}::{op} version {v} registered twice")
                entries.append(Registration(op, domain, v, fn, deterministic))
                entries.sort(key=lambda e: e.since)
            return fn

        return wrap

    def resolve(self, op: str, version: int | None, domain: str = "") -> Registration | None:
        """The registration in force at ``version``: the highest ``since`` <= version."""
        entries = self._by_op.get((domain, op))
        if not entries:
            return None
        if version is None:
            return entries[-1]
        i = bisect.bisect_right([e.since for e in entries], version)
        return entries[i - 1] if i else None

    def registrations(self) -> list[Registration]:
        return [e for key in sorted(self._by_op) for e in self._by_op[key]]


@dataclass
class BoundNode:
    """A node ready to run: its kernel and decoded attributes."""

    node: Node
    fn: Kernel
    attrs: dict[str, Any]
    label: str  # for error messages, e.g. "node 'conv1' (Conv-11)"
    deterministic: bool = False  # True lets the interpreter fold it when all its inputs are constant


Binder = Callable[[Node, "Interpreter"], BoundNode]


@dataclass
class _Plan:
    steps: list[BoundNode]
    inputs: list[list[int | None]]  # id() of each step's inputs (None: omitted), per step
    drops: list[list[int]]  # value ids no longer needed after each step
    donors: list[tuple[int, ...]]  # per step: input positions whose value dies there (see ExecContext.owns)
    foldable: list[bool]  # deterministic steps whose inputs are all constants
    overrides: list[frozenset[int]]  # per step: the overridable initializers (see _foldable) it reads, transitively
    overridable: frozenset[int]  # id() of the graph inputs that are also initializers
    folded: dict[int, Any] | None = None  # outputs of the foldable steps, computed on the first run and kept
    volatile: frozenset[int] = frozenset()  # folded values that a feed of an overridable initializer would change
    # id() of each step's outputs (None: output not used)
    outputs: list[tuple[int | None, ...]] = field(default_factory=list)
    declared: list[int] = field(default_factory=list)  # how many outputs each step's node declares
    # folded steps left out? -> the loop's per-step tuples
    _records: dict[str | bool, Any] = field(default_factory=dict)
    shape_cache: _ShapeCache | None = None  # the last feed shapes' shape computations (see _ShapeCache)

    def records(self, unfolded_only: bool) -> list[tuple[Any, ...]]:
        """What the run loop reads per step, one tuple each, made once: every step, or (``unfolded_only``)
        the steps a run after the first computes when it overrides no initializer (not the folded ones).
        A pass that rewrites the plan's lists in place calls :meth:`changed` (a new ``steps`` list is seen)."""
        if self._records.get("steps") is not self.steps:
            self._records = {"steps": self.steps}
            self.shape_cache = None
        cached: list[tuple[Any, ...]] | None = self._records.get(unfolded_only)
        if cached is None:
            cached = [
                (
                    index,
                    step,
                    step.fn,
                    step.attrs,
                    step.node,
                    ids,
                    None not in ids,
                    outs,
                    len(outs) == 1 and outs[0] is not None,
                    declared,
                    drop,
                    donors,
                )
                for index, (step, ids, outs, declared, drop, donors, foldable) in enumerate(
                    zip(self.steps, self.inputs, self.outputs, self.declared, self.drops, self.donors, self.foldable)
                )
                if not (unfolded_only and foldable)
            ]
            self._records[unfolded_only] = cached
        return cached

    def changed(self) -> None:
        """Forget the per-step tuples: ``steps``, ``inputs``, ``donors`` or ``foldable`` were rewritten."""
        self._records.clear()
        self.shape_cache = None

    def shape_steps(self, graph: Graph) -> list[str | None]:
        """Per step (after the first run): ``"shape"`` when it computes from constants and the feeds' shapes
        alone (a Shape or Size of a feed, and what computes from such values and constants), ``"guard"`` for
        a Shape or Size of another computed value (its input's shape is checked when a run skips the steps
        after it), else None.  Steps computing a graph output, reading a feedable initializer or running a
        subgraph are None."""
        cached = self._records.get("shape")
        if cached is None:
            constant = {vid for vid in self.folded or {} if vid not in self.volatile}
            constant.update(id(v) for v in graph.initializers.values() if id(v) not in self.overridable)
            feeds, returned = {id(v) for v in graph.inputs} - constant, {id(v) for v in graph.outputs}
            derived: set[int] = set()
            cached = []
            for step, ids, outs, foldable in zip(self.steps, self.inputs, self.outputs, self.foldable):
                present = [vid for vid in ids if vid is not None]
                kind = None
                if (
                    foldable
                    or not present
                    or not step.deterministic
                    or not returned.isdisjoint(outs)
                    or any(True for _ in step.node.subgraphs())
                ):
                    pass
                elif getattr(step.fn, "reads_shape_only", False):
                    if present[0] in feeds or present[0] in derived:
                        kind = "shape"
                    elif len(outs) == 1 and outs[0] is not None:
                        kind = "guard"
                elif all(vid in constant or vid in derived for vid in present) and not derived.isdisjoint(present):
                    kind = "shape"
                if kind is not None:
                    derived.update(vid for vid in outs if vid is not None)
                cached.append(kind)
            self._records["shape"] = cached
        return cached


def reads_shape_only(fn: Kernel) -> Kernel:
    """Decorator: ``fn``'s result depends on its first input's shape alone, not on its values (ONNX's Shape
    and Size).  A session computes the steps that follow from such results and constants once per feed
    shapes (see :class:`_ShapeCache`).  A kernel wrapping one (a fusion's) says so by the same attribute."""
    fn.reads_shape_only = True  # type: ignore[attr-defined]
    return fn


class _ShapeChanged(Exception):
    """A guarded Shape/Size input changed shape under the same feed shapes: the run starts again, uncached."""


def _shape_guard(ctx: ExecContext, data: Any, *, shape: tuple[int, ...], value: Any) -> Any:
    if np.shape(data) != shape:
        raise _ShapeChanged
    return value


#: the most a shape cache holds; exports' shape computations make vectors and masks of a few KiB
_SHAPE_CACHE_BYTES = 1 << 20


class _ShapeCache:
    """The values of a plan's shape steps (see :meth:`_Plan.shape_steps`) for one set of feed shapes and
    types, and the loop records of a run that loads them instead of computing them.

    An export computes shapes at run time (``Shape -> Gather -> Unsqueeze -> Concat -> Expand`` makes an
    LSTM's zero states, a transformer's mask sizes): the same values on every run with the same feed shapes.
    A Shape of a value computed at run time (whose shape might depend on values) stays a step that checks
    its input's shape and hands out the cached result; a mismatch reruns the graph without the cache.
    """

    def __init__(self, key: tuple[Any, ...], kinds: list[str | None]):
        self.key = key
        self.kinds = kinds
        self.values: dict[int, Any] = {}  # the outputs of the "shape" steps
        self.guards: dict[int, tuple[tuple[int, ...], Any]] = {}  # guard step index -> (its input's shape, its output)
        self.size = 0
        self.records: list[tuple[Any, ...]] | None = []

    def record(self, index: int, output_ids: tuple[int | None, ...], local: dict[int, Any], args: list[Any]) -> None:
        """Keep step ``index``'s outputs (and a guard's input shape), just computed."""
        for vid in output_ids:
            if vid is not None:
                value = local[vid]
                self.size += getattr(value, "nbytes", 0)
                if self.kinds[index] == "guard":
                    self.guards[index] = (np.shape(args[0]), value)
                else:
                    self.values[vid] = value

    def finish(self, records: list[tuple[Any, ...]]) -> _ShapeCache:
        """Make the records of a cached run: shape steps left out (their drops done by the next step run),
        guards checking and handing out their cached output.  Values too large to keep leave ``records``
        None: runs with these feed shapes compute everything, and record nothing."""
        if self.size > _SHAPE_CACHE_BYTES:
            self.values, self.guards, self.records = {}, {}, None
            return self
        carried: list[int] = []
        kept = []
        for record in records:
            index = record[0]
            kind = self.kinds[index]
            if kind == "shape":
                carried.extend(record[10])
                continue
            if kind == "guard":
                shape, value = self.guards[index]
                record = record[:2] + (functools.partial(_shape_guard, shape=shape, value=value), {}) + record[4:]
            if carried:
                record = record[:10] + (list(record[10]) + carried,) + record[11:]
                carried = []
            kept.append(record)
        self.records = kept
        return self


class ExecContext:
    """What a kernel may ask of the interpreter while it runs."""

    __slots__ = ("interpreter", "node", "env", "owned")

    def __init__(
        self, interpreter: Interpreter, node: Node | None, env: MutableMapping[int, Any], owned: tuple[int, ...] = ()
    ):
        self.interpreter = interpreter
        # None only until a run points the context at its first step: a kernel always sees its node.
        self.node = cast(Node, node)
        self.env = env
        self.owned = owned

    @property
    def num_outputs(self) -> int:
        return len(self.node.outputs)

    def owns(self, i: int) -> bool:
        """Whether the kernel may overwrite input ``i``'s array (and return it as a result)."""
        return i in self.owned

    @property
    def version(self) -> int | None:
        return self.node.version

    def output_used(self, i: int) -> bool:
        return i < len(self.node.outputs) and self.node.outputs[i] is not None

    def run_graph(self, graph: Graph, inputs: list[Any]) -> list[Any]:
        """Run a subgraph with ``inputs`` bound positionally; outer-scope values come from this node's scope."""
        return self.interpreter.run_graph(graph, inputs, outer=self.env)

    def rng(self, seed: float | None = None) -> np.random.Generator:
        """A generator that is deterministic: from the node's seed attribute, else from the run seed and node name."""
        if seed is not None:
            return np.random.default_rng(int(np.float32(seed).view(np.uint32)))
        salt = zlib.crc32((self.node.name or repr(self.node.outputs[0])).encode())
        return np.random.default_rng([self.interpreter.seed, salt])


class Interpreter:
    """Runs a graph with the kernels of one dialect."""

    def __init__(self, binder: Binder, *, seed: int = 0, options: dict[str, Any] | None = None):
        self.binder = binder
        self.seed = seed
        self.options = options or {}
        self._plans: dict[int, _Plan] = {}

    # -- compile ----------------------------------------------------------
    def plan(self, graph: Graph) -> _Plan:
        cached = self._plans.get(id(graph))
        if cached is not None:
            return cached
        steps = [self.binder(n, self) for n in graph.nodes]
        keep = {id(v) for v in graph.outputs}
        last_use: dict[int, int] = {}
        for i, n in enumerate(graph.nodes):
            for v in free_inputs(n):
                last_use[id(v)] = i
        defined_here = {id(v) for v in graph.values()}
        drops: list[list[int]] = [[] for _ in steps]
        for vid, i in last_use.items():
            if vid in defined_here and vid not in keep:
                drops[i].append(vid)
        foldable, overrides = _foldable(graph, steps)
        overridable = frozenset(id(v) for v in graph.inputs) & {id(v) for v in graph.initializers.values()}
        computed = {id(v) for n in graph.nodes for v in n.outputs if v is not None}
        donors: list[tuple[int, ...]] = []
        for step, drop in zip(steps, drops):
            ids = [id(v) if v is not None else None for v in step.node.inputs]
            # A value the node's subgraphs also read from outside (a Loop's `cond` read by its body) must stay
            # in the environment while the node runs, so it is no donor.
            read_inside = {id(v) for g in step.node.subgraphs() for v in outer_references(g)}
            donors.append(
                tuple(
                    i
                    for i, vid in enumerate(ids)
                    if vid in computed and vid in drop and ids.count(vid) == 1 and vid not in read_inside
                )
            )
        outputs = [tuple(None if v is None else id(v) for v in s.node.outputs) for s in steps]
        plan = _Plan(
            steps,
            [[id(v) if v is not None else None for v in s.node.inputs] for s in steps],
            drops,
            donors,
            foldable,
            overrides,
            overridable,
            outputs=outputs,
            declared=[sum(v is not None for v in ids) for ids in outputs],
        )
        self._plans[id(graph)] = plan
        return plan

    def fold(self, graph: Graph) -> None:
        """Compute ``graph``'s constant subgraphs now (a session does this when it is made)."""
        plan = self.plan(graph)
        if plan.folded is None:
            self.run_graph(graph, {}, fold_only=True)

    # -- run --------------------------------------------------------------
    # The per-node loop is one function on purpose: it is the executor's hot path, and a call per step for each
    # of its cases (folding, donation, size checks, error locations) costs measurable time on large models.
    def run_graph(
        self,
        graph: Graph,
        inputs: list[Any] | Mapping[str, Any],
        outer: MutableMapping[int, Any] | None = None,
        *,
        fold_only: bool = False,
    ) -> list[Any]:
        """Run ``graph``; ``inputs`` positional (subgraphs) or by name (top level)."""
        try:
            return self._run_graph(graph, inputs, outer, fold_only)
        except _ShapeChanged:  # a cached run's guard: computed shapes differ under the same feed shapes
            self.plan(graph).shape_cache = None
            return self._run_graph(graph, inputs, outer, fold_only, cache_shapes=False)

    def _run_graph(  # noqa: C901
        self,
        graph: Graph,
        inputs: list[Any] | Mapping[str, Any],
        outer: MutableMapping[int, Any] | None,
        fold_only: bool,
        cache_shapes: bool = True,
    ) -> list[Any]:
        plan = self.plan(graph)
        local: dict[int, Any] = {}
        env = ChainMap(local, outer) if outer is not None else local
        for v in graph.initializers.values():
            local[id(v)] = v.const.numpy()  # type: ignore[union-attr]  # an initializer holds a const
        if isinstance(inputs, Mapping):
            for v in graph.inputs:
                if v.name in inputs:
                    local[id(v)] = inputs[v.name]
            fed = [v for v in graph.inputs if v.name in inputs]
        else:
            if len(inputs) > len(graph.inputs):
                raise ExecutionError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(inputs)}")
            for v, data in zip(graph.inputs, inputs):
                local[id(v)] = data
            fed = graph.inputs[: len(inputs)]
        # Folded steps reading an initializer this run overrides are computed afresh.
        overridden = plan.overridable.intersection(id(v) for v in fed) if plan.overridable else frozenset()
        folded_before = plan.folded
        first_run = folded_before is None
        folding: dict[int, Any] = {}  # kept only if this first run succeeds
        foldable_now = plan.foldable
        if overridden:
            foldable_now = [f and not (o & overridden) for f, o in zip(plan.foldable, plan.overrides)]
        if folded_before is not None:
            local.update(folded_before)
        unfolded: set[int] = set()  # values of foldable steps over the folding budget: computed when run
        limit = budget.max_bytes()
        # After the first run, without an override, the folded steps are not even visited.
        skip_folded = not first_run and foldable_now is plan.foldable
        foldable = False
        records = plan.records(skip_folded)
        # The top graph's shape computations: loaded from the cache of these feed shapes, or recorded for it.
        recording = None
        if skip_folded and outer is None and isinstance(inputs, Mapping) and cache_shapes:
            key = tuple(
                (name, data.shape, data.dtype) if type(data) is np.ndarray else (name, id(data))
                for name, data in inputs.items()
            )
            cached = plan.shape_cache
            if cached is not None and cached.key == key:
                if cached.records is not None:
                    records = cached.records
                    local.update(cached.values)
            else:
                kinds = plan.shape_steps(graph)
                if any(kinds):
                    recording = _ShapeCache(key, kinds)
        # One context per run, pointed at each step in turn (kernels use it only while they run).
        ctx = ExecContext(self, None, env)
        for index, step, fn, attrs, node, input_ids, dense, output_ids, single, declared, drop, donors in records:
            if not skip_folded:
                foldable = foldable_now[index]
                if (foldable and not first_run) or (fold_only and not foldable):
                    continue
                if foldable and first_run and unfolded and not unfolded.isdisjoint(input_ids):
                    foldable_now, foldable = _not_folded(foldable_now, plan.foldable, index, step, unfolded), False
                    if fold_only:
                        continue
            try:
                args = (
                    [env[vid] for vid in input_ids]
                    if dense
                    else [None if vid is None else env[vid] for vid in input_ids]
                )
            except KeyError:
                args = [None if vid is None else _lookup(env, vid, step, graph) for vid in input_ids]
            if foldable and first_run and budget.too_large_to_fold(args):
                foldable_now, foldable = _not_folded(foldable_now, plan.foldable, index, step, unfolded), False
                if fold_only:
                    continue
            for a in args:  # logical sizes: a broadcast view of 10**12 elements takes no memory, but time
                if type(a) is np.ndarray and a.nbytes > limit:
                    _check_input_sizes(args, limit, step.label)
            a = None  # the loop variable would hold one more reference to an input the kernel may own
            owned = ()
            if donors and not foldable:
                for i in donors:  # dying values leave the environment now, so only `args` holds them
                    local.pop(input_ids[i], None)
                if len(donors) == 1:  # the common case, without a generator
                    owned = donors if _sole_reference(args, donors[0]) else ()
                else:
                    owned = tuple(i for i in donors if _sole_reference(args, i))
            ctx.node, ctx.owned = node, owned
            try:
                result = fn(ctx, *args, **attrs)
            except OpconvError as e:
                if e.where or type(e) not in (ExecutionError, BudgetError):
                    raise
                raise type(e)(e.message, where=step.label) from e
            except (
                ValueError,
                TypeError,
                IndexError,
                KeyError,
                ZeroDivisionError,
                OverflowError,
                AttributeError,
                StopIteration,
                FloatingPointError,
                np.linalg.LinAlgError,
                MemoryError,
            ) as e:
                raise ExecutionError(f"{type(e).__name__}: {e}", where=step.label) from e
            except RuntimeError as e:
                if not NUMPY_DIMENSION_LIMIT.search(str(e)):
                    raise
                raise ExecutionError(f"an array of more dimensions than numpy supports ({e})", where=step.label) from e
            if single and not foldable and type(result) is np.ndarray:  # the common case, in short
                local[output_ids[0]] = result
            else:
                outputs = as_outputs(result, node)
                if len(outputs) < declared:
                    raise ExecutionError(
                        f"kernel returned {len(outputs)} outputs, the node declares {len(node.outputs)}",
                        where=step.label,
                    )
                for vid, data in zip(output_ids, outputs):
                    if vid is not None:
                        local[vid] = data
                        if foldable:
                            folding[vid] = data
                del outputs
                data = None
            if recording is not None and recording.kinds[index]:
                recording.record(index, output_ids, local, args)
            for vid in drop:
                local.pop(vid, None)
            # Drop this frame's references too, or the next kernel could not own what it consumes.
            del result, args
        if first_run:
            plan.folded = folding
            plan.foldable = foldable_now  # a step not folded now (overridden input) is never skipped
            plan.changed()
            plan.volatile = frozenset(
                id(v)
                for step, f, o in zip(plan.steps, foldable_now, plan.overrides)
                if f and o
                for v in step.node.outputs
                if v is not None
            )
        if recording is not None:
            plan.shape_cache = recording.finish(records)
        if fold_only:
            return []
        return [_lookup(env, id(v), None, graph) for v in graph.outputs]


#: numpy's refusal of an array of too many dimensions: its broadcasting functions raise a RuntimeError ("this
#: function only supports up to 32 dimensions"), array constructors a ValueError (already an execution error)
NUMPY_DIMENSION_LIMIT = re.compile(r"supports up to \d+ dimensions|maximum supported dimension")


def _check_input_sizes(args: list[Any], limit: int, where: str) -> None:
    for a in args:
        if type(a) is np.ndarray and a.nbytes > limit:
            budget.check(a.shape, a.itemsize, "an input", where=where)


def _not_folded(
    foldable_now: list[bool], foldable: list[bool], index: int, step: BoundNode, unfolded: set[int]
) -> list[bool]:
    """Leave step ``index`` (over the folding budget, or reading such a step's values) for run time."""
    if foldable_now is foldable:
        foldable_now = list(foldable)
    foldable_now[index] = False
    unfolded.update(id(v) for v in step.node.outputs if v is not None)
    return foldable_now


def _foldable(graph: Graph, steps: list[BoundNode]) -> tuple[list[bool], list[frozenset[int]]]:
    """Which steps compute the same thing on every run: deterministic, no subgraph, constant inputs only.

    Light models, for instance, rebuild their weights with ConstantOfShape; like
    onnxruntime's session, the interpreter computes such subgraphs once.  An
    initializer that is also a graph input (every initializer is one in models
    before ONNX IR version 4) can be overridden by a feed: steps reading one
    are folded too, but each records which of them it depends on, so that a run
    feeding one recomputes them and the folded values handed out exclude them.
    """
    inputs = {id(v) for v in graph.inputs}
    depends: dict[int, frozenset[int]] = {
        id(v): frozenset((id(v),)) if id(v) in inputs else frozenset() for v in graph.initializers.values()
    }
    flags, overrides = [], []
    for step in steps:
        node = step.node
        ok = (
            step.deterministic
            and not any(True for _ in node.subgraphs())
            and all(v is None or id(v) in depends for v in node.inputs)
        )
        reads = frozenset().union(*(depends[id(v)] for v in node.inputs if v is not None)) if ok else frozenset()
        if ok:
            depends.update((id(v), reads) for v in node.outputs if v is not None)
        flags.append(ok)
        overrides.append(reads)
    return flags, overrides


def _list_refcount(items: list[Any], i: int) -> int:
    return sys.getrefcount(items[i])


def _base_refcount(view: np.ndarray) -> int:
    return sys.getrefcount(view.base)


# What these report for an object nothing else refers to (measured: the counts vary across Pythons).
_ONLY_IN_LIST = _list_refcount([object()], 0)
_ONLY_AS_BASE = _base_refcount(np.empty(2)[:1])


def _sole_reference(args: list[Any], i: int) -> bool:
    """Whether ``args[i]`` is a writable array that nothing but ``args`` refers to, nor to its memory.

    A view keeps a reference to its base, and a folded constant, a feed or another
    live value keeps one too, so reference counts rule all of them out.  A kernel's
    result is often a reshaped view of a temporary; that view is the temporary's
    only user when the temporary owns its memory and the view is all that refers to it.
    """
    a = args[i]
    # the count first: it rules out most values, and costs less than making the flags object
    if type(a) is not np.ndarray or _list_refcount(args, i) != _ONLY_IN_LIST + 1 or not a.flags.writeable:
        return False  # + 1: the local name `a`
    if a.base is None:
        return True
    return type(a.base) is np.ndarray and a.base.base is None and _base_refcount(a) == _ONLY_AS_BASE


def as_outputs(result: Any, node: Node) -> tuple[Any, ...]:
    """A kernel's result as one value per node output.

    A tuple always holds one value per output (a kernel may return all of an op's outputs even when the node
    declares fewer); a list is one sequence value, unless the node has several outputs.
    """
    if isinstance(result, tuple):
        return result
    if isinstance(result, list) and len(node.outputs) > 1:
        return tuple(result)
    return (result,)


def _lookup(env: Mapping[int, Any], vid: int, step: BoundNode | None, graph: Graph) -> Any:
    try:
        return env[vid]
    except KeyError:
        where = step.label if step else f"graph {graph.name!r}"
        name = next((v.name for v in _all_values(graph) if id(v) == vid), "?")
        raise ExecutionError(
            f"value {name!r} has not been computed (missing input or out-of-order graph)", where=where
        ) from None


def _all_values(graph: Graph) -> Iterator[Value]:
    yield from graph.values()
    for n in graph.nodes:
        yield from (v for v in n.inputs if v is not None)


@dataclass
class RunProfile:
    """One run's wall time, the part of it spent inside kernels, and how many steps ran."""

    seconds: float
    kernel_seconds: float
    steps: int

    @property
    def overhead_per_step(self) -> float:
        """Seconds per step spent outside kernels: the interpreter's own cost."""
        return (self.seconds - self.kernel_seconds) / self.steps if self.steps else 0.0


class _KernelTimer:
    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Kernel) -> Kernel:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        return timed


#: see _keep_freed_arrays_for_reuse: above ShuffleNet's largest temporary (its 2,400 faults per run go at
#: 3 MiB, and stay at 1,000 at 2 MiB), and small, because the heap then keeps up to twice it after a run:
#: 16 MiB cost light_zfnet512 and light_vgg19 1-2 MiB more peak memory per run, 4 MiB light_squeezenet 1.2 MiB.
_REUSE_THRESHOLD_BYTES = 3 << 20
_reuse_threshold_raised = False


def _keep_freed_arrays_for_reuse() -> None:
    """Free one untouched 3 MiB array, once per process, so that later runs reuse the memory earlier ones freed.

    glibc's malloc serves blocks above a threshold with fresh pages from the system, and gives the free
    top of its heap back above twice that threshold.  The threshold starts at 128 KiB and rises to the
    size of the largest such block freed; a model whose arrays are all about 1 MB (ShuffleNet) therefore
    pages its arrays in afresh on every run (2,400 page faults, a third of its run time), while one with
    larger arrays (ResNet-50) runs with none.  Freeing such a block raises the threshold the same way;
    no page of it is touched, and other allocators merely allocate and free it.
    """
    global _reuse_threshold_raised
    if not _reuse_threshold_raised:
        _reuse_threshold_raised = True
        np.empty(_REUSE_THRESHOLD_BYTES, dtype=np.uint8)  # freed at once: allocated and freed is all it takes


class Session:
    """A model prepared to run many times: kernels bound and constant subgraphs folded once,
    as a runtime's session does.  It reads the model as it is when made; make a new one after
    changing the model.  Each dialect's executor subclasses it with its binder."""

    def __init__(self, model: Model, binder: Binder, *, seed: int = 0):
        _keep_freed_arrays_for_reuse()
        self.model = model
        self._interpreter = Interpreter(binder, seed=seed)
        self._interpreter.fold(model.graph)  # binds every node now: errors surface before the first run
        self._checked: tuple[Any, ...] | None = None  # the names, types and shapes of the last feeds checked

    def folded_values(self) -> dict[int, Any]:
        """``id(value) -> data`` for every value of the top graph computed from constants alone
        (not from an initializer a feed could override)."""
        plan = self._interpreter.plan(self.model.graph)
        return {k: v for k, v in (plan.folded or {}).items() if k not in plan.volatile}

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Run on ``feeds`` (validated against the declared inputs); returns {output name: value}."""
        # Arrays of the names, types and shapes that passed the checks last time pass them again.
        signature = tuple(
            (name, data.dtype, data.shape) if type(data) is np.ndarray else None for name, data in feeds.items()
        )
        if signature != self._checked or None in signature:
            feeds = check_feeds(self.model.graph, feeds, where=self.model.path)
            self._checked = signature
        else:
            feeds = dict(feeds)
        outputs = self._interpreter.run_graph(self.model.graph, feeds)
        return {v.name: data for v, data in zip(self.model.graph.outputs, outputs)}

    def profile(self, feeds: Mapping[str, Any]) -> RunProfile:
        """Run once on ``feeds``, timing every step's kernel (a subgraph counts in its parent's kernel)."""
        plan = self._interpreter.plan(self.model.graph)
        timer = _KernelTimer()
        original = plan.steps
        plan.steps = [replace(step, fn=timer.wrap(step.fn)) for step in original]
        plan.changed()
        try:
            start = time.perf_counter()
            self.run(feeds)
            seconds = time.perf_counter() - start
        finally:
            plan.steps = original
            plan.changed()
        return RunProfile(seconds, timer.seconds, timer.calls)


class DialectExecutor:
    """What one dialect's reference executor is made of: a kernel registry, the dialect's schemas (which
    decode each node's attributes) and the passes that rewrite a bound plan (fusions).

    A dialect's executor module makes one and a :class:`DialectSession` subclass naming it.  The binder given
    here serves dialects whose operations have one version (OpenVINO opset1, HLO): the node's kernel, its
    attributes decoded from the schema.  ONNX, with versions and function bodies, overrides :meth:`binder`.
    """

    def __init__(
        self,
        dialect: str,
        title: str,
        *,
        domains: tuple[str, ...],
        kernels: str,
        noun: str = "node",
        strict_attributes: bool = True,
        fuse: Callable[[Graph, _Plan], None] | None = None,
    ):
        self.dialect = dialect
        self.title = title  # in messages: "opconv's OpenVINO executor has no kernel for ..."
        self.domain = domains[0]  # kernels register under the first spelling, nodes may carry any
        self.domains = domains
        self.registry = OpRegistry(dialect)
        self.kernels = kernels  # the package whose import registers the kernels (on first use)
        self.noun = noun  # what a node is called in messages: "layer 'conv1' (Convolution)"
        self.strict_attributes = strict_attributes  # see attributes.decode_attributes
        self.fuse = fuse
        self._loaded = False

    def load_kernels(self) -> None:
        if not self._loaded:
            importlib.import_module(self.kernels)
            self._loaded = True

    def label(self, node: Node) -> str:
        return f"{self.noun} {node.name!r} ({node.op})" if node.name else f"{node.op} {self.noun}"

    def binder(self, model: Model) -> Binder:
        """The binder of ``model``'s nodes (one per session: a dialect may bind per model)."""
        return self.bind

    def bind(self, node: Node, interp: Interpreter) -> BoundNode:
        """The kernel and decoded attributes of one node."""
        label = self.label(node)
        if node.domain not in self.domains:
            raise ExecutionError(
                f"domain {node.domain!r} is not part of the {self.title} dialect "
                f"({' or '.join(map(repr, self.domains))} only)",
                where=label,
            )
        reg = self.registry.resolve(node.op, 1, self.domain)
        if reg is None:
            raise ExecutionError(f"opconv's {self.title} executor has no kernel for {node.op}", where=label)
        schema = dialect_schemas(self.dialect).find(node.op, 1, self.domain)
        attrs = decode_attributes(schema, node.attrs, label, strict=self.strict_attributes)
        return BoundNode(node, reg.fn, attrs, label, reg.deterministic)


class DialectSession(Session):
    """A model of one dialect prepared to run many times; a subclass names its dialect's ``executor``.

    ``fuse=False`` keeps every node a step of its own (constant folding wants the unfused values)."""

    executor: ClassVar[DialectExecutor]

    def __init__(self, model: Model, *, seed: int = 0, fuse: bool = True) -> None:
        executor = self.executor
        executor.load_kernels()
        super().__init__(model, executor.binder(model), seed=seed)
        if fuse and executor.fuse is not None:
            executor.fuse(model.graph, self._interpreter.plan(model.graph))


@dataclass
class FeedCheck:
    """Symbolic dimension bindings seen while checking feeds (``batch`` -> 2)."""

    dims: dict[str, int] = field(default_factory=dict)


def check_feeds(graph: Graph, feeds: Mapping[str, Any], *, where: str | None = None) -> dict[str, Any]:
    """Validate user inputs against the graph's declared inputs; returns them by name.

    Unknown names, missing inputs, wrong element types, wrong ranks, static
    dims that differ and symbolic dims bound inconsistently are all errors
    that name the input.
    """
    from .types import TensorType, from_numpy

    declared = {v.name: v for v in graph.inputs}
    required = [v.name for v in graph.inputs if v.const is None]
    unknown = sorted(set(feeds) - set(declared))
    if unknown:
        raise ExecutionError(
            f"unknown input(s) {', '.join(map(repr, unknown))}; the model takes "
            f"{', '.join(map(repr, declared)) or 'no inputs'}",
            where=where,
        )
    missing = [n for n in required if n not in feeds]
    if missing:
        raise ExecutionError(f"missing input(s) {', '.join(map(repr, missing))}", where=where)
    bound = FeedCheck()
    out = {}
    for name, data in feeds.items():
        v: Value = declared[name]
        t = v.type
        if isinstance(t, TensorType):
            if not isinstance(data, np.ndarray):  # anything numpy reads: lists, scalars, torch tensors ...
                try:
                    data = np.asarray(data)
                except (TypeError, ValueError, RuntimeError) as e:
                    raise ExecutionError(
                        f"input {name!r} must be an array (anything numpy.asarray takes), "
                        f"got {type(data).__name__}: {e}",
                        where=where,
                    ) from None
                if data.dtype == object and t.dtype != "string":
                    raise ExecutionError(
                        f"input {name!r} must be an array of numbers, got {type(feeds[name]).__name__}", where=where
                    )
            got = from_numpy(data.dtype).name
            if t.dtype is not None and got != t.dtype:
                raise ExecutionError(f"input {name!r} expects {t.dtype}, got {got}", where=where)
            if t.shape is not None:
                _check_shape(name, t.shape, data.shape, bound, where)
        elif isinstance(t, SparseTensorType):
            _check_sparse_feed(name, t, data, bound, where)
        out[name] = data
    return out


def _check_sparse_feed(name: str, t: SparseTensorType, data: Any, bound: FeedCheck, where: str | None) -> None:
    """A ``sparse_tensor`` input takes an :class:`opconv.ir.SparseTensor` (``SparseTensor.from_coo``)."""
    if not isinstance(data, SparseTensor):
        raise ExecutionError(
            f"input {name!r} is a sparse tensor: feed an opconv.ir.SparseTensor "
            f"(SparseTensor.from_coo(values, indices, dims)), got {type(data).__name__}",
            where=where,
        )
    if t.dtype is not None and data.values.dtype != t.dtype:
        raise ExecutionError(f"input {name!r} expects sparse {t.dtype}, got {data.values.dtype}", where=where)
    nnz = data.values.shape[0] if data.values.shape else 0
    if data.indices.shape not in ((nnz,), (nnz, len(data.dims))):
        raise ExecutionError(
            f"input {name!r}: {nnz} values need indices of shape [{nnz}] or "
            f"[{nnz},{len(data.dims)}], got {list(data.indices.shape)}",
            where=where,
        )
    if t.shape is not None:
        _check_shape(name, t.shape, data.dims, bound, where)


def _check_shape(
    name: str, declared: tuple[Dim, ...], actual: tuple[int, ...], bound: FeedCheck, where: str | None
) -> None:
    if len(declared) != len(actual):
        raise ExecutionError(
            f"input {name!r} expects rank {len(declared)} ({_fmt(declared)}), got shape {list(actual)}", where=where
        )
    for axis, (d, a) in enumerate(zip(declared, actual)):
        if isinstance(d, int) and d != a:
            raise ExecutionError(
                f"input {name!r} expects shape {_fmt(declared)}, got {list(actual)} (axis {axis})", where=where
            )
        if isinstance(d, str):
            first = bound.dims.setdefault(d, a)
            if first != a:
                raise ExecutionError(
                    f"input {name!r}: dimension {d!r} is {a} here but {first} in another input", where=where
                )


def _fmt(shape: tuple[Dim, ...]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
