import dataclasses

import pytest

from roofline_profiler.core import model_config, models, planning
from roofline_profiler.core.planning import PlanOptions, StepPrediction

GIB = 2**30
PEAK = 1e15


@pytest.fixture
def llama8() -> model_config.ModelArch:
    return model_config.load_model("llama-3.1-8b")


def _at_fraction_of_peak(
    arch: model_config.ModelArch, context: int, fractions: dict[int, float]
) -> list[StepPrediction]:
    """Predictions whose batch B achieves exactly fractions[B] of PEAK, attention included."""
    return [
        StepPrediction(b, context, models.decode_step_flops(arch, b, context) / (f * PEAK))
        for b, f in fractions.items()
    ]


def _plan(
    arch: model_config.ModelArch,
    predictions: list[StepPrediction],
    context: int = 4096,
    memory: int = 80 * GIB,
    **options: float,
) -> planning.ModelPlan:
    return planning.plan_model(
        arch, "bfloat16", context, 1, True, predictions, memory, PEAK, PlanOptions(**options)
    )


def test_min_batch_is_the_smallest_from_which_every_larger_batch_is_efficient(
    llama8: model_config.ModelArch,
) -> None:
    predictions = _at_fraction_of_peak(
        llama8, 4096, {16: 0.2, 32: 0.55, 64: 0.45, 128: 0.6, 256: 0.7}
    )
    plan = _plan(llama8, predictions, memory=192 * GIB)
    assert plan.max_batch_by_memory > 256
    assert (plan.min_batch, plan.min_batch_reason) == (128, None)


def test_min_batch_threshold_follows_the_option(llama8: model_config.ModelArch) -> None:
    predictions = _at_fraction_of_peak(llama8, 4096, {16: 0.2, 32: 0.35, 64: 0.45})
    assert _plan(llama8, predictions, min_efficiency_percent=30).min_batch == 32


def test_min_batch_is_null_with_a_reason_when_attention_keeps_every_batch_below(
    llama8: model_config.ModelArch,
) -> None:
    predictions = _at_fraction_of_peak(llama8, 32768, {1: 0.01, 8: 0.05, 64: 0.1})
    plan = _plan(llama8, predictions, context=32768)
    assert plan.min_batch is None
    assert plan.min_batch_reason == (
        "at 32768 tokens of context attention keeps every batch up to 64 below 50% of peak "
        "(best 10% at batch 64)"
    )


def test_a_min_batch_beyond_the_memory_bound_says_so(llama8: model_config.ModelArch) -> None:
    predictions = _at_fraction_of_peak(llama8, 4096, {64: 0.3, 256: 0.6})
    plan = _plan(llama8, predictions)
    assert plan.min_batch == 256
    assert plan.min_batch_reason is not None
    assert f"only {plan.max_batch_by_memory} sequences of 4096 tokens fit" in plan.min_batch_reason
    assert plan.recommended_range is None
    assert any("below the min batch 256" in w for w in plan.warnings)


def test_max_batch_by_latency_interpolates_on_log_log_axes(llama8: model_config.ModelArch) -> None:
    predictions = [StepPrediction(16, 4096, 0.010), StepPrediction(64, 4096, 0.040)]
    plan = _plan(llama8, predictions, itl_slo_seconds=0.02)
    assert plan.max_batch_by_latency == 32  # linear through the origin on log-log: exact


def test_max_batch_by_latency_is_null_without_an_slo(llama8: model_config.ModelArch) -> None:
    assert _plan(llama8, [StepPrediction(16, 4096, 0.01)]).max_batch_by_latency is None


def test_an_slo_no_batch_meets_gives_zero_and_a_warning(llama8: model_config.ModelArch) -> None:
    plan = _plan(llama8, [StepPrediction(1, 4096, 0.02)], itl_slo_seconds=0.01)
    assert plan.max_batch_by_latency == 0
    assert plan.recommended_range is None
    assert "no batch meets the 10 ms ITL SLO" in plan.warnings[0]


