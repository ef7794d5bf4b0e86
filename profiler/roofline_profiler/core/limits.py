"""The one definition of every input limit, default and dtype name.

The command line, the profiler, the operator's spec parser, the plausibility table that results
are read back against and (checked by a test) the CRD's schema all read these, so a batch, a shape
or a model that one of them accepts, all of them accept. The spec fields only the operator reads
(``maxParallel``, timeouts) have their bounds beside their defaults in the operator's ``spec``.
Efficiency is a percent here, as in the CRD and on the command line; only the maths turns it into
a fraction.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Bytes per element of the dtypes the profiler measures; the keys are the canonical names.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
}
DTYPE_NAMES: tuple[str, ...] = tuple(DTYPE_BYTES)
#: Other spellings accepted on the command line.
DTYPE_ALIASES: dict[str, str] = {
    "fp32": "float32",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
}
#: The backends a profile can measure on: torch's CUDA device type on NVIDIA (``cuda``) and AMD
#: (``rocm``) GPUs, Apple GPUs (``mps``) and the CPU. A result names its backend, so a reader can
#: tell a GPU's numbers from the CPU's.
BACKEND_NAMES: tuple[str, ...] = ("cuda", "rocm", "mps", "cpu")
#: The backends each ``--device`` choice may end on: ``cuda`` is torch's device type of CUDA and
#: ROCm GPUs alike; ``all`` takes every GPU, else the CPU.
BACKENDS_OF_DEVICE: dict[str, tuple[str, ...]] = {
    "all": BACKEND_NAMES,
    "cuda": ("cuda", "rocm"),
    "mps": ("mps",),
    "cpu": ("cpu",),
}

MIN_BATCH = 1
MAX_BATCH = 1 << 16
#: Bounds of the decode weight's K and N.
MIN_DIMENSION = 1
MAX_DIMENSION = 1 << 20
#: Most elements of the decode weight (K·N): 2 GiB in bf16, which every supported GPU holds.
MAX_WEIGHT_ELEMENTS = 1 << 30

#: The decode weight swept by default: Llama-3-8B's FFN up-projection (K = hidden, N = FFN width).
DEFAULT_SHAPE = (4096, 14336)
#: Batches swept by default: powers of two from one token to well past any GPU's ridge point.
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

#: Most GPUs one profiler pod requests (``spec.gpusPerNode``) and so one result lists.
MAX_GPUS_PER_POD = 64

#: Share of peak FLOP/s the recommended minimum batch must reach, in percent.
DEFAULT_MIN_BATCH_EFFICIENCY_PERCENT = 50
MIN_EFFICIENCY_PERCENT = 1
MAX_EFFICIENCY_PERCENT = 100

_SHAPE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


class LimitError(ValueError):
    """A value outside the limits; ``str()`` is a one-line reason."""


def canonical_dtype(name: str) -> str:
    """The canonical name of ``name`` or one of its aliases (``bf16`` is ``bfloat16``)."""
    key = name.strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise LimitError(f"unknown dtype {name!r} (expected {', '.join(DTYPE_NAMES)})")
    return key


def check_shape(k: int, n: int) -> tuple[int, int]:
    """K and N each within the dimension limits, and K·N within :data:`MAX_WEIGHT_ELEMENTS`:
    the command line, the spec's ``weightShape`` and its older ``shape`` all check this."""
    if not (MIN_DIMENSION <= k <= MAX_DIMENSION and MIN_DIMENSION <= n <= MAX_DIMENSION):
        raise LimitError(f"K and N must lie in {MIN_DIMENSION}..{MAX_DIMENSION}, got {k}x{n}")
    if k * n > MAX_WEIGHT_ELEMENTS:
        raise LimitError(f"K*N must be at most 2^30 elements, got {k}x{n}")
    return k, n


def parse_shape(text: str) -> tuple[int, int]:
    """``KxN`` (``x``, ``X`` or ``×``) as two integers within the limits."""
    match = _SHAPE.match(text)
    if not match:
        raise LimitError(f"{text!r} is not of the form KxN (e.g. 4096x14336)")
    return check_shape(int(match.group(1)), int(match.group(2)))


