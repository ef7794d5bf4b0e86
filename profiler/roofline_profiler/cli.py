"""The profiler's command line: ``roofline profile`` measures this machine, ``roofline plan``
re-plans a model from a saved profile without the device.

The ``roofline`` command (``roofline_cli``) hands its profiler subcommands to :func:`main`; run
alone, ``python -m roofline_profiler.cli profile ...`` does the same.

Exit codes: 0 success; 1 the device failed (one line on stderr, and the same line in the
``--compact`` file so a pod's termination message says why); 2 bad input (one line on stderr,
nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

from roofline_profiler import limits, model_cli, model_request
from roofline_profiler.errors import first_line
from roofline_profiler.model_config import ModelArch

PROG = "roofline"
_T = TypeVar("_T")


class UsageError(Exception):
    """Bad input: reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line instead of usage plus message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _argument_type(parse: Callable[[str], _T], what: str) -> Callable[[str], _T]:
    """``parse`` as an argparse ``type``: a :class:`limits.LimitError` becomes argparse's
    one-line error for the flag, the value is parsed into its type once."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except limits.LimitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = what
    return convert


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("roofline-operator")
    except PackageNotFoundError:
        return "unknown"


def wrote(paths: Sequence[Path | None]) -> str:
    """One ``wrote PATH`` line per file written, in the order of the flags."""
    return "".join(f"wrote {path}\n" for path in paths if path is not None)


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
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True
    p = sub.add_parser("profile", help="measure this machine's decode roofline")
    p.add_argument(
        "--device",
        default="all",
        help="all (default: every GPU, else the CPU), cuda (every GPU), cuda:N, mps or cpu",
    )
    p.add_argument(
        "--dtype",
        type=_argument_type(limits.canonical_dtype, "dtype"),
        help=f"{', '.join(limits.DTYPE_NAMES)} (default: bfloat16 on GPUs "
        "that support it, else float16; float32 on the CPU)",
    )
    k, n = limits.DEFAULT_SHAPE
    p.add_argument(
        "--shape",
        type=_argument_type(limits.parse_shape, "shape"),
        default=limits.DEFAULT_SHAPE,
        metavar="KxN",
        help=f"decode weight KxN (default {k}x{n}, the Llama-3-8B FFN up-projection)",
    )
    p.add_argument(
        "--batches",
        type=_argument_type(limits.parse_batches, "batches"),
        default=limits.DEFAULT_BATCHES,
        metavar="B1,B2,...",
        help="comma-separated batch sizes to sweep, each in "
        f"{limits.MIN_BATCH}..{limits.MAX_BATCH} (default 1,2,4,...,512)",
    )
    p.add_argument(
        "--min-batch-efficiency",
        type=_argument_type(limits.parse_efficiency_percent, "percent"),
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
    p.add_argument("--json", metavar="PATH", help="write the full result document")
    p.add_argument("--markdown", metavar="PATH", help="write a Markdown report")
    p.add_argument("--plot", metavar="PATH.png", help="write the roofline plot")
    p.add_argument(
        "--compact",
        metavar="PATH",
        help="write the compact (<= 4096 bytes) result, e.g. /dev/termination-log in a pod",
    )
    model_cli.add_model_arguments(p)
    p.add_argument(
        "--models-json",
        metavar="JSON",
        help="models to plan, each with its own context and tensor parallel degree (the "
        "operator's form): [{name, preset|config, contextTokens, tensorParallel}, ...]",
    )
    p.add_argument(
        "--models-file",
        metavar="PATH",
        help="--models-json read from a file (how the operator's pods get it, from a ConfigMap)",
    )
    plan = sub.add_parser("plan", help="re-plan a model from a saved profile, without the device")
    plan.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="RESULT.json",
        help="the result document of an earlier roofline profile --json that measured the model "
        "(required)",
    )
    model_cli.add_model_arguments(plan, plan=True)
    plan.add_argument("--json", metavar="PATH", help="write the re-planned result document")
    plan.add_argument("--markdown", metavar="PATH", help="write a Markdown report")
    plan.add_argument("--plot", metavar="PATH.png", help="write the model plan plot")
    return parser


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a failure never leaves half a result.

    ``mkstemp`` creates the file ``0600``; it gets the mode any other file of the user gets
    (``0666`` less the umask), as the plot written by matplotlib does.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
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
    k, n = args.shape
    outputs = {
        flag: _output_path(getattr(args, flag.lstrip("-")), flag)
        for flag in ("--json", "--markdown", "--plot", "--compact")
    }
    if outputs["--plot"] is not None and outputs["--plot"].suffix.lower() != ".png":
        raise UsageError(f"--plot {args.plot}: the plot is written as PNG, name it *.png")
    tensor_parallel = model_cli.parse_tensor_parallel(args.tensor_parallel)
    archs = model_cli.load_models(args.model, tensor_parallel)
    contexts = model_cli.parse_contexts(args.context, (model_cli.DEFAULT_CONTEXT,))
    plan_options = model_cli.parse_plan_options(args, args.min_batch_efficiency)
    groups: list[tuple[int, int, tuple[ModelArch, ...]]] = []
    if args.models_json is not None or args.models_file is not None:
        if args.model or args.context is not None:
            raise UsageError("--models-json names the models and their contexts: drop --model")
        if args.models_json is not None and args.models_file is not None:
            raise UsageError("give --models-json or --models-file, not both")
        try:
            if args.models_file is not None:
                entries = model_request.read_models_file(args.models_file)
            else:
                entries = model_request.parse_models_json(args.models_json)
            groups = model_request.request_groups(entries)
        except model_request.ModelsJsonError as exc:
            raise UsageError(str(exc)) from None

    # torch is imported only now, so bad input is rejected at once.
    from roofline_profiler import devices as devmod
    from roofline_profiler.model_runner import ModelRequest
    from roofline_profiler.runner import DeviceFailure, ProfileRequest, run_profile

    try:
        infos = devmod.resolve_devices(args.device)
        dtypes = [args.dtype or devmod.default_dtype(i) for i in infos]
        for info, dtype in zip(infos, dtypes, strict=True):
            devmod.check_dtype_supported(info, dtype)
    except devmod.DeviceError as exc:
        raise UsageError(str(exc)) from None

    request = ProfileRequest(
        devices=tuple(infos),
        k=k,
        n=n,
        batches=args.batches,
        min_batch_efficiency_percent=args.min_batch_efficiency,
        bandwidth_kind=args.bandwidth,
        quick=args.quick,
        models=ModelRequest(archs, contexts, tensor_parallel, plan_options) if archs else None,
        model_groups=tuple(
            ModelRequest(group, (context,), tp, plan_options) for tp, context, group in groups
        ),
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
    sys.stdout.write(wrote(list(outputs.values())))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
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
        print(f"{PROG}: error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
