"""Composing measured decode-step parts into step times and plans (pure, synthetic timings)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from roofline_profiler.core.decode_model import (
    AttentionTime,
    ComponentTime,
    MissingMeasurement,
    ModelMeasurements,
    attention_notes,
    attention_seconds,
    contention_notes,
    layer_kinds,
    layers_of_kind,
    measurements_from_dict,
    measurements_to_dict,
    plan_models,
    predictions,
    same_shapes,
    step_seconds,
)
from roofline_profiler.core.model_config import load_model, model_from_config
from roofline_profiler.core.planning import PlanOptions
from roofline_profiler.core.stats import Measurement

BATCHES = (1, 2, 4, 8)
LLAMA_8B = load_model("llama-3.1-8b")


def synthetic(
    arch=LLAMA_8B,  # type: ignore[no-untyped-def]
    contexts: tuple[int, ...] = (1024, 4096),
    tp: int = 1,
) -> ModelMeasurements:
    """Body 1 ms + 0.1 ms/token of batch, head 2 ms, attention 1 µs per sequence-token + 5 µs."""
    kinds = layer_kinds(arch)
    return ModelMeasurements(
        arch=arch,
        dtype="bfloat16",
        tensor_parallel=tp,
        layer_bodies={
            kind: tuple(
                ComponentTime(b, 1e-3 + 1e-4 * b, Measurement("body", (1e-3,))) for b in BATCHES
            )
            for kind in kinds
        },
        head=tuple(ComponentTime(b, 2e-3) for b in BATCHES),
        head_scale=1.0,
        attention=tuple(
            AttentionTime(b, c, 5e-6 + 1e-9 * b * c, extrapolated=b == 8)
            for c in contexts
            for b in BATCHES
        ),
        all_reduce=tuple(ComponentTime(b, 1e-5) for b in BATCHES) if tp > 1 else (),
        all_reduce_measured=tp == 1,
    )


def test_the_step_is_layers_times_body_and_attention_plus_the_head() -> None:
    m = synthetic()
    body, attention, head = 1e-3 + 4e-4, 5e-6 + 1e-9 * 4 * 4096, 2e-3
    assert step_seconds(m, 4, 4096) == pytest.approx(32 * (body + attention) + head)


def test_tensor_parallel_adds_two_all_reduces_per_layer() -> None:
    single, split = synthetic(), synthetic(tp=2)
    difference = step_seconds(split, 2, 1024) - step_seconds(single, 2, 1024)
    assert difference == pytest.approx(32 * 2 * 1e-5)


def test_attention_between_measured_contexts_is_interpolated_linearly() -> None:
    seconds, how = attention_seconds(synthetic(), 2, 2048)
    assert how == "interpolated"
    assert seconds == pytest.approx(5e-6 + 1e-9 * 2 * 2048)


def test_attention_beyond_the_measured_contexts_is_extrapolated_along_their_line() -> None:
    seconds, how = attention_seconds(synthetic(), 2, 8192)
    assert how == "extrapolated"
    assert seconds == pytest.approx(5e-6 + 1e-9 * 2 * 8192)


def test_one_measured_context_scales_attention_in_proportion_to_the_context() -> None:
    seconds, how = attention_seconds(synthetic(contexts=(1000,)), 1, 3000)
    assert how == "extrapolated"
    assert seconds == pytest.approx(3 * (5e-6 + 1e-9 * 1000))


def test_a_sliding_window_caps_the_tokens_attention_reads() -> None:
    config = {
        "model_type": "mistral",
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "max_position_embeddings": 65536,
        "sliding_window": 1024,
    }
    m = synthetic(arch=model_from_config(config, "windowed"), contexts=(1024,))
    assert attention_seconds(m, 2, 32768) == attention_seconds(m, 2, 1024)


def test_notes_name_the_batches_whose_attention_was_not_measured_as_such() -> None:
    notes = attention_notes(synthetic(), 4096)
    assert len(notes) == 1
    assert "batch 8" in notes[0]
    assert "proportion to the batch" in notes[0]
    assert any("interpolated" in n for n in attention_notes(synthetic(), 2048))


def test_a_batch_that_was_not_measured_is_reported_missing() -> None:
    with pytest.raises(MissingMeasurement, match="batch 16"):
        step_seconds(synthetic(), 16, 1024)


def test_moe_models_with_dense_layers_time_both_kinds() -> None:
    config = {
        "model_type": "qwen2_moe",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 2,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }
    arch = model_from_config(config, "mixed")
    assert layer_kinds(arch) == ("dense", "moe")
    assert layers_of_kind(arch, "dense") + layers_of_kind(arch, "moe") == 4
    assert layer_kinds(load_model("mixtral-8x7b")) == ("moe",)
    assert layer_kinds(LLAMA_8B) == ("dense",)


def test_measurements_survive_a_json_round_trip() -> None:
    m = synthetic(tp=2)
    again = measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m))))
    assert again == m
    assert same_shapes(again.arch, LLAMA_8B)
    assert not same_shapes(again.arch, load_model("qwen3-8b"))


def test_plans_come_one_per_context_with_the_measurement_notes() -> None:
    m = synthetic()
    plans = plan_models(m, (1024, 4096), 141 << 30, 9.9e14, PlanOptions(itl_slo_seconds=0.05))
    assert [p.context_tokens for p in plans] == [1024, 4096]
    assert [p.batch for p in plans[0].predictions] == list(BATCHES)
    assert plans[0].predictions == predictions(m, 1024)
    assert any("proportion to the batch" in w for w in plans[1].warnings)
    assert plans[0].max_batch_by_latency is not None


def _waited(waits: tuple[float, ...]) -> Measurement:
    """A part measured in one pass per wait share, each pass's run 1 ms."""
    return Measurement(
        "part", (1e-3,) * len(waits), rounds=tuple(range(len(waits))), cpu_waits=waits
    )


