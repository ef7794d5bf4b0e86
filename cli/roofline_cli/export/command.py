"""``roofline export``: a profile's plans as ready-to-apply YAML for one target.

Exit codes: 0 success; 2 bad input (one ``roofline: error:`` line on stderr, nothing written):
an unknown target, engine, model or class, a file that is neither a saved result nor a
RooflineProfile, a status with no profiled node, a plan that gives no threshold, a profile
kubectl cannot read, a document unbounded in size, depth or digits, a string outside its contract
(``names.py``: a separator or control character, a name that is no Kubernetes name), two objects
of one kind, namespace and name.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from roofline_cli.export import (
    cluster,
    engine_args,
    gateway,
    itl_configmap,
    keda,
    kueue,
    options,
    thresholds,
    wva,
)
from roofline_cli.export.commented import UnwritableText, render
from roofline_cli.export.from_result import source_of_result
from roofline_cli.export.from_status import MAX_TOKENS, MIN_RATE, SourceError, source_of_profile
from roofline_cli.export.names import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    LABEL_VALUE,
    PROMETHEUS_URL,
    QUALIFIED_NAME,
    SERVED_MODEL,
    BadName,
    check_written,
    checked,
    free_text,
)
from roofline_cli.export.plans import ExportSource
from roofline_cli.export.source_text import UnreadableSource, parse_source
from roofline_operator.core.resources_spec import parse_quantity
from roofline_operator.core.spec_fields import SpecError
from roofline_profiler.core.errors import UsageError, first_line

PROG = "roofline export"
Builder = Callable[[ExportSource, options.ExportOptions], list[tuple[str, Any]]]
#: The targets, in the order ``--help`` lists them.
TARGETS: dict[str, Builder] = {
    "engine-args": engine_args.build,
    "keda": keda.build,
    "gateway": gateway.build,
    "wva": wva.build,
    "kueue": kueue.build,
    "itl-configmap": itl_configmap.build,
}
#: The kinds KEDA's ``authenticationRef`` names, and the Prometheus scaler's ``authModes``
#: (KEDA ``apis/keda/v1alpha1/scaletriggers_types.go``,
#: ``pkg/scalers/authentication/authentication_types.go``).
AUTHENTICATION_KINDS = ("TriggerAuthentication", "ClusterTriggerAuthentication")
AUTH_MODES = ("apiKey", "basic", "tls", "bearer", "custom", "oauth")
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: The largest file read with --from.
MAX_SOURCE_BYTES = 64 * 1024 * 1024
#: The largest integer flag (replicas, a container's index): the Kubernetes API's int32.
MAX_INT_FLAG = 2**31 - 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value <= MAX_INT_FLAG:
        shown = value if abs(value) < 10**12 else f"an integer of {len(str(value))} digits"
        raise argparse.ArgumentTypeError(f"{shown} must lie in 1..{MAX_INT_FLAG}")
    return value


def _count(text: str) -> int:
    if text.strip() == "0":
        return 0
    return _positive_int(text)


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _rate(text: str) -> float:
    """Tokens/s: a positive number that bounded arithmetic can divide (no 5e-324, no 1e308)."""
    value = _number(text)
    if not MIN_RATE <= value <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(
            f"{text} must be a positive number of tokens/s from {MIN_RATE:g} to {MAX_TOKENS:g}"
        )
    return value


def _share(text: str) -> float:
    value = _number(text)
    if not options.MIN_UTILIZATION <= value <= 1:
        raise argparse.ArgumentTypeError(
            f"{text} must lie in (0, 1], at least {options.MIN_UTILIZATION:g}"
        )
    return value


def _quantity(text: str) -> str:
    """A positive Kubernetes quantity (``8``, ``500m``, ``64Gi``)."""
    try:
        value = parse_quantity(text, "quantity")
    except SpecError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a quantity such as 8, 500m or 64Gi"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return text


def _accelerator(text: str) -> str:
    """An extended resource name: cpu and memory have flags of their own."""
    try:
        checked(text, QUALIFIED_NAME, "value")
    except BadName as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if text in ("cpu", "memory") or "/" not in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an accelerator's extended resource such as nvidia.com/gpu (a "
            "CPU-device profile needs none; --cpu-per-replica and --memory-per-replica size "
            "cpu and memory)"
        )
    return text


def _authentication_ref(text: str) -> tuple[str, str]:
    kind, sep, name = text.rpartition("/")
    kind = kind if sep else "TriggerAuthentication"
    if kind not in AUTHENTICATION_KINDS:
        raise argparse.ArgumentTypeError(
            f"{kind!r} is not one of {', '.join(AUTHENTICATION_KINDS)}"
        )
    if not _OBJECT_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"{name!r} is not an object name")
    return kind, name


def _auth_modes(text: str) -> str:
    modes = [m.strip() for m in text.split(",")]
    for mode in modes:
        if mode not in AUTH_MODES:
            raise argparse.ArgumentTypeError(f"{mode!r} is not one of {', '.join(AUTH_MODES)}")
    return ",".join(modes)


def _contract(pattern: re.Pattern[str]) -> Callable[[str], str]:
    """An argparse type: the flag's value matched whole against its contract (``names.py``)."""

    def check(text: str) -> str:
        try:
            return checked(text, pattern, "value")
        except BadName as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return check


