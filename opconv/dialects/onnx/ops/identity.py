"""Identity and friends: ops that forward their input (the template for op modules).

Conventions for every op module:
  * one function per version range, named ``<op>_<since>``, registered with ``@onnx_op(op, since=...)``;
    list several versions when their meaning is the same (e.g. only the type set grew);
  * the first argument is the ExecContext, then the inputs in order (None when omitted),
    then the schema's attributes as keyword-only arguments (defaults already applied);
  * numerics come from :mod:`opconv.kernels`; a module adds only ONNX's conventions.
"""

from __future__ import annotations

from ..executor import onnx_op


@onnx_op("Identity", since=[1, 13, 14, 16, 19, 21, 23, 24, 25])
def identity(ctx, x):
    return x
