"""The HLO dialect: a readable text module format (``text``, files in ``io``), StableHLO export, the reference
executor (``executor``, ``ops``).

``.hlo`` files are HLO text modules (``docs/hlo-dialect.md``); ``.mlir`` is accepted on save only, for
StableHLO export (loading one gives a clear error).
"""

from .. import Dialect, register


def load(path, **options):
    from .io import load as _load

    return _load(path, **options)


def save(model, path, **options):
    from .io import save as _save

    return _save(model, path, **options)


def _sniff(head: bytes) -> bool:
    # An HLO text module starts with `HloModule`, possibly after blank lines and `//` comments.
    text = head.removeprefix(b"\xef\xbb\xbf")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(b"//"):
            return line.startswith(b"HloModule")
    return False


def _prepare(model, **options):
    from .executor import Session

    return Session(model, **options)


register(Dialect("hlo", (".hlo", ".mlir"), load, save, _sniff, prepare=_prepare))
