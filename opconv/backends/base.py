"""What every backend shares: the interface, the missing-runtime error and the lookup of values by name."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import OpconvError
from ..ir import Model, Value


class Backend:
    """Runs a model: ``run(model, feeds, extra_outputs=()) -> {name: ndarray}`` (see :mod:`opconv.backends`)."""

    #: the name of the backend (``--backend NAME``)
    name = ""
    #: the dialects of the models it runs
    dialects: tuple[str, ...] = ()
    #: given a path, it reads the model's own files (what a deployment reads), not opconv's reading of them
    reads_files = False

    def run(self, model: Any, feeds: Mapping[str, Any], extra_outputs: Iterable[str] = ()) -> dict[str, Any]:
        raise NotImplementedError

    def describe(self) -> str:
        """The backend as progress lines and reports name it (``openvino CPU f32``)."""
        return self.name

    def compute_precision(self) -> str | None:
        """The float type it computes in when narrower than the model's own (OpenVINO's bf16), else None."""
        return None

    def load(self, model: Any) -> Model:
        """``model`` loaded by opconv, refused with a one-line error when this backend cannot run its dialect."""
        import opconv

        loaded = opconv.load(model)
        if loaded.dialect not in self.dialects:
            from . import backends_for

            raise OpconvError(
                f"the {self.name} backend runs {' and '.join(self.dialects)} models, not "
                f"{loaded.dialect} (which {', '.join(backends_for(loaded.dialect))} run)",
                where=loaded.path,
            )
        return loaded


def import_runtime(module: str, extra: str, backend: str):
    """``import module``, or a one-line OpconvError saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise OpconvError(
            f"the {backend} backend needs {module.split('.')[0]}, which is not installed "
            f"({e.msg}): pip install 'opconv[{extra}]'"
        ) from None


def values_by_name(model: Model, names: Iterable[str]) -> list[Value]:
    """The values of ``model``'s top graph called ``names``, in that order; an unknown name is an error."""
    names = list(names)
    if not names:
        return []
    graph = model.graph
    known = {v.name: v for v in graph.inputs}
    known.update(graph.initializers)
    for node in graph.nodes:
        known.update((v.name, v) for v in node.outputs if v is not None)
    missing = [n for n in names if n not in known]
    if missing:
        raise OpconvError(f"no value called {', '.join(map(repr, missing))} in the model", where=model.path)
    return [known[n] for n in names]


def split_computed(values: list[Value], feeds: Mapping[str, Any]) -> tuple[dict[str, Any], list[Value]]:
    """({name: data} of the values no node computes: inputs from ``feeds``, constants from the model), and the
    values left for the runtime (which may not name a Parameter or a weight as a result)."""
    known, computed = {}, []
    for v in values:
        if v.producer is None and v.const is not None:
            known[v.name] = np.asarray(v.const.numpy())
        elif v.producer is None and v.name in feeds:
            known[v.name] = np.asarray(feeds[v.name])
        else:
            computed.append(v)
    return known, computed


def as_array(value: Any) -> Any:
    """A runtime's result as a numpy array (sequences and empty optionals pass through)."""
    return value if value is None or isinstance(value, (list, tuple)) else np.asarray(value)


@contextmanager
def with_outputs(model: Model, extra: list[Value]):
    """``model``'s top graph with ``extra`` appended to its outputs (once each) inside the block, restored after;
    yields the outputs in force."""
    graph = model.graph
    declared = list(graph.outputs)
    graph.outputs = declared + [v for v in dict.fromkeys(extra) if all(v is not d for d in declared)]
    try:
        yield list(graph.outputs)
    finally:
        graph.outputs = declared
