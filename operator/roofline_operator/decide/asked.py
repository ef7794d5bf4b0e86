"""What a profiler pod was asked to measure, and whether its result answers that.

A decoded result is plausible (``compact_decode``), but plausible is not enough: a container
that was given a GPU and sees none (no GPU runtime class, a device plugin that did not hand the
device over, a driver the image's CUDA cannot use) once measured the CPU, exited 0, and the
CPU's numbers were published as the GPU's. A result of another dtype or decode shape than the
pod's would likewise be published under a profile that never asked for it, and a dtype that
differs between rounds would move labels with no ``DeviceChanged``.

What the pod was asked is read from the pod itself, its container's command, which the operator
built (``pods.profiler_command``) and which no one can change after creation; so a pod that
started under an older spec is judged by what it was asked then, not by today's spec.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from roofline_operator.core.names import FailureReason
from roofline_profiler.core import limits
from roofline_profiler.wire.compact import CompactProfile

#: The backends a result may name, by the ``--device`` the operator gave the pod. Pods that
#: said ``all`` come from operators before ``spec.device``, which gave every pod GPUs.
EXPECTED_BACKENDS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda", "rocm"),
    "all": ("cuda", "rocm"),
    "cpu": ("cpu",),
}
#: ``--device`` values with which the profiler refuses to start on anything else, so that even
#: a result that names no backend (compact version 2 or 3, an older profiler image) was measured
#: there.
STRICT_DEVICES = ("cuda", "cpu")
#: What a GPU pod that measured the CPU most likely lacked, for the node's message.
NO_GPU_CAUSES = (
    "the container saw no GPU: check the runtime class (spec.runtimeClassName), the node's GPU "
    "device plugin and that its driver suits the profiler image's CUDA"
)


@dataclass(frozen=True)
class ProfilerAsk:
    """The measurement a profiler pod's command asks for."""

    #: ``--device`` without an index: ``cuda``, ``cpu``, or ``all`` from older operators.
    device: str
    dtype: str
    #: ``--shape`` as ``(K, N)``; the profiler's default when the command has none.
    shape: tuple[int, int]


def _option(argv: Sequence[str], flag: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _shape(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return limits.DEFAULT_SHAPE
    k, _, n = text.lower().partition("x")
    if not (k.isascii() and k.isdigit() and n.isascii() and n.isdigit()):
        return None
    return int(k), int(n)


def asked_of(argv: Sequence[str]) -> ProfilerAsk | None:
    """What ``argv`` (a profiler pod's command and arguments) asks to measure; ``None`` when it
    does not say which device and dtype (no command the operator builds)."""
    device = _option(argv, "--device")
    dtype = _option(argv, "--dtype")
    shape = _shape(_option(argv, "--shape"))
    if device is None or dtype is None or shape is None:
        return None
    return ProfilerAsk(device=device.partition(":")[0].lower(), dtype=dtype, shape=shape)


def _wrong_device(profile: CompactProfile, ask: ProfilerAsk) -> str | None:
    expected = EXPECTED_BACKENDS.get(ask.device, ())
    if profile.backend is None:
        if ask.device in STRICT_DEVICES:
            return None
        return f"the result does not say what it measured, and --device {ask.device} allows the CPU"
    if profile.backend in expected:
        return None
    product = profile.devices[0].name if profile.devices else "?"
    if ask.device == "cpu":
        return (
            f"the profiler measured a {profile.backend} GPU ({product}); the pod was asked for "
            "the CPU (spec.device: cpu)"
        )
    return (
        f"the profiler measured the {profile.backend} backend ({product}) instead of the GPU "
        f"the pod was given; {NO_GPU_CAUSES}"
    )


def refusal(profile: CompactProfile, ask: ProfilerAsk | None) -> tuple[FailureReason, str] | None:
    """Why ``profile`` is not the answer to ``ask`` (a reason and a one-line message naming the
    field), or ``None`` when it is: its backend one the pod's device allows, its dtype and its
    decode shape the pod's."""
    if ask is None:
        return FailureReason.INVALID_RESULT, "the pod's command does not say what to measure"
    wrong = _wrong_device(profile, ask)
    if wrong is not None:
        return FailureReason.WRONG_DEVICE, wrong
    if profile.dtype != ask.dtype:
        return (
            FailureReason.INVALID_RESULT,
            f"result: field 'dt' is {profile.dtype}, the pod asked for {ask.dtype}",
        )
    if (profile.shape_k, profile.shape_n) != ask.shape:
        k, n = ask.shape
        return (
            FailureReason.INVALID_RESULT,
            f"result: fields 'k' and 'n' are {profile.shape_k}x{profile.shape_n}, "
            f"the pod asked for {k}x{n}",
        )
    return None