def test_an_slo_no_batch_meets_still_gives_flags_for_batch_one(
    llama8: model_config.ModelArch,
) -> None:
    plan = _plan(llama8, [StepPrediction(1, 4096, 0.05)], itl_slo_seconds=0.01)
    assert plan.max_batch_by_latency == 0
    assert "--max-num-seqs=1" in plan.engine_settings["vllm"]


def test_an_slo_every_batch_meets_stops_at_the_largest_prediction(
    llama8: model_config.ModelArch,
) -> None:
    plan = _plan(llama8, [StepPrediction(8, 4096, 0.01), StepPrediction(16, 4096, 0.012)],
                 itl_slo_seconds=1.0)  # fmt: skip
    assert plan.max_batch_by_latency == 16
    assert any("predict larger batches" in w for w in plan.warnings)


def test_recommended_range_runs_from_min_batch_to_the_tighter_bound(
    llama8: model_config.ModelArch,
) -> None:
    fractions = {8: 0.2, 16: 0.5, 32: 0.6, 64: 0.7, 128: 0.8}
    predictions = _at_fraction_of_peak(llama8, 4096, fractions)
    slo = next(p.step_seconds for p in predictions if p.batch == 64)
    plan = _plan(llama8, predictions, itl_slo_seconds=slo)
    assert plan.max_batch_by_latency == 64
    assert plan.recommended_range == (16, 64)
    low, high = plan.tokens_per_second_at_range or (0.0, 0.0)
    by_batch = {p.batch: p for p in predictions}
    assert low == pytest.approx(by_batch[16].tokens_per_second)
    assert high == pytest.approx(by_batch[64].tokens_per_second)


def test_cost_per_million_tokens_counts_every_gpu_of_the_tp_group(
    llama8: model_config.ModelArch,
) -> None:
    predictions = [StepPrediction(10, 4096, 0.01)]  # 1000 tokens/s
    plan = planning.plan_model(
        llama8, "bfloat16", 4096, 2, False, predictions, 80 * GIB, PEAK,
        PlanOptions(gpu_hour_cost=3.6),
    )  # fmt: skip
    assert plan.cost_per_million_tokens == ((10, pytest.approx(2.0)),)
    assert _plan(llama8, predictions).cost_per_million_tokens == ()


def test_predictions_at_other_contexts_are_left_out(llama8: model_config.ModelArch) -> None:
    predictions = [StepPrediction(4, 256, 0.01), StepPrediction(4, 4096, 0.02)]
    plan = _plan(llama8, predictions)
    assert plan.predictions == (StepPrediction(4, 4096, 0.02),)
    with pytest.raises(ValueError, match="no predicted step at 1024"):
        _plan(llama8, predictions, context=1024)


def test_weights_that_do_not_fit_leave_no_batch_and_say_why(llama8: model_config.ModelArch) -> None:
    plan = _plan(llama8, [StepPrediction(1, 4096, 0.01)], memory=16 * GIB)
    assert plan.max_batch_by_memory == 0
    assert plan.recommended_range is None
    assert "leave no room for one sequence of 4096 tokens" in plan.warnings[0]
    assert plan.engine_settings == dict.fromkeys(("vllm", "sglang", "tgi", "tensorrtLlm"), ())


def test_a_context_past_the_models_positions_warns() -> None:
    arch = model_config.load_model("mixtral-8x7b")
    plan = _plan(arch, [StepPrediction(1, 65536, 0.05)], context=65536, memory=192 * GIB)
    assert any("max_position_embeddings (32768)" in w for w in plan.warnings)


