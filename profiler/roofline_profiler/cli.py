"""The ``roofline`` command: ``roofline profile`` measures this machine, ``roofline plan``
re-plans a model from a saved profile, ``roofline operator`` runs the Kubernetes operator.

Exit codes: 0 success; 1 the device failed (one line on stderr, and the same line in the
``--compact`` file so a pod's termination message says why); 2 bad input (one line on stderr,
nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from roofline_profiler import model_cli
from roofline_profiler.recommend import DEFAULT_MIN_EFFICIENCY
from roofline_profiler.roofline import DEFAULT_BATCHES, DEFAULT_SHAPE

PROG = "roofline"
SHAPE_PATTERN = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")
MAX_DIMENSION = 1 << 20
MAX_BATCH = 1 << 16


class UsageError(Exception):
    """Bad input: reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line instead of usage plus message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_shape(text: str) -> tuple[int, int]:
    match = SHAPE_PATTERN.match(text)
    if not match:
        raise UsageError(f"--shape {text!r} is not of the form KxN (e.g. 4096x14336)")
    k, n = int(match.group(1)), int(match.group(2))
    if not (1 <= k <= MAX_DIMENSION and 1 <= n <= MAX_DIMENSION):
        raise UsageError(f"--shape {text!r}: K and N must lie in 1..{MAX_DIMENSION}")
    return k, n


def parse_batches(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise UsageError(f"--batches {text!r} must be a comma-separated list of positive integers")
    batches = []
    for part in parts:
        try:
            value = int(part)
        except ValueError:
            raise UsageError(f"--batches: {part!r} is not an integer") from None
        if not 1 <= value <= MAX_BATCH:
            raise UsageError(f"--batches: {value} is not a batch size in 1..{MAX_BATCH}")
        batches.append(value)
    return tuple(sorted(set(batches)))


def parse_percent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"--min-batch-efficiency {text!r} is not an integer percent") from None
    if not 1 <= value <= 100:
        raise UsageError(f"--min-batch-efficiency {value} must lie in 1..100")
    return value


def _output_path(text: str | None, flag: str) -> Path | None:
    if text is None:
        return None
    path = Path(text)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {text}: directory {parent} does not exist")
    if path.is_dir():
        raise UsageError(f"{flag} {text} is a directory")
    return path


