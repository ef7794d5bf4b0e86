"""The profiler's command line: ``roofline profile`` measures this machine, ``roofline plan``
re-plans a model from a saved profile without the device.

The ``roofline`` command (``roofline_cli``) hands the subcommands of :data:`COMMANDS` to
:func:`main`; run alone, ``python -m roofline_profiler.cli.commands profile ...`` does the same.

Exit codes: 0 success; 1 the device failed (one line on stderr, and the same line in the
``--compact`` file so a pod's termination message says why); 2 bad input (one line on stderr,
nothing written); 130 interrupted (Ctrl-C); 143 stopped by SIGTERM (one line on stderr and in the
``--compact`` file; no result file is left half written, ``termination.py``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from roofline_profiler.cli import arguments, model_cli, outputs
from roofline_profiler.cli.termination import TERMINATED_EXIT_CODE, Terminated, stop_on_sigterm
from roofline_profiler.core import limits
from roofline_profiler.core.engines import resolve_engine
from roofline_profiler.core.errors import UsageError, first_line

if TYPE_CHECKING:
    from roofline_profiler.measure.runner import ProfileRequest

PROG = "roofline"


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line instead of usage plus message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("roofline-operator")
    except PackageNotFoundError:
        return "unknown"


def add_measurement_arguments(p: argparse.ArgumentParser) -> None:
    """What ``roofline profile`` measures: devices, dtype, the decode weight, the batch sweep."""
    p.add_argument(
        "--device",
        default="all",
        help="all (default: every GPU, else the CPU), cuda (every GPU), cuda:N, mps or cpu",
    )
    p.add_argument(
        "--dtype",
        type=arguments.DTYPE,
        help=f"{', '.join(limits.DTYPE_NAMES)} (default: bfloat16 on GPUs "
        "that support it, else float16; float32 on the CPU)",
    )
    k, n = limits.DEFAULT_SHAPE
    p.add_argument(
        "--shape",
        type=arguments.SHAPE,
        default=limits.DEFAULT_SHAPE,
        metavar="KxN",
        help=f"decode weight KxN (default {k}x{n}, the Llama-3-8B FFN up-projection)",
    )
    p.add_argument(
        "--batches",
        type=arguments.BATCHES,
        default=limits.DEFAULT_BATCHES,
        metavar="B1,B2,...",
        help="comma-separated batch sizes to sweep, each in "
        f"{limits.MIN_BATCH}..{limits.MAX_BATCH} (default 1,2,4,...,512)",
    )
    p.add_argument(
        "--min-batch-efficiency",
        type=arguments.PERCENT,
        default=limits.DEFAULT_MIN_BATCH_EFFICIENCY_PERCENT,
        metavar="PERCENT",
        help="share of measured peak FLOP/s a batch must reach to be "
        "the recommended minimum (default %(default)s)",
    )
    p.add_argument(
        "--bandwidth",
        choices=("read", "copy"),
        default="read",
        help="which bandwidth is the roofline slope (default read: what decode does)",
    )
    p.add_argument("--quick", action="store_true", help="fewer repeats and shapes (tests, CI)")


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    add_measurement_arguments(p)
    arguments.add_output_arguments(p, document="full", plot="roofline", compact=True)
    model_cli.add_model_arguments(p)
    model_cli.add_models_json_arguments(p)


def build_parser() -> _Parser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help))
    return parser


class _Progress:
    """A one-line progress display on a terminal; silent when stderr is a pipe or a log."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K{message}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def profile_request(args: arguments.ProfileArguments) -> tuple[ProfileRequest, list[str]]:
    """What to measure, and on which devices in which dtype (each checked to be supported)."""
    from roofline_profiler.measure import devices as devmod
    from roofline_profiler.measure.model_runner import ModelRequest
    from roofline_profiler.measure.runner import ProfileRequest

    try:
        infos = devmod.resolve_devices(args.device)
        dtypes = [args.dtype or devmod.default_dtype(i) for i in infos]
        for info, dtype in zip(infos, dtypes, strict=True):
            devmod.check_dtype_supported(info, dtype)
    except devmod.DeviceError as exc:
        raise UsageError(str(exc)) from None
    if args.model_groups:
        for info in infos:
            resolve_engine(args.plan_options.engine, info.backend, str(info.device))
    k, n = args.shape
    request = ProfileRequest(
        devices=tuple(infos),
        k=k,
        n=n,
        batches=args.batches,
        min_batch_efficiency_percent=args.min_batch_efficiency_percent,
        bandwidth_kind=args.bandwidth_kind,
        quick=args.quick,
        models=tuple(
            ModelRequest(group.models, group.contexts, group.tensor_parallel, args.plan_options)
            for group in args.model_groups
        ),
        weight_formats=args.weight_formats,
    )
    return request, dtypes


#: What a profile stopped by SIGTERM reports, on stderr and in the ``--compact`` file.
TERMINATED_MESSAGE = f"{PROG}: terminated by SIGTERM: stopped measuring, no result written"


def run_profile_command(namespace: argparse.Namespace) -> int:
    """``roofline profile``: measure, then print the summary and write the files asked for.

    SIGTERM (a deleted pod) stops it at once: the ``--compact`` file then says so instead of
    holding a result, so a termination message never presents a half-written one.
    """
    args = arguments.profile_arguments(namespace)
    try:
        return _measure_and_write(args)
    except Terminated:
        outputs.write_failure(args.outputs, TERMINATED_MESSAGE)
        raise


def _measure_and_write(args: arguments.ProfileArguments) -> int:
    """Measure, report a device failure as one line, or print and write the result."""
    # torch is imported only now, so bad input is rejected at once.
    from roofline_profiler.measure.runner import DeviceFailure, run_profile

    request, dtypes = profile_request(args)
    progress = _Progress()
    try:
        result = run_profile(request, dtypes, progress)
    except DeviceFailure as exc:
        progress.done()
        message = f"{PROG}: device failure: {exc}"
        outputs.write_failure(args.outputs, message)
        print(message, file=sys.stderr)
        return 1
    progress.done()

    from roofline_profiler.cli.plot import roofline_figure
    from roofline_profiler.cli.report import text_summary

    slo = args.plan_options.itl_slo_seconds
    outputs.write_result(result, args.outputs, lambda planned: roofline_figure(planned, slo))
    sys.stdout.write(text_summary(result))
    sys.stdout.write(outputs.wrote(args.outputs))
    return 0


@dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, its flags, and what runs it (returning the exit code)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: The profiler's subcommands, in the order ``--help`` lists them; ``roofline_cli`` reads it.
COMMANDS: dict[str, Command] = {
    "profile": Command(
        "measure this machine's decode roofline", add_profile_arguments, run_profile_command
    ),
    "plan": Command(
        "re-plan a model from a saved profile, without the device",
        model_cli.add_plan_arguments,
        model_cli.run_plan_command,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with stop_on_sigterm():
            args = build_parser().parse_args(argv)
            return COMMANDS[args.command].run(args)
    except Terminated:
        print(TERMINATED_MESSAGE, file=sys.stderr)
        return TERMINATED_EXIT_CODE
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or an environment problem: still one line, never a trace
        print(f"{PROG}: error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