def _selector(text: str) -> dict[str, str]:
    pairs = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{part!r} is not KEY=VALUE")
        try:
            pairs[checked(key.strip(), QUALIFIED_NAME, "label key")] = checked(
                value.strip(), LABEL_VALUE, "label value"
            )
        except BadName as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return pairs


def build_parser() -> _Parser:
    p = _Parser(prog=PROG, description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--target", required=True, choices=tuple(TARGETS), help="what to write (required)"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="a saved result (roofline profile --json) or a RooflineProfile as kubectl get -o "
        "yaml/json writes it (or its bare status); - reads stdin",
    )
    source.add_argument(
        "--profile",
        metavar="NAME",
        type=_contract(DNS_SUBDOMAIN),
        help="read RooflineProfile NAME with kubectl",
    )
    p.add_argument(
        "--kubeconfig", metavar="PATH", help="kubectl's --kubeconfig (default: kubectl's)"
    )
    p.add_argument("--context", metavar="NAME", help="kubectl's --context (default: current)")
    p.add_argument("--kubectl", default="kubectl", help="the kubectl to run (default kubectl)")
    p.add_argument(
        "--model",
        action="append",
        metavar="NAME",
        help="only this model; repeatable (default: every planned model)",
    )
    p.add_argument(
        "--class",
        dest="classes",
        action="append",
        metavar="PRODUCT",
        help="only this GPU class, e.g. 'NVIDIA H200'; repeatable (default: every class, and "
        "a per-replica threshold holds on all)",
    )
    p.add_argument(
        "--output", "-o", default="-", metavar="FILE", help="where to write (default -: stdout)"
    )
    p.add_argument(
        "--namespace",
        "-n",
        default="default",
        type=_contract(DNS_LABEL),
        help="namespace of the serving objects (default default)",
    )
    p.add_argument(
        "--engine",
        default="vllm",
        choices=tuple(options.ENGINES),
        help="serving engine (default vllm; keda: vllm or sglang)",
    )
    p.add_argument(
        "--form",
        default="configmap",
        choices=("configmap", "patch"),
        help="engine-args as a ConfigMap or a Deployment JSON patch (default configmap)",
    )
    p.add_argument(
        "--deployment",
        metavar="NAME",
        type=_contract(DNS_SUBDOMAIN),
        help="the serving Deployment (default: the model's name)",
    )
    p.add_argument(
        "--container-index",
        type=_count,
        default=0,
        metavar="N",
        help="the engine's container in the Deployment (default 0)",
    )
    p.add_argument(
        "--model-id",
        metavar="NAME",
        type=_contract(SERVED_MODEL),
        help="the model's served name, if not the plan's name (default: the plan's)",
    )
    p.add_argument(
        "--prometheus",
        default=options.DEFAULT_PROMETHEUS,
        metavar="URL",
        type=_contract(PROMETHEUS_URL),
        help=f"keda: Prometheus address (default {options.DEFAULT_PROMETHEUS})",
    )
    p.add_argument(
        "--authentication-ref",
        type=_authentication_ref,
        metavar="[KIND/]NAME",
        help="keda: the TriggerAuthentication (or ClusterTriggerAuthentication/NAME) holding "
        "the Prometheus credentials",
    )
    p.add_argument(
        "--auth-modes",
        type=_auth_modes,
        metavar="MODE[,MODE]",
        help=f"keda: the Prometheus scaler's authModes ({', '.join(AUTH_MODES)}); needs "
        "--authentication-ref",
    )
    p.add_argument(
        "--min-replicas",
        type=_count,
        default=1,
        metavar="N",
        help="keda: minReplicaCount, wva: the HPA's minReplicas (default 1)",
    )
    p.add_argument(
        "--max-replicas",
        type=_positive_int,
        default=10,
        metavar="N",
        help="keda: maxReplicaCount, wva: the HPA's maxReplicas (default 10)",
    )
    p.add_argument(
        "--pool-selector",
        type=_selector,
        default={},
        metavar="K=V[,K=V]",
        help="gateway: the serving pods' labels (default app=<model>)",
    )
    p.add_argument(
        "--target-port",
        type=_port,
        default=options.DEFAULT_TARGET_PORT,
        metavar="PORT",
        help=f"gateway: the engines' port (default {options.DEFAULT_TARGET_PORT})",
    )
    p.add_argument(
        "--epp-port",
        type=_port,
        default=options.DEFAULT_EPP_PORT,
        metavar="PORT",
        help=f"gateway: the endpoint picker's port (default {options.DEFAULT_EPP_PORT})",
    )
    p.add_argument(
        "--failure-mode",
        default="FailOpen",
        choices=gateway.FAILURE_MODES,
        help="gateway: the InferencePool's failureMode (default FailOpen, the chart's)",
    )
    p.add_argument(
        "--flow-control",
        action="store_true",
        help="gateway: turn on the endpoint picker's flowControl feature gate (queue requests "
        "while the pool is saturated; off, it rejects only negative-priority requests)",
    )
    p.add_argument(
        "--tokens-per-second",
        type=_rate,
        metavar="T",
        help="kueue: decode tokens/s the queue must sustain (kueue needs it or --request-rate)",
    )
    p.add_argument(
        "--request-rate",
        type=_rate,
        metavar="R",
        help="kueue: requests/s the queue must sustain at the profile's spec.workload: "
        "replicas = ceil(R / maxRequestRate) (with --tokens-per-second, the larger)",
    )
    p.add_argument(
        "--utilization",
        type=_share,
        default=options.DEFAULT_UTILIZATION,
        metavar="U",
        help=f"kueue: planned share of the decode ceiling (default {options.DEFAULT_UTILIZATION})",
    )
    p.add_argument(
        "--resource",
        type=_accelerator,
        default=options.DEFAULT_RESOURCE,
        help=f"kueue: the accelerator's resource, also its taint's key (default "
        f"{options.DEFAULT_RESOURCE}; none on a CPU-device profile)",
    )
    p.add_argument(
        "--cpu-per-replica",
        type=_quantity,
        default=options.DEFAULT_CPU_PER_REPLICA,
        metavar="QUANTITY",
        help=f"kueue: one serving pod's CPU request (default {options.DEFAULT_CPU_PER_REPLICA})",
    )
    p.add_argument(
        "--memory-per-replica",
        type=_quantity,
        default=options.DEFAULT_MEMORY_PER_REPLICA,
        metavar="QUANTITY",
        help=f"kueue: one serving pod's memory request (default "
        f"{options.DEFAULT_MEMORY_PER_REPLICA})",
    )
    p.add_argument(
        "--cohort",
        default=options.DEFAULT_COHORT,
        type=_contract(DNS_SUBDOMAIN),
        help=f"kueue: the Cohort (default {options.DEFAULT_COHORT})",
    )
    return p  # fmt: skip


