"""The real decode step of a ``transformers`` model, the reference a prediction is scored against.

A model is built from its config with random weights (nothing is downloaded). Its decode step is
timed with a static KV cache filled to the context (``model(next_tokens, cache=...)`` with the
cache position reset before each run, so every run attends over the same context); on a GPU the
step is replayed as a CUDA graph, as the engines run it. A point whose runs disagree by more than
:data:`RETAKE_RATIO` is timed again, and its reference is the geometric mean of the two runs that
agree best. A candidate (the prediction, or one more real run as the noise floor) scores the
geometric mean of ``|ln(c/r)|`` against it, and its worst point.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

#: Reference runs of a point further apart than this are retaken (see ``retake_disagreeing``).
RETAKE_RATIO = 1.10
RETAKES = 2

#: Per point: at least this many timed steps, more while under the time budget.
MIN_STEPS = 3
MAX_STEPS = 15
STEP_BUDGET_SECONDS = 1.0


def build_model(config: dict[str, Any], device: str = "cpu", dtype: str = "float32") -> Any:
    import transformers

    cls = getattr(transformers, config["architectures"][0])
    fields = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}
    hf_config = transformers.AutoConfig.for_model(**fields)
    torch.manual_seed(0)
    with torch.device(device):
        model = cls(hf_config).to(getattr(torch, dtype)).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: Why a GPU reference step could not be captured as a CUDA graph (then it ran eagerly).
EAGER_REASONS: list[str] = []


def _graphed(step: Any, device: torch.device) -> Any:
    """``step`` captured as a CUDA graph (the engines replay their decode steps so); its replay,
    or ``step`` itself when the capture fails (the reason goes to :data:`EAGER_REASONS`)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            step()
    except RuntimeError as error:
        torch.cuda.synchronize(device)
        EAGER_REASONS.append((str(error).strip().splitlines() or ["RuntimeError"])[0][:160])
        return step
    return graph.replay


def decode_step_seconds(model: Any, batch: int, context: int, quick: bool) -> float:
    """Median time of one decode step at ``batch`` sequences of ``context`` cached tokens; on a
    GPU the step (the cache reset and the forward) is replayed as a CUDA graph."""
    from transformers import StaticCache

    device = model.device
    cache = StaticCache(config=model.config, max_cache_len=context + 1)
    ids = torch.randint(0, model.config.vocab_size, (batch, 1), device=device)
    position = torch.tensor([context], device=device)

    def step() -> None:
        for layer in cache.layers:
            layer.cumulative_length.fill_(context)
        model(ids, cache=cache, cache_position=position)

    with torch.no_grad():
        model(ids, cache=cache, cache_position=position)  # allocates the cache
        for layer in cache.layers:
            layer.keys.normal_()
            layer.values.normal_()
        run = _graphed(step, device) if device.type == "cuda" else step
        times: list[float] = []
        spent = time.perf_counter()
        while len(times) < (2 if quick else MAX_STEPS):
            _sync(device)
            start = time.perf_counter()
            run()
            _sync(device)
            times.append(time.perf_counter() - start)
            enough = len(times) >= (2 if quick else MIN_STEPS)
            if enough and time.perf_counter() - spent > STEP_BUDGET_SECONDS:
                break
    return statistics.median(times[1:] if len(times) > 2 else times)


def reference_run(
    model: Any, batches: tuple[int, ...], contexts: tuple[int, ...], quick: bool
) -> dict[tuple[int, int], float]:
    """The real step at every ``(batch, context)`` point, each context's batches in turn."""
    return {(b, c): decode_step_seconds(model, b, c, quick) for c in contexts for b in batches}


def _closest_pair(runs: list[float]) -> tuple[float, float]:
    """The two runs that agree best: the smallest ratio of the slower to the faster."""
    pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :]]
    return min(pairs, key=lambda p: max(p) / min(p))


def reference_of(runs: list[float]) -> float:
    """The geometric mean of the two runs that agree best (before and after, when no point
    needed a retake)."""
    a, b = _closest_pair(runs)
    return math.sqrt(a * b)


def retake_disagreeing(
    model: Any,
    first: dict[tuple[int, int], float],
    second: dict[tuple[int, int], float],
    quick: bool,
) -> dict[tuple[int, int], list[float]]:
    """Points whose two reference runs disagree by more than :data:`RETAKE_RATIO`, timed again
    (at most :data:`RETAKES` times, until two runs agree): a burst of outside load during one run
    of one point is then not taken for the model's speed."""
    retakes: dict[tuple[int, int], list[float]] = {}
    for (b, c), before in first.items():
        runs = [before, second[(b, c)]]
        while len(runs) < 2 + RETAKES and not _agree(runs):
            runs.append(decode_step_seconds(model, b, c, quick))
        if len(runs) > 2:
            retakes[(b, c)] = runs[2:]
    return retakes


def _agree(runs: list[float]) -> bool:
    a, b = _closest_pair(runs)
    return max(a, b) / min(a, b) <= RETAKE_RATIO


def log_errors(
    candidate: dict[tuple[int, int], float], reference: dict[tuple[int, int], float]
) -> list[float]:
    """``|ln(c/r)|`` at every point of the reference, in its order."""
    return [abs(math.log(candidate[k] / reference[k])) for k in reference]


def errors(
    candidate: dict[tuple[int, int], float], reference: dict[tuple[int, int], float]
) -> tuple[float, float]:
    """Geometric-mean error ``exp(mean |ln(c/r)|) − 1`` and the worst ``|c/r − 1|``."""
    logs = log_errors(candidate, reference)
    worst = max(abs(candidate[k] / reference[k] - 1) for k in reference)
    return math.exp(statistics.fmean(logs)) - 1, worst