def test_parts_that_waited_for_a_cpu_in_every_pass_are_named_in_a_contention_note() -> None:
    m = synthetic()
    bodies = {
        "dense": tuple(
            replace(t, measurement=_waited((0.3, 0.2) if t.batch <= 2 else (0.3, 0.0)))
            for t in m.layer_bodies["dense"]
        )
    }
    attention = tuple(
        replace(a, measurement=_waited((0.5, 0.5))) if a.context_tokens == 4096 else a
        for a in m.attention
    )
    m = replace(m, layer_bodies=bodies, attention=attention)
    (at_1024,) = contention_notes(m, 1024)
    assert at_1024.startswith("CpuContention: the dense layer at batch 1, 2 ran while")
    assert "up to 20% of the time" in at_1024  # the quieter pass of each part decides
    assert "attention" not in at_1024  # attention was held up only at another context
    (at_4096,) = contention_notes(m, 4096)
    assert "attention at 4096 tokens at batch 1, 2, 4, 8" in at_4096
    assert "up to 50%" in at_4096
    plans = plan_models(m, (1024,), 141 << 30, 9.9e14, PlanOptions())
    assert at_1024 in plans[0].warnings


def test_a_quiet_pass_or_an_unknown_wait_gives_no_contention_note() -> None:
    m = synthetic()
    quiet = {
        "dense": tuple(
            replace(t, measurement=_waited((0.4, 0.05))) for t in m.layer_bodies["dense"]
        )
    }
    assert contention_notes(replace(m, layer_bodies=quiet), 1024) == ()
    assert contention_notes(m, 1024) == ()  # no wait shares recorded (not a CPU, not Linux)


def test_passes_and_cpu_waits_survive_a_json_round_trip() -> None:
    m = synthetic()
    waited = {
        "dense": tuple(replace(t, measurement=_waited((0.3, 0.2))) for t in m.layer_bodies["dense"])
    }
    m = replace(m, layer_bodies=waited)
    assert measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m)))) == m


def test_each_plan_carries_the_itl_model_of_its_predicted_steps() -> None:
    """The synthetic parts compose into a step that is exactly α + β·B + γ·B·C, so the fit over
    quarters of each plan's context recovers the composition's own terms."""
    m = synthetic()
    layers = LLAMA_8B.num_layers
    for plan in plan_models(m, (1024, 4096), 141 << 30, 9.9e14, PlanOptions()):
        itl = plan.itl_model
        assert itl is not None
        assert itl.coefficients == pytest.approx(
            (layers * (1e-3 + 5e-6) + 2e-3, layers * 1e-4, layers * 1e-9), rel=1e-9
        )
        assert itl.max_relative_error < 1e-9
        assert itl.batches == BATCHES
        assert itl.contexts[-1] == plan.context_tokens
