"""The command line's flags as checked values: each flag parsed and bounded once, every bad value
one :class:`~roofline_profiler.core.errors.UsageError` (exit status 2, one line, nothing written).

A flag whose value stands alone and whose bounds are in ``limits.py`` (``--dtype``, ``--shape``,
``--batches``, ``--min-batch-efficiency``) is parsed by its argparse ``type``, and argparse names
it (``argument --shape: ...``). The flags that depend on one another (a model and its
tensor-parallel degree, ``--models-json`` against ``--model``), on the file system (output paths,
``--models-file``, ``--from``) or on a saved profile are checked after parsing, in one step per
command (:func:`profile_arguments`, :func:`plan_arguments`) and in a fixed order: the first bad
flag of that order is the one reported.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from roofline_profiler.core import limits, model_request, units
from roofline_profiler.core.errors import UsageError
from roofline_profiler.core.load_plan import LoadRequest, Workload
from roofline_profiler.core.model_config import ModelArch, ModelError, load_model
from roofline_profiler.core.models import ServingFields, check_tensor_parallel, served_in
from roofline_profiler.core.planning import PlanOptions
from roofline_profiler.core.weight_formats import WeightFormat, parse_weight_format
from roofline_profiler.wire.result import ProfileResult
from roofline_profiler.wire.saved_result import UnreadableResult, read_saved_result


@dataclass(frozen=True)
class OutputPaths:
    """Where a command writes each of its files (``None``: not asked for), in the order of the
    flags and of the ``wrote`` lines."""

    json: Path | None = None
    markdown: Path | None = None
    plot: Path | None = None
    compact: Path | None = None

    def written(self) -> tuple[Path, ...]:
        paths = (self.json, self.markdown, self.plot, self.compact)
        return tuple(path for path in paths if path is not None)


_T = TypeVar("_T")

#: Units of ``--itl-slo``: a decode step lasts microseconds to seconds.
ITL_SLO_UNITS = ("ns", "us", "µs", "ms", "s")
#: ``--gpu-memory-utilization`` when not given: vLLM's default.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def flag_type(parse: Callable[[str], _T], what: str) -> Callable[[str], _T]:
    """``parse`` as an argparse ``type``: a :class:`limits.LimitError` becomes argparse's one-line
    error for the flag, and the value is parsed into its type once."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except limits.LimitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = what
    return convert


DTYPE = flag_type(limits.canonical_dtype, "dtype")
SHAPE = flag_type(limits.parse_shape, "shape")
BATCHES = flag_type(limits.parse_batches, "batches")
PERCENT = flag_type(limits.parse_efficiency_percent, "percent")


def add_output_arguments(
    parser: argparse.ArgumentParser, *, document: str, plot: str, compact: bool = False
) -> None:
    """``--json``, ``--markdown``, ``--plot`` and, for ``profile``, ``--compact``."""
    parser.add_argument("--json", metavar="PATH", help=f"write the {document} result document")
    parser.add_argument("--markdown", metavar="PATH", help="write a Markdown report")
    parser.add_argument("--plot", metavar="PATH.png", help=f"write the {plot} plot")
    if compact:
        parser.add_argument(
            "--compact",
            metavar="PATH",
            help="write the compact (<= 4096 bytes) result, e.g. /dev/termination-log in a pod",
        )


@dataclass(frozen=True)
class ModelGroup:
    """Models measured and planned together: at these contexts and one tensor-parallel degree."""

    models: tuple[ModelArch, ...]
    contexts: tuple[int, ...]
    tensor_parallel: int


@dataclass(frozen=True)
class ProfileArguments:
    """``roofline profile``'s flags, checked; the device is resolved later, with torch."""

    device: str
    dtype: str | None
    shape: tuple[int, int]
    batches: tuple[int, ...]
    min_batch_efficiency_percent: int
    bandwidth_kind: str
    quick: bool
    outputs: OutputPaths
    model_groups: tuple[ModelGroup, ...]
    plan_options: PlanOptions
    #: The weight formats whose roofline to measure beside the dtype's: ``--weight-format`` and
    #: the formats of the quantized models, each once.
    weight_formats: tuple[WeightFormat, ...] = ()