def test_engine_settings_use_the_top_of_the_range(llama8: model_config.ModelArch) -> None:
    predictions = [StepPrediction(16, 4096, 0.010), StepPrediction(64, 4096, 0.040)]
    plan = _plan(llama8, predictions, itl_slo_seconds=0.02)
    assert "--max-num-seqs=32" in plan.engine_settings["vllm"]
    assert "--max-model-len=4096" in plan.engine_settings["vllm"]


def test_interpolation_is_exact_at_predictions_and_a_power_law_between() -> None:
    points = [StepPrediction(4, 0, 0.01), StepPrediction(16, 0, 0.04), StepPrediction(64, 0, 0.08)]
    assert planning.interpolated_step_seconds(points, 16) == 0.04
    assert planning.interpolated_step_seconds(points, 8) == pytest.approx(0.02)
    assert planning.interpolated_step_seconds(points, 256) == pytest.approx(0.16)
    assert planning.interpolated_step_seconds(points, 1) == pytest.approx(0.0025)


def test_plan_round_trips_through_its_camel_case_dict(llama8: model_config.ModelArch) -> None:
    predictions = _at_fraction_of_peak(llama8, 4096, {8: 0.2, 16: 0.5, 32: 0.6})
    plan = _plan(llama8, predictions, itl_slo_seconds=0.05, gpu_hour_cost=2.0)
    d = plan.to_dict()
    assert set(d) >= {
        "name", "dtype", "weightBytes", "kvCacheBytesPerToken", "contextTokens", "tensorParallel",
        "minBatch", "maxBatchByMemory", "maxBatchByLatency", "predictions", "engineSettings",
    }  # fmt: skip
    assert d["weightBytes"] == 16_060_522_496
    assert d["kvCacheBytesPerToken"] == 131_072
    assert set(d["predictions"][0]) == {"batch", "contextTokens", "stepSeconds", "tokensPerSecond"}
    assert set(d["engineSettings"]) == {"vllm", "sglang", "tgi", "tensorrtLlm"}
    assert planning.ModelPlan.from_dict(d) == plan


def test_a_quantized_plan_names_its_format_and_cache_and_counts_their_bytes(
    llama8: model_config.ModelArch,
) -> None:
    awq = dataclasses.replace(llama8, weight_format="awq-int4-g128", kv_cache_dtype="fp8")
    plan = _plan(awq, _at_fraction_of_peak(awq, 4096, {8: 0.2, 16: 0.5, 32: 0.6}))
    d = plan.to_dict()
    assert (d["weightFormat"], d["kvCacheDtype"]) == ("awq-int4-g128", "fp8")
    assert d["kvCacheBytesPerToken"] == 131_072 // 2
    assert d["weightBytes"] < 0.4 * 16_060_522_496
    assert "--quantization=awq" in d["engineSettings"]["vllm"]
    assert planning.ModelPlan.from_dict(d) == plan
    assert (
        "weightFormat" not in _plan(llama8, _at_fraction_of_peak(llama8, 4096, {8: 0.5})).to_dict()
    )


def test_unknown_dtype_is_rejected(llama8: model_config.ModelArch) -> None:
    with pytest.raises(ValueError, match="unknown dtype 'int3'"):
        planning.plan_model(
            llama8, "int3", 4096, 1, True, [StepPrediction(1, 4096, 0.01)], GIB, PEAK,
            PlanOptions(),
        )  # fmt: skip


def test_modelled_tensor_parallel_is_flagged(llama8: model_config.ModelArch) -> None:
    plan = planning.plan_model(
        llama8, "bfloat16", 4096, 2, False, [StepPrediction(8, 4096, 0.01)], 80 * GIB, PEAK,
        PlanOptions(),
    )  # fmt: skip
    assert "all-reduces of tensor parallel 2 are modelled, not measured" in plan.warnings[0]


def test_unknown_device_memory_is_rejected(llama8: model_config.ModelArch) -> None:
    with pytest.raises(ValueError, match="device memory must be known"):
        _plan(llama8, [StepPrediction(1, 4096, 0.01)], memory=0)
