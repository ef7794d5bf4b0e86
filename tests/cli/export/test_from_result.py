"""A saved result as an export source: a class's numbers hold on each of its devices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline_cli.export.from_result import source_of_result
from roofline_cli.export.from_status import SourceError
from roofline_operator.decide.labels import label_safe
from roofline_profiler.core.itl_model import ItlModel
from roofline_profiler.wire.result import ProfileResult
from tests.profiler.synthetic import planned_result


def _two_devices() -> ProfileResult:
    """The synthetic result with a second, slower H200: a smaller latency bound, fewer tokens/s,
    a larger intercept, and no min batch of its own."""
    result = planned_result()
    first = result.devices[0]
    plan = first.models[0]
    assert plan.tokens_per_second_at_range is not None
    assert plan.itl_model is not None
    slower = replace(
        plan,
        min_batch=None,
        max_batch_by_latency=120,
        tokens_per_second_at_range=(4000.0, 6000.0),
        itl_model=replace(plan.itl_model, intercept_seconds=0.009, max_relative_error=0.123),
    )
    second = replace(first, index=1, models=(slower,))
    return replace(result, devices=(first, second))


def test_one_device_is_one_class_whose_numbers_are_its_plan() -> None:
    result = planned_result()
    (plan,) = source_of_result(result, "result.json").plans
    original = result.devices[0].models[0]
    assert (plan.model, plan.gpu_class, plan.context_tokens) == (
        "llama-3.1-8b",
        "NVIDIA H200",
        4096,
    )
    assert (plan.max_batch, plan.max_batch_by_memory, plan.max_batch_by_latency) == (164, 218, 164)
    assert plan.kv_cache_tokens == 218 * 4096
    assert plan.engine_flags == dict(original.engine_settings)
    assert plan.itl is not None
    assert original.itl_model is not None
    assert plan.itl.intercept_seconds == pytest.approx(original.itl_model.intercept_seconds, 1e-3)
    assert plan.itl.max_relative_error >= original.itl_model.max_relative_error


def test_devices_of_one_name_fold_into_the_numbers_that_hold_on_each() -> None:
    source = source_of_result(_two_devices(), "result.json")
    (plan,) = source.plans
    assert plan.min_batch is None
    assert (plan.max_batch, plan.max_batch_by_latency) == (120, 120)
    assert plan.tokens_per_second_at_max_batch == 6000.0
    assert plan.itl is not None
    assert plan.itl.measured_on == "result.json device 1"
    assert plan.itl.max_relative_error == 0.13
    assert "device 0, 1" in plan.source


def test_the_machine_is_one_class_labelled_with_its_worst_devices_product() -> None:
    (node,) = source_of_result(_two_devices(), "result.json").node_classes
    assert (node.label, node.product, node.accelerated) == (
        label_safe("NVIDIA H200"),
        "NVIDIA H200",
        True,
    )
    assert node.gpus == 2
    assert node.tokens_per_second == {"llama-3.1-8b": 6000.0}


def test_a_plan_without_an_itl_model_exports_none() -> None:
    result = planned_result()
    bare = tuple(replace(p, itl_model=None) for p in result.devices[0].models)
    result = replace(result, devices=(replace(result.devices[0], models=bare),))
    assert source_of_result(result, "r").plans[0].itl is None
    assert isinstance(ItlModel, type)


def test_a_cpu_result_is_a_class_without_an_accelerator() -> None:
    result = planned_result()
    result = replace(result, devices=(replace(result.devices[0], backend="cpu"),))
    (node,) = source_of_result(result, "r").node_classes
    assert not node.accelerated


ENGINES_EMPTY: dict[str, tuple[str, ...]] = {"vllm": (), "sglang": (), "tgi": (), "tensorrtLlm": ()}


def _changed_plan(**changes: object) -> ProfileResult:
    result = planned_result()
    first = result.devices[0]
    return replace(result, devices=(replace(first, models=(replace(first.models[0], **changes),)),))


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        pytest.param(
            replace(
                planned_result(),
                devices=(replace(planned_result().devices[0], name="NVIDIA H200\u2028  x: y"),),
            ),
            "'name'",
            id="device-name",
        ),
        pytest.param(_changed_plan(name="llama\n# x"), "model name", id="model-name"),
        pytest.param(_changed_plan(name="a/b"), "model name", id="model-name-slash"),
        pytest.param(
            _changed_plan(engine_settings={**ENGINES_EMPTY, "vllm": ("--max-num-seqs=9\u2028x",)}),
            "engineSettings",
            id="engine-flag",
        ),
        pytest.param(
            _changed_plan(tokens_per_second_at_range=(1.0, 5e-324)), "tokens/s", id="rate"
        ),
        pytest.param(_changed_plan(max_batch_by_memory=10**15), "batch bound", id="batch"),
    ],
)
def test_a_name_flag_or_rate_outside_its_contract_is_one_source_error(
    result: ProfileResult, reason: str
) -> None:
    with pytest.raises(SourceError, match=reason) as caught:
        source_of_result(result, "result.json")
    assert "\n" not in str(caught.value)
    assert str(caught.value).isprintable()


def test_flags_that_miss_an_engine_come_from_the_bounds() -> None:
    (plan,) = source_of_result(_changed_plan(engine_settings={"vllm": ()}), "r.json").plans
    assert plan.engine_flags is None
