"""IREE as an independent oracle for the tests: the compiler and runtime wrappers of ``opconv.backends.iree``.

Compiling costs seconds per module and runs on one core, so tests gather many
functions into a few named modules (``module @part0 {...}``), compile them in
parallel once, and call each function by name.
"""

from opconv.backends.iree import COMPILE_FLAGS, IM2COL_FLAGS, IreeModule, compile_stablehlo

__all__ = ["COMPILE_FLAGS", "IM2COL_FLAGS", "IreeModule", "compile_stablehlo"]