@dataclass(frozen=True)
class PlanArguments:
    """``roofline plan``'s flags, checked, with the saved profile ``--from`` names."""

    source: Path
    result: ProfileResult
    model_refs: tuple[str, ...]
    models: tuple[ModelArch, ...]
    tensor_parallel: int
    #: ``None``: each model at the contexts the profile measured it at.
    contexts: tuple[int, ...] | None
    plan_options: PlanOptions
    outputs: OutputPaths


def output_path(text: str | None, flag: str) -> Path | None:
    """The file a flag names, in a directory that exists and not itself a directory."""
    if text is None:
        return None
    path = Path(text)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {text}: directory {parent} does not exist")
    if path.is_dir():
        raise UsageError(f"{flag} {text} is a directory")
    return path


def output_paths(
    json_path: str | None, markdown: str | None, plot: str | None, compact: str | None = None
) -> OutputPaths:
    """``--json``, ``--markdown``, ``--plot`` (a PNG) and ``--compact``, checked in that order."""
    paths = OutputPaths(
        json=output_path(json_path, "--json"),
        markdown=output_path(markdown, "--markdown"),
        plot=output_path(plot, "--plot"),
        compact=output_path(compact, "--compact"),
    )
    if paths.plot is not None and paths.plot.suffix.lower() != ".png":
        raise UsageError(f"--plot {plot}: the plot is written as PNG, name it *.png")
    return paths


def parse_contexts(text: str) -> tuple[int, ...]:
    """``--context``: comma-separated context lengths, sorted, without repeats."""
    contexts = []
    for part in (p.strip() for p in text.split(",")):
        try:
            value = int(part)
        except ValueError:
            raise UsageError(f"--context: {part!r} is not an integer") from None
        if not 1 <= value <= limits.MAX_CONTEXT_TOKENS:
            raise UsageError(
                f"--context: {value} is not a context length in 1..{limits.MAX_CONTEXT_TOKENS}"
            )
        contexts.append(value)
    return tuple(sorted(set(contexts)))


def parse_tensor_parallel(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"--tensor-parallel {text!r} is not an integer") from None
    if not 1 <= value <= limits.MAX_TENSOR_PARALLEL:
        raise UsageError(f"--tensor-parallel {value} must lie in 1..{limits.MAX_TENSOR_PARALLEL}")
    return value


def parse_itl_slo(text: str) -> float:
    """``--itl-slo``: ``"50ms"``, ``"0.05s"``, ``"250us"`` → seconds; a unit is required and the
    value must be > 0. Free-form (``" 20 ms "``, ``1e2ms``) and compound (``1s500ms``), as
    :func:`units.parse_duration` reads it."""
    try:
        seconds = units.parse_duration(text, ITL_SLO_UNITS, free_form=True)
    except units.DurationError:
        raise UsageError(
            f"--itl-slo: cannot read {text!r} as a duration (write e.g. 50ms, 0.05s or 250us)"
        ) from None
    if not seconds > 0:
        raise UsageError(f"--itl-slo: duration {text!r} must be positive")
    return seconds


def parse_duration_flag(text: str, flag: str, upper: float) -> float:
    """A duration flag such as ``--ttft-slo``: ``"2s"``, ``"500ms"`` → seconds in (0, upper]."""
    try:
        seconds = units.parse_duration(text, ITL_SLO_UNITS, free_form=True)
    except units.DurationError:
        raise UsageError(
            f"{flag}: cannot read {text!r} as a duration (write e.g. 500ms or 2s)"
        ) from None
    if not 0 < seconds <= upper:
        raise UsageError(f"{flag}: duration {text!r} must be positive and at most {upper:g}s")
    return seconds


def bounded_int(text: str, flag: str, upper: int) -> int:
    """An integer flag in 1..``upper``."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not an integer") from None
    if not 1 <= value <= upper:
        raise UsageError(f"{flag} {value} must lie in 1..{upper}")
    return value


def parse_request_rates(text: str) -> tuple[float, ...]:
    """``--request-rate``: comma-separated requests per second, sorted, without repeats."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > limits.MAX_REQUEST_RATES:
        raise UsageError(f"--request-rate: at most {limits.MAX_REQUEST_RATES} rates")
    rates = {positive_number(p, "--request-rate", limits.MAX_REQUEST_RATE) for p in parts}
    return tuple(sorted(rates))


