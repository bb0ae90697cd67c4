"""Graph-input shapes from what the caller gives: whole shapes per input (``input_shapes``) and values per
symbolic dim (``dims``), shared by the conversions and by ``run``/``verify``.

A shape given for one input binds the symbols of that input's declared dims (``input_ids`` declared
``[batch,seq]`` and given ``2,12`` binds ``batch=2`` and ``seq=12``), so every other input declared with the same
symbols gets them too; ``dims`` fixes a symbol everywhere.  What stays open is either an error naming every such
input (conversions) or a default (``run``/``verify`` take 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import OpconvError

#: a dim that nothing bound: an ``int`` once known, else the declared symbol (``str``) or ``None`` (unnamed)
Dim = int | str | None


def check_dim(value: Any, what: str) -> int:
    """``value`` as a static dim (a non-negative integer), or a one-line error naming ``what`` it is for."""
    if isinstance(value, bool) or not _is_integer(value) or int(value) < 0:
        raise OpconvError(
            f"{what}: {value!r} is not a static dim (a non-negative integer; -1 and ? are not "
            f"allowed: give the size the model is to run with)"
        )
    return int(value)


def _is_integer(value: Any) -> bool:
    try:
        return int(value) == value and not isinstance(value, str)
    except (TypeError, ValueError):
        return False


def parse_shape_option(text: str, option: str = "--input-shape") -> tuple[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` (``NAME=`` for a scalar) -> (name, dims); a bad dim is a one-line error."""
    name, eq, dims = text.rpartition("=")
    if not eq or not name:
        raise OpconvError(f"{option} {text!r} is not NAME=D0,D1,... (e.g. x=1,3,224,224)")
    parts = [d.strip() for d in dims.split(",")] if dims.strip() else []
    return name, tuple(check_dim(_int_or_text(d), f"{option} {text}") for d in parts)


def parse_dim_option(text: str) -> tuple[str, int]:
    """``SYMBOL=N`` -> (symbol, N)."""
    symbol, eq, value = text.partition("=")
    if not eq or not symbol.strip():
        raise OpconvError(f"--dim {text!r} is not SYMBOL=N (e.g. batch=1)")
    return symbol.strip(), check_dim(_int_or_text(value.strip()), f"--dim {text}")


def _int_or_text(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


class InputShapes:
    """The shape of every graph input once the caller's shapes and symbol values are bound.

    ``shapes[name]`` is a tuple of :data:`Dim` (``None`` for an input of unknown rank); ``symbols`` maps each
    bound symbol to its value.
    """

    def __init__(
        self,
        declared: Mapping[str, Sequence[Dim] | None],
        input_shapes: Mapping[str, Iterable] | None,
        dims: Mapping[str, Any] | None,
    ):
        given = {
            name: tuple(check_dim(d, f"the shape given for input {name!r}") for d in shape)
            for name, shape in (input_shapes or {}).items()
        }
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise OpconvError(
                f"a shape is given for unknown input(s) {', '.join(map(repr, unknown))}; the model "
                f"takes {', '.join(map(repr, declared)) or 'no inputs'}"
            )
        self.symbols = {str(s): check_dim(v, f"the value given for dim {s!r}") for s, v in (dims or {}).items()}
        declared_symbols = {d for shape in declared.values() for d in shape or () if isinstance(d, str)}
        stray = sorted(set(self.symbols) - declared_symbols)
        if stray:
            raise OpconvError(
                f"a size is given for dim(s) {', '.join(map(repr, stray))}, which no input declares; "
                f"the inputs' symbolic dims: {', '.join(sorted(declared_symbols)) or 'none'}"
            )
        for name, shape in given.items():
            self._bind(name, declared[name], shape)
        self.shapes: dict[str, tuple[Dim, ...] | None] = {}
        for name, shape in declared.items():
            if name in given:
                self.shapes[name] = given[name]
            elif shape is not None:
                self.shapes[name] = tuple(self.symbols.get(d, d) if isinstance(d, str) else d for d in shape)
            else:
                self.shapes[name] = None

    def _bind(self, name: str, declared: Sequence[Dim] | None, given: tuple[int, ...]) -> None:
        if declared is None:
            return
        if len(declared) != len(given):
            raise OpconvError(
                f"the shape given for input {name!r}, {format_shape(given)}, has rank {len(given)}; "
                f"the model declares rank {len(declared)} {format_shape(declared)}"
            )
        for d, g in zip(declared, given):
            if isinstance(d, int) and d != g:
                raise OpconvError(
                    f"the shape given for input {name!r}, {format_shape(given)}, does not fit the "
                    f"shape the model declares, {format_shape(declared)}"
                )
            if isinstance(d, str):
                bound = self.symbols.setdefault(d, g)
                if bound != g:
                    raise OpconvError(
                        f"the shape given for input {name!r}, {format_shape(given)}, makes {d}={g}, "
                        f"but {d} is already {bound} (from --dim or another input's shape)"
                    )

    def static(self, name: str) -> tuple[int, ...] | None:
        """The static shape of input ``name``, or None while a dim is open."""
        shape = self.shapes[name]
        dims = [d for d in shape if isinstance(d, int)] if shape is not None else []
        return tuple(dims) if shape is not None and len(dims) == len(shape) else None

    def unresolved(self) -> list[str]:
        return [name for name in self.shapes if self.static(name) is None]

    def hint(self, name: str) -> str:
        """``input_ids=<batch>,128``: the option that would fix input ``name``, with the dims already known."""
        shape = self.shapes[name]
        if shape is None:
            return f"{name}=D0,D1,..."
        return f"{name}=" + ",".join(str(d) if isinstance(d, int) else f"<{d or '?'}>" for d in shape)

    def with_defaults(self, default: int = 1) -> dict[str, tuple[int, ...]]:
        """Every input's shape with each open dim (a symbol: the same value everywhere) set to ``default``."""
        missing = [name for name, shape in self.shapes.items() if shape is None]
        if missing:
            raise OpconvError(
                f"input(s) {', '.join(map(repr, missing))} have unknown rank; give their shapes "
                f"(--input-shape NAME=D0,D1,... or input_shapes= in Python)"
            )
        return {
            name: tuple(
                d if isinstance(d, int) else self.symbols.get(d, default) if d is not None else default
                for d in shape or ()
            )
            for name, shape in self.shapes.items()
        }

    def require_static(self, target: str, where: str | None = None, error=OpconvError) -> None:
        """Raise one ``error`` naming every input still open, each with the option that would fix it."""
        names = self.unresolved()
        if not names:
            return
        symbols = sorted({d for n in names for d in (self.shapes[n] or ()) if isinstance(d, str)})
        covered: set = set()
        enough = []  # the fewest inputs whose shapes bind every open symbol (and fix every unnamed dim)
        for n in names:
            shape = self.shapes[n]
            if shape is None or None in shape or not covered.issuperset(d for d in shape if isinstance(d, str)):
                enough.append(n)
                covered.update(d for d in shape or () if isinstance(d, str))
        raise error(
            f"{target} needs static input shapes; unresolved: "
            + ", ".join(f"input {n!r} {format_shape(self.shapes[n])}" for n in names)
            + "; pass "
            + " ".join(f"--input-shape {self.hint(n)}" for n in enough)
            + (" or " + " ".join(f"--dim {s}=N" for s in symbols) if symbols else "")
            + " (input_shapes=/dims= in Python)",
            where=where,
        )


def format_shape(shape) -> str:
    """``[batch,3,?]``: a shape for messages."""
    return "[?]" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