def _read_document(path: str) -> tuple[Any, str]:
    """The document in ``path`` (``-``: stdin), JSON or YAML, bounded (``source_text.py``)."""
    try:
        if path == "-":
            text = sys.stdin.read(MAX_SOURCE_BYTES + 1)
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"--from {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(f"--from {path}: not a text file") from None
    if len(text) > MAX_SOURCE_BYTES:
        raise UsageError(f"--from {path}: larger than {MAX_SOURCE_BYTES} bytes")
    try:
        return parse_source(text)
    except UnreadableSource as exc:
        raise UsageError(f"--from {path}: {exc}") from None


def read_source(args: argparse.Namespace) -> ExportSource:
    """The source the flags name, read and checked once."""
    if args.profile is not None:
        try:
            document = cluster.read_profile(
                args.profile, args.kubectl, args.kubeconfig, args.context
            )
        except cluster.ClusterError as exc:
            raise UsageError(f"--profile {args.profile}: {exc}") from None
        where = f"RooflineProfile {args.profile}"
    else:
        document, _ = _read_document(args.source)
        where = "stdin" if args.source == "-" else Path(args.source).name
        try:
            free_text(where, "the file's name")
        except BadName as exc:
            raise UsageError(f"--from: {exc}: it would reach the comments") from None
        if isinstance(document, dict) and document.get("kind") == "RooflineResult":
            from roofline_profiler.cli.arguments import read_result

            if args.source == "-":
                raise UsageError("--from -: read a saved result from a file")
            result = read_result(Path(args.source))
            try:
                return source_of_result(result, where)
            except SourceError as exc:
                raise UsageError(f"--from {args.source}: {exc}") from None
    try:
        return source_of_profile(document, where)
    except SourceError as exc:
        flag = f"--profile {args.profile}" if args.profile else f"--from {args.source}"
        raise UsageError(f"{flag}: {exc}") from None