def load_request(args: argparse.Namespace) -> LoadRequest | None:
    """The plan-under-load flags; None where none was given. A workload needs both lengths; a
    rate or a TTFT target needs a workload."""
    given = [
        getattr(args, name, None)
        for name in ("prompt_tokens", "output_tokens", "request_rate", "ttft_slo",
                     "max_num_batched_tokens", "max_num_seqs")
    ]  # fmt: skip
    if all(value is None for value in given):
        return None
    prompt, output, rates, ttft, batched, seqs = given
    if (prompt is None) != (output is None):
        raise UsageError("--prompt-tokens and --output-tokens name a workload together: give both")
    if prompt is None and (rates is not None or ttft is not None):
        raise UsageError("--request-rate and --ttft-slo need a workload: add --prompt-tokens and "
                         "--output-tokens")  # fmt: skip
    workload = None
    if prompt is not None and output is not None:
        workload = Workload(
            bounded_int(prompt, "--prompt-tokens", limits.MAX_CONTEXT_TOKENS),
            bounded_int(output, "--output-tokens", limits.MAX_CONTEXT_TOKENS),
        )
    return LoadRequest(
        workload=workload,
        rates=() if rates is None else parse_request_rates(rates),
        ttft_slo_seconds=(
            None
            if ttft is None
            else parse_duration_flag(ttft, "--ttft-slo", limits.MAX_TTFT_SLO_SECONDS)
        ),
        max_num_batched_tokens=(
            None
            if batched is None
            else bounded_int(batched, "--max-num-batched-tokens", limits.MAX_BATCHED_TOKENS)
        ),
        max_num_seqs=None
        if seqs is None
        else bounded_int(seqs, "--max-num-seqs", limits.MAX_NUM_SEQS),
    )