def check_batches(batches: Iterable[int]) -> tuple[int, ...]:
    """The batch sizes in ascending order without repeats; each must lie within the limits."""
    values = tuple(batches)
    if not values:
        raise LimitError("the batch list is empty")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int):
            raise LimitError(f"{value!r} is not an integer")
        if not MIN_BATCH <= value <= MAX_BATCH:
            raise LimitError(f"{value} is not a batch size in {MIN_BATCH}..{MAX_BATCH}")
    return tuple(sorted(set(values)))


def parse_batches(text: str) -> tuple[int, ...]:
    """A comma-separated list of batch sizes, as :func:`check_batches` returns it."""
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts):
        raise LimitError(f"{text!r} must be a comma-separated list of positive integers")
    values = []
    for part in parts:
        try:
            values.append(int(part))
        except ValueError:
            raise LimitError(f"{part!r} is not an integer") from None
    return check_batches(values)


def check_efficiency_percent(value: int) -> int:
    if not MIN_EFFICIENCY_PERCENT <= value <= MAX_EFFICIENCY_PERCENT:
        raise LimitError(
            f"{value} must lie in {MIN_EFFICIENCY_PERCENT}..{MAX_EFFICIENCY_PERCENT} (percent)"
        )
    return value


def parse_efficiency_percent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise LimitError(f"{text!r} is not an integer percent") from None
    return check_efficiency_percent(value)


# Model plans. The command line (``--context``, ``--tensor-parallel``), the pod's
# ``--models-json``/``--models-file``, the operator's ``spec.models`` and the CRD all read these.

#: Models per profile, per ``--models-json`` or ``--models-file``.
MAX_MODELS = 8
#: Weight formats one profile measures the roofline of: ``--weight-format``'s and one per model
#: (``cli/arguments.profiled_formats``), each once; the compact result's ``f`` and the status's
#: ``weightFormats`` hold at most this many.
MAX_WEIGHT_FORMATS = MAX_MODELS + 1
DEFAULT_CONTEXT_TOKENS = 4096
MAX_CONTEXT_TOKENS = 1 << 20
DEFAULT_TENSOR_PARALLEL = 1
MAX_TENSOR_PARALLEL = 64
#: Longest inter-token latency SLO the CRD takes (``slo.interTokenLatency``), in seconds.
MAX_ITL_SLO_SECONDS = 60.0
#: Plans under load (``--request-rate``, ``--ttft-slo``, ``--max-num-batched-tokens``,
#: ``--max-num-seqs``): rates one replica could be asked, a TTFT target, an engine's limits.
MAX_REQUEST_RATE = 1e6
MAX_REQUEST_RATES = 16
MAX_TTFT_SLO_SECONDS = 3600.0
MAX_BATCHED_TOKENS = 1 << 20
MAX_NUM_SEQS = 1 << 16
#: Upper bounds of a model config's integer fields (the lower bound is 1). Each lies well past
#: today's largest open models (Llama-3.1-405B: 126 layers, hidden 16384; DeepSeek-V3: 256
#: experts; Gemma: 262,144 tokens of vocabulary) and keeps the work of reading a config — the
#: MoE layer count walks every layer — small on the operator's event loop.
MODEL_FIELD_LIMITS: dict[str, int] = {
    "num_hidden_layers": 1024,
    "hidden_size": 1 << 17,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 4096,
    "intermediate_size": MAX_DIMENSION,
    "moe_intermediate_size": MAX_DIMENSION,
    "shared_expert_intermediate_size": MAX_DIMENSION,
    "vocab_size": 1 << 22,
    "num_local_experts": 4096,
    "num_experts": 4096,
    "num_experts_per_tok": 4096,
    "decoder_sparse_step": 1024,
    "max_position_embeddings": 1 << 27,
    "sliding_window": 1 << 27,
}
#: Top-level fields of one model config (published ``config.json`` files have 20 to 60).
MAX_CONFIG_FIELDS = 512
#: Bytes of one model config as JSON (published ones have 1 to 5 KiB); eight of them fit the
#: 1 MiB of the ConfigMap that carries the models to the profiler pod.
MAX_CONFIG_BYTES = 64 * 1024
#: Bytes of a ``--models-file`` (the operator's ConfigMap): every model at its largest config.
MAX_MODELS_FILE_BYTES = MAX_MODELS * (MAX_CONFIG_BYTES + 1024)