def build_parser() -> _Parser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(
        dest="command", metavar="{profile,plan,operator}", parser_class=_Parser
    )
    sub.required = True
    p = sub.add_parser("profile", help="measure this machine's decode roofline")
    p.add_argument(
        "--device",
        default="all",
        help="all (default: every GPU, else the CPU), cuda (every GPU), cuda:N, mps or cpu",
    )
    p.add_argument(
        "--dtype",
        help="float32, float16 or bfloat16 (default: bfloat16 on GPUs "
        "that support it, else float16; float32 on the CPU)",
    )
    p.add_argument(
        "--shape",
        default=f"{DEFAULT_SHAPE[0]}x{DEFAULT_SHAPE[1]}",
        help="decode weight KxN (default 4096x14336, the Llama-3-8B FFN up-projection)",
    )
    p.add_argument(
        "--batches",
        default=",".join(str(b) for b in DEFAULT_BATCHES),
        help="comma-separated batch sizes to sweep (default 1,2,4,...,512)",
    )
    p.add_argument(
        "--min-batch-efficiency",
        default=str(round(DEFAULT_MIN_EFFICIENCY * 100)),
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
    p.add_argument("--json", metavar="PATH", help="write the full result document")
    p.add_argument("--markdown", metavar="PATH", help="write a Markdown report")
    p.add_argument("--plot", metavar="PATH.png", help="write the roofline plot")
    p.add_argument(
        "--compact",
        metavar="PATH",
        help="write the compact (<= 4096 bytes) result, e.g. /dev/termination-log in a pod",
    )
    model_cli.add_model_arguments(p)
    plan = sub.add_parser("plan", help="re-plan a model from a saved profile, without the device")
    plan.add_argument("--from", dest="source", required=True, metavar="RESULT.json")
    model_cli.add_model_arguments(plan, plan=True)
    plan.add_argument("--json", metavar="PATH", help="write the re-planned result document")
    plan.add_argument("--markdown", metavar="PATH", help="write a Markdown report")
    plan.add_argument("--plot", metavar="PATH.png", help="write the model plan plot")
    sub.add_parser(
        "operator",
        help="run the Kubernetes operator (see roofline operator --help)",
        add_help=False,
    )
    return parser


def _write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a failure never leaves half a result."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_plain(path: Path, text: str) -> None:
    """Special files such as /dev/termination-log cannot be renamed over: write in place."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


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


def run_profile_command(args: argparse.Namespace) -> int:
    k, n = parse_shape(args.shape)
    batches = parse_batches(args.batches)
    percent = parse_percent(args.min_batch_efficiency)
    outputs = {
        flag: _output_path(getattr(args, flag.lstrip("-")), flag)
        for flag in ("--json", "--markdown", "--plot", "--compact")
    }
    if outputs["--plot"] is not None and outputs["--plot"].suffix.lower() != ".png":
        raise UsageError(f"--plot {args.plot}: the plot is written as PNG, name it *.png")
    tensor_parallel = model_cli.parse_tensor_parallel(args.tensor_parallel)
    archs = model_cli.load_models(args.model, tensor_parallel)
    contexts = model_cli.parse_contexts(args.context, (model_cli.DEFAULT_CONTEXT,))
    plan_options = model_cli.parse_plan_options(args, percent)

    # torch is imported only now, so bad input is rejected at once.
    from roofline_profiler import devices as devmod
    from roofline_profiler.model_runner import ModelRequest
    from roofline_profiler.runner import DeviceFailure, ProfileRequest, run_profile

    try:
        infos = devmod.resolve_devices(args.device)
        dtypes = [
            devmod.canonical_dtype(args.dtype) if args.dtype else devmod.default_dtype(i)
            for i in infos
        ]
        for info, dtype in zip(infos, dtypes, strict=True):
            devmod.check_dtype_supported(info, dtype)
    except devmod.DeviceError as exc:
        raise UsageError(str(exc)) from None

    request = ProfileRequest(
        devices=tuple(infos),
        k=k,
        n=n,
        batches=batches,
        min_batch_efficiency_percent=percent,
        bandwidth_kind=args.bandwidth,
        quick=args.quick,
        models=ModelRequest(archs, contexts, tensor_parallel, plan_options) if archs else None,
    )
    progress = _Progress()
    try:
        result = run_profile(request, dtypes, progress)
    except DeviceFailure as exc:
        progress.done()
        message = f"{PROG}: device failure: {exc}"
        if outputs["--compact"] is not None:
            _write_plain(outputs["--compact"], message[:4000])
        print(message, file=sys.stderr)
        return 1
    progress.done()

    from roofline_profiler.compact import encode_compact
    from roofline_profiler.report import markdown_report, text_summary

    if outputs["--json"] is not None:
        document = json.dumps(result.to_dict(), indent=2) + "\n"
        _write_atomic(outputs["--json"], document.encode())
    if outputs["--markdown"] is not None:
        _write_atomic(outputs["--markdown"], markdown_report(result).encode())
    if outputs["--plot"] is not None:
        from roofline_profiler.plot import write_plot

        write_plot(result, outputs["--plot"], plan_options.itl_slo_seconds)
    if outputs["--compact"] is not None:
        _write_plain(outputs["--compact"], encode_compact(result.to_compact()))
    sys.stdout.write(text_summary(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["operator"]:
        from roofline_operator.cli import main as operator_main

        return operator_main(arguments[1:])
    try:
        args = build_parser().parse_args(arguments)
        if args.command == "plan":
            return model_cli.run_plan_command(args, _output_path, _write_atomic)
        return run_profile_command(args)
    except (UsageError, model_cli.ModelInputError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or an environment problem: still one line, never a trace
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"{PROG}: error: {type(exc).__name__}: {detail}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
