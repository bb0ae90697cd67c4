"""Arrays by name in ``.npz`` files: inputs and outputs of ``opconv run``, references of ``opconv verify``.

``numpy.savez`` writes such files and ``numpy.load`` reads them; opconv reads without pickle and writes atomically.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .atomic import write_file
from .errors import OpconvError


def read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file by name; strings come back as object arrays (opconv's string type)."""
    import zipfile  # here, not at the top: a conversion never needs it and a fresh process starts faster

    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        raise OpconvError("no such file", where=path) from None
    except OSError as e:
        raise OpconvError(f"cannot read: {e.strerror or e}", where=path) from None
    if magic == b"\x93NUMPY":
        raise OpconvError(
            "a .npy file holds one unnamed array; give inputs by name in an .npz file (numpy.savez(path, x=array))",
            where=path,
        )
    if not magic.startswith(b"PK"):
        raise OpconvError("not a numpy .npz file", where=path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise OpconvError(
                "holds pickled Python objects, which opconv does not load; save strings as numpy unicode arrays",
                where=path,
            ) from None
        raise OpconvError(f"not a valid numpy .npz file ({e})", where=path) from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise OpconvError(f"not a valid numpy .npz file ({e})", where=path) from None
    return {k: v.astype(object) if v.dtype.kind in "US" else v for k, v in arrays.items()}


def write_npz(path: str, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` as an .npz file atomically.

    Written entry by entry rather than with ``numpy.savez``, whose keyword arguments
    cannot hold every output name (``file``, for one); sequences are stored element
    by element as ``name[i]``, and empty optionals are left out.
    """
    import zipfile

    def write(f):
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
            for name, array in _flatten(arrays):
                if array.dtype == object:
                    array = array.astype(str)  # strings as unicode: readable without pickle
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)

    write_file(path, write, "wb")


def _flatten(arrays: dict[str, Any]):
    for name, value in arrays.items():
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                yield f"{name}[{i}]", np.asarray(item)
        elif value is not None:
            yield name, np.asarray(value)