def positive_number(text: str, flag: str, upper: float | None = None) -> float:
    """A finite number above 0 (and at most ``upper``)."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0 or (upper is not None and value > upper):
        bound = f" in (0, {upper:g}]" if upper is not None else " above 0"
        raise UsageError(f"{flag} {text!r} must be a number{bound}")
    return value


def plan_options(args: argparse.Namespace, min_efficiency_percent: int) -> PlanOptions:
    """``--itl-slo``, ``--gpu-memory-utilization`` and ``--gpu-hour-cost``, in that order, then
    the plan-under-load flags."""
    slo = None if args.itl_slo is None else parse_itl_slo(args.itl_slo)
    utilization = positive_number(args.gpu_memory_utilization, "--gpu-memory-utilization", 1.0)
    cost = (
        None
        if args.gpu_hour_cost is None
        else positive_number(args.gpu_hour_cost, "--gpu-hour-cost")
    )
    return PlanOptions(
        itl_slo_seconds=slo,
        gpu_hour_cost=cost,
        gpu_memory_utilization=utilization,
        min_efficiency_percent=min_efficiency_percent,
        engine=getattr(args, "engine", None),
        load=load_request(args),
    )


def load_models(
    refs: Sequence[str],
    tensor_parallel: int,
    weight_format: str | None = None,
    kv_cache_dtype: str | None = None,
) -> tuple[ModelArch, ...]:
    """``--model``: each a preset or a ``config.json``, shardable at ``tensor_parallel``, its
    weights in ``--weight-format`` and its cache in ``--kv-cache-dtype`` where given
    (:func:`served_as`)."""
    archs = []
    for ref in refs:
        try:
            arch = load_model(ref)
            check_tensor_parallel(arch, tensor_parallel)
        except ModelError as exc:
            raise UsageError(f"--model {ref}: {exc}") from None
        archs.append(served_as(arch, ref, weight_format, kv_cache_dtype))
    return tuple(archs)


def served_as(
    arch: ModelArch, ref: str, weight_format: str | None, kv_cache_dtype: str | None
) -> ModelArch:
    """``arch`` served with ``--weight-format`` (a format its config does not declare otherwise;
    not a mixture of experts) and ``--kv-cache-dtype``, as :func:`models.served_in` checks them
    for every door."""
    fields = ServingFields(f"--model {ref}", "--weight-format", "--kv-cache-dtype")
    try:
        return served_in(arch, weight_format, kv_cache_dtype, fields)
    except ModelError as exc:
        raise UsageError(str(exc)) from None


def requested_model_groups(args: argparse.Namespace) -> tuple[ModelGroup, ...]:
    """``--models-json`` or ``--models-file``: one group per tensor-parallel degree and context,
    as :func:`model_request.request_groups` forms them."""
    if args.models_json is None and args.models_file is None:
        return ()
    if args.model or args.context is not None:
        raise UsageError("--models-json names the models and their contexts: drop --model")
    if args.models_json is not None and args.models_file is not None:
        raise UsageError("give --models-json or --models-file, not both")
    if args.models_file is not None:
        entries = model_request.read_models_file(args.models_file)
    else:
        entries = model_request.parse_models_json(args.models_json)
    return tuple(
        ModelGroup(models, (context,), tp)
        for tp, context, models in model_request.request_groups(entries)
    )


def profile_arguments(args: argparse.Namespace) -> ProfileArguments:
    """Check ``roofline profile``'s flags after argparse: the output paths, the models and their
    plan options, then ``--models-json``/``--models-file``."""
    outputs = output_paths(args.json, args.markdown, args.plot, args.compact)
    tensor_parallel = parse_tensor_parallel(args.tensor_parallel)
    models = load_models(args.model or (), tensor_parallel, args.weight_format, args.kv_cache_dtype)
    contexts = (
        (limits.DEFAULT_CONTEXT_TOKENS,) if args.context is None else parse_contexts(args.context)
    )
    options = plan_options(args, args.min_batch_efficiency)
    groups = requested_model_groups(args)
    if models:
        groups = (ModelGroup(models, contexts, tensor_parallel), *groups)
    formats = profiled_formats(args.weight_format, groups)
    if formats and args.dtype == "float32":
        quantized = [arch.name for group in groups for arch in group.models if arch.weight_format]
        raise UsageError(
            f"--dtype float32: {quantized[0] if quantized else formats[0].name} has quantized "
            "weights, which the engines serve with 16-bit activations (--dtype bfloat16 or "
            "float16)"
        )
    return ProfileArguments(
        device=args.device,
        dtype=args.dtype,
        shape=args.shape,
        batches=args.batches,
        min_batch_efficiency_percent=args.min_batch_efficiency,
        bandwidth_kind=args.bandwidth,
        quick=args.quick,
        outputs=outputs,
        model_groups=groups,
        plan_options=options,
        weight_formats=formats,
    )


def profiled_formats(
    weight_format: str | None, groups: Sequence[ModelGroup]
) -> tuple[WeightFormat, ...]:
    """The weight formats a profile measures the roofline of: ``--weight-format`` (with or
    without ``--model``) and every quantized model's, each once, in that order."""
    names = []
    if weight_format is not None:
        try:
            names.append(parse_weight_format(weight_format).name)
        except ValueError as exc:
            raise UsageError(f"--weight-format: {exc}") from None
    names += [arch.weight_format for group in groups for arch in group.models if arch.weight_format]
    return tuple(parse_weight_format(name) for name in dict.fromkeys(names))


def read_result(path: Path) -> ProfileResult:
    """``--from``: the result document of an earlier ``roofline profile --json``, read into
    bounded values and checked against the published schema (``saved_result.py``): a file from
    elsewhere may hold anything, and ends as a result or as one usage error."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--from {path}: cannot read it ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError):
        raise UsageError(f"--from {path}: not a JSON result document") from None
    try:
        return read_saved_result(text)
    except UnreadableResult as exc:
        raise UsageError(f"--from {path}: {exc}") from None


def plan_arguments(args: argparse.Namespace) -> PlanArguments:
    """Check ``roofline plan``'s flags after argparse: the models, the output paths, the saved
    profile, its plan options, then the contexts."""
    tensor_parallel = parse_tensor_parallel(args.tensor_parallel)
    models = load_models(args.model, tensor_parallel, args.weight_format, args.kv_cache_dtype)
    outputs = output_paths(args.json, args.markdown, args.plot)
    source = Path(args.source)
    result = read_result(source)
    return PlanArguments(
        source=source,
        result=result,
        model_refs=tuple(args.model),
        models=models,
        tensor_parallel=tensor_parallel,
        plan_options=plan_options(args, result.min_batch_efficiency_percent),
        contexts=None if args.context is None else parse_contexts(args.context),
        outputs=outputs,
    )