def _selected(
    source: ExportSource, models: Sequence[str] | None, classes: Sequence[str] | None
) -> ExportSource:
    plans = source.plans
    for flag, wanted, have in (
        ("--model", models, source.models()),
        ("--class", classes, source.classes()),
    ):
        for name in wanted or ():
            if name not in have:
                raise UsageError(f"{flag} {name!r}: the source plans {', '.join(have)}")
    if models:
        plans = tuple(p for p in plans if p.model in models)
    if classes:
        plans = tuple(p for p in plans if p.gpu_class in classes)
    if not plans:
        raise UsageError("no model is planned on the selected classes")
    return replace(source, plans=plans)  # fmt: skip


def export_options(args: argparse.Namespace) -> options.ExportOptions:
    if args.target == "keda" and args.engine not in options.METRIC_ENGINES:
        raise UsageError(f"--target keda reads vLLM's or SGLang's metrics, not {args.engine}'s")
    if args.target == "gateway" and args.engine not in gateway.MODEL_SERVER_TYPES:
        engines = ", ".join(gateway.MODEL_SERVER_TYPES)
        raise UsageError(
            f"--target gateway: the endpoint picker's chart reads {engines} metrics, "
            f"not {args.engine}'s"
        )
    if args.auth_modes is not None and args.authentication_ref is None:
        raise UsageError("--auth-modes needs --authentication-ref: the credentials it presents")
    if args.min_replicas > args.max_replicas:
        raise UsageError(
            f"--min-replicas {args.min_replicas} exceeds --max-replicas {args.max_replicas}"
        )
    return options.ExportOptions(
        namespace=args.namespace, engine=args.engine, form=args.form, deployment=args.deployment,
        container_index=args.container_index, prometheus=args.prometheus,
        authentication_ref=args.authentication_ref, auth_modes=args.auth_modes,
        min_replicas=args.min_replicas, max_replicas=args.max_replicas,
        pool_selector=args.pool_selector, target_port=args.target_port, epp_port=args.epp_port,
        failure_mode=args.failure_mode, flow_control=args.flow_control,
        tokens_per_second=args.tokens_per_second, request_rate=args.request_rate,
        utilization=args.utilization,
        resource=args.resource, cpu_per_replica=args.cpu_per_replica,
        memory_per_replica=args.memory_per_replica, cohort=args.cohort,
        model_id=args.model_id,
    )  # fmt: skip


def _write(text: str, output: str) -> None:
    if output == "-":
        sys.stdout.write(text)
        return
    path = Path(output)
    if not path.parent.is_dir():
        raise UsageError(f"--output {output}: directory {path.parent} does not exist")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write it ({exc.strerror})") from None


def build_documents(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The ``(header, document)`` pairs the flags ask for, checked as a whole: every object
    named validly, no two of one kind, namespace and name (``names.check_written``)."""
    chosen = export_options(args)
    source = _selected(read_source(args), args.model, args.classes)
    try:
        documents = TARGETS[args.target](source, chosen)
        check_written(documents)
    except (
        thresholds.NoThreshold,
        kueue.NoDemand,
        engine_args.OneModelOnly,
        itl_configmap.NoItlModel,
        BadName,
    ) as exc:
        raise UsageError(str(exc)) from None
    return documents


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    documents = build_documents(args)
    try:
        text = render(documents)
    except UnwritableText as exc:
        raise UsageError(str(exc)) from None
    _write(text, args.output)
    return 0


def one_line(message: str) -> str:
    """``message`` as one printable line: every character :meth:`str.isprintable` refuses (a
    line break, a control, a bidi control) as its escape, as ``repr`` writes it."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in message)


def main(argv: Sequence[str]) -> int:
    try:
        return run(argv)
    except UsageError as exc:
        print(f"roofline: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("roofline: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or an environment problem: still one line, never a trace
        print(f"roofline: error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 1
