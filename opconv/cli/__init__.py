"""The ``opconv`` command line: thin click commands over the Python API.

Every command turns an :class:`~opconv.errors.OpconvError` into one line on
stderr and the error's exit code; an unexpected exception is reported as an
internal error (set ``OPCONV_DEBUG=1`` to see its traceback).
"""

from __future__ import annotations

import os
import sys
import warnings

import click

from .. import __version__
from ..errors import OpconvError, one_line


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            # numpy's RuntimeWarnings ("Mean of empty slice" over a zero-size dim, overflow) describe IEEE
            # results that a command reports as values; printed, they would be a second line beside its output
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return super().invoke(ctx)
        except OpconvError as e:
            click.echo(f"opconv: error: {one_line(e)}", err=True)
            sys.exit(e.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("opconv: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:  # the reader of our output left (`opconv check m.onnx | head`): so do we
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except MemoryError:  # what no budget foresaw: still one line, and not called a bug
            if os.environ.get("OPCONV_DEBUG"):
                raise
            click.echo(
                "opconv: error: out of memory; a smaller --max-tensor-bytes refuses such tensors earlier", err=True
            )
            sys.exit(2)
        except Exception as e:  # a bug in opconv: say so in one line
            if os.environ.get("OPCONV_DEBUG"):
                raise
            click.echo(
                f"opconv: internal error: {type(e).__name__}: {one_line(e)} "
                "(a bug in opconv; rerun with OPCONV_DEBUG=1 for details)",
                err=True,
            )
            sys.exit(3)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="opconv")
@click.option(
    "--max-tensor-bytes",
    metavar="SIZE",
    help="Largest tensor, random input or weights file opconv makes (e.g. 16G; default 4G, or "
    "OPCONV_MAX_TENSOR_BYTES).",
)
def cli(max_tensor_bytes):
    """Convert neural-network models between ONNX, OpenVINO IR (opset1) and HLO,
    and prove each conversion numerically.

    \b
    Examples:
      opconv inspect model.onnx
      opconv check model.onnx
      opconv schema show onnx Conv --version 11
      opconv run model.onnx --inputs in.npz -o out.npz
      opconv verify model.onnx resaved.onnx --junit verify.xml

    Exit codes: 0 success, 1 a check or verification failed, 2 an input could
    not be read or a request could not be carried out, 3 internal error.
    """
    from ..budget import set_max_bytes

    set_max_bytes(max_tensor_bytes)


def main(argv=None) -> None:
    """The ``opconv`` program: run one command, then leave quickly."""
    _exit_without_final_collections()
    cli.main(args=argv, prog_name="opconv")


_registered = False


def _exit_without_final_collections() -> None:
    """Spare the interpreter its garbage collections at exit (30-70 ms after a conversion).

    When a Python process ends, its collector walks every object still alive (numpy's,
    protobuf's, the converted graph ...) several times while the modules are torn down,
    only to free memory the operating system takes back anyway.  The command line owns
    its process and closes every file it writes before returning, so at exit (atexit,
    after the command) the surviving objects are frozen, i.e. left out of those
    collections.  Other atexit handlers still run, and standard streams are flushed as
    usual; the Python API never does this (a library must not change how its caller's
    program ends).
    """
    global _registered
    if not _registered:
        import atexit
        import gc

        atexit.register(gc.freeze)
        _registered = True


# Command modules attach themselves to `cli` on import.
from . import convert_cmd, decompose_cmd, hlo_cmd, model_cmd, run_cmd, schema_cmd, version_cmd  # noqa: E402,F401
from .output import add_verbosity_options  # noqa: E402

add_verbosity_options(cli)  # -q/-v before the command's name or after it, on every command
