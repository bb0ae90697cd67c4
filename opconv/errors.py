"""The project's exception types.

Every error a user can cause (bad file, unknown op, impossible conversion) is an
``OpconvError``.  The CLI prints ``str(error)`` as one line and exits non-zero;
a traceback means a bug in opconv, not in the user's input.
"""

from __future__ import annotations

from typing import NamedTuple


class OpconvError(Exception):
    """Base class of every user-facing opconv error."""

    #: CLI exit code when this error ends a command.
    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class ModelReadError(OpconvError):
    """A model file could not be read: missing, malformed, hostile or unsupported."""


class ModelWriteError(OpconvError):
    """A model could not be written; nothing was left behind."""


class SchemaError(OpconvError):
    """A schema file is malformed, or an op/version is not in the schemas."""


class GraphError(OpconvError):
    """The in-memory graph is inconsistent (dangling value, cycle, duplicate name)."""


class ValidationError(OpconvError):
    """A model does not conform to its dialect's schemas."""

    exit_code = 1

    def __init__(self, problems: list, *, where: str | None = None):
        self.problems = list(problems)
        first = str(self.problems[0]) if self.problems else "invalid model"
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(first + more, where=where)


class MalformedModelError(ValidationError):
    """A model breaks its schemas where conversions and executors rely on them; refused before they run."""

    exit_code = 2  # not 1: a command's 1 says a check or a verification found a difference


class BudgetError(OpconvError):
    """Something would be larger than a size budget (:mod:`opconv.budget`); the message says which."""


class ExecutionError(OpconvError):
    """A reference executor could not run a model (bad inputs, unsupported op)."""


class RefusedNode(NamedTuple):
    """One node a conversion refused: its name (or label), op type, domain ("" for ai.onnx) and why."""

    node: str
    op: str
    domain: str
    reason: str

    def to_json(self) -> dict:
        return self._asdict()


class ConversionError(OpconvError):
    """A conversion is impossible; ``problems`` names every offending node, ``refused`` the same as
    :class:`RefusedNode` records (node, op, domain, reason) whatever the direction."""

    def __init__(self, message: str, problems: list | None = None, *, where: str | None = None):
        self.problems = list(problems or [])
        super().__init__(message, where=where)

    @property
    def refused(self) -> list[RefusedNode]:
        return [_refused_node(p) for p in self.problems]


def _refused_node(problem) -> RefusedNode:
    """A direction's own problem record as a :class:`RefusedNode`.

    The directions keep their own records (the version converter's carries the opsets a node needs, the
    rewrite engine's the node itself and every rule's reason); this reads the fields they share.
    """
    node = getattr(problem, "node", None)
    if isinstance(node, str):  # the version converter's Problem: node, op, domain, reason already
        return RefusedNode(node, problem.op, problem.domain, problem.reason)
    if node is not None:  # the rewrite engine's Unmatched: the graph node and each rule's reason
        specific = [r for r in problem.reasons if "pattern does not match" not in r] or problem.reasons
        return RefusedNode(node.name or problem.label, node.op, node.domain or "", "; ".join(specific) or "no rule")
    return RefusedNode("", "", "", str(problem))  # a graph-level reason (an input type, a decompose group)


class NotImplementedFeature(OpconvError):
    """A documented API whose implementation has not landed yet."""

    def __init__(self, feature: str):
        super().__init__(f"{feature} is not implemented yet in this version of opconv")


def one_line(error: BaseException) -> str:
    """An error's message on one line (a message listing several nodes may span lines; the CLI promises one)."""
    return " ".join(part.strip() for part in str(error).splitlines() if part.strip())
