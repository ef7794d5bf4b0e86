"""Composing measured decode-step parts into step times and plans (pure, synthetic timings)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofline_profiler.core.decode_model import (
    AttentionRoofline,
    AttentionTime,
    ComponentTime,
    MissingMeasurement,
    ModelMeasurements,
    attention_notes,
    attention_seconds,
    contention_notes,
    engine_step_seconds,
    fastest_parts,
    layer_kinds,
    layers_of_kind,
    monotonicity_notes,
    parts_step_seconds,
    plan_models,
    predictions,
    step_seconds,
)
from roofline_profiler.core.engines import NONE, Engine, StepEngine
from roofline_profiler.core.model_config import load_model, model_from_config
from roofline_profiler.core.planning import PlanOptions
from roofline_profiler.core.stats import Measurement
from tests.profiler.core.step_builders import BATCHES, LLAMA_8B, synthetic, waited


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


def test_plans_come_one_per_context_with_the_measurement_notes() -> None:
    m = synthetic()
    plans = plan_models(m, (1024, 4096), 141 << 30, 9.9e14, PlanOptions(itl_slo_seconds=0.05))
    assert [p.context_tokens for p in plans] == [1024, 4096]
    assert [p.batch for p in plans[0].predictions] == list(BATCHES)
    assert plans[0].predictions == predictions(m, 1024)
    assert any("proportion to the batch" in w for w in plans[1].warnings)
    assert plans[0].max_batch_by_latency is not None


def test_parts_that_waited_for_a_cpu_in_every_pass_are_named_in_a_contention_note() -> None:
    m = synthetic()
    bodies = {
        "dense": tuple(
            replace(t, measurement=waited((0.3, 0.2) if t.batch <= 2 else (0.3, 0.0)))
            for t in m.layer_bodies["dense"]
        )
    }
    attention = tuple(
        replace(a, measurement=waited((0.5, 0.5))) if a.context_tokens == 4096 else a
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
        "dense": tuple(replace(t, measurement=waited((0.4, 0.05))) for t in m.layer_bodies["dense"])
    }
    assert contention_notes(replace(m, layer_bodies=quiet), 1024) == ()
    assert contention_notes(m, 1024) == ()  # no wait shares recorded (not a CPU, not Linux)


ROOFLINE = AttentionRoofline(read_bytes_per_second=2e10, peak_flops_per_second=4e11)


def test_attention_from_the_roofline_is_the_kv_bytes_at_the_read_bandwidth() -> None:
    m = replace(synthetic(), attention_roofline=ROOFLINE)
    seconds, how = attention_seconds(m, 8, 3000)
    # Llama 3.1 8B reads 8 KV heads of 128 in bf16 per token and layer, K and V.
    assert how == "roofline"
    assert seconds == pytest.approx(2 * 8 * 3000 * 8 * 128 * 2 / 2e10)
    assert attention_notes(m, 3000) == ()  # at any context: nothing interpolated


def test_the_roofline_takes_the_flops_at_the_peak_where_they_take_longer() -> None:
    slow_peak = AttentionRoofline(read_bytes_per_second=2e10, peak_flops_per_second=1e9)
    seconds = slow_peak.seconds(LLAMA_8B, "bfloat16", 1, 4, 1000)
    assert seconds == pytest.approx(4 * 4 * 1000 * 32 * 128 / 1e9)


def test_the_plan_predicts_the_engines_step_and_records_the_engine() -> None:
    engine = Engine("e", "an engine", ("cpu",), 2e-3, 1e-4, "bench")
    m = replace(synthetic(), attention_roofline=ROOFLINE, linear="onednn-packed")
    bare = {p.batch: p.step_seconds for p in predictions(m, 1024)}
    served = {p.batch: p.step_seconds for p in predictions(m, 1024, engine)}
    assert all(served[b] == pytest.approx(bare[b] + 2e-3 + 1e-4 * b) for b in BATCHES)
    (plan,) = plan_models(m, (1024,), 141 << 30, 9.9e14, PlanOptions(), engine)
    assert plan.engine == StepEngine("e", "roofline", "onednn-packed", 2e-3, 1e-4)
    assert plan.to_dict()["engine"]["perSequenceSeconds"] == 1e-4


def test_the_fastest_parts_take_each_parts_fastest_sample_and_scale_the_head() -> None:
    body = ComponentTime(1, 3e-3, Measurement("body", (4e-3, 2e-3, 3e-3)))
    head = ComponentTime(1, 6e-3, Measurement("head", (2e-3, 3e-3)))
    attention = AttentionTime(1, 1024, 5e-4, False, Measurement("attention", (6e-4, 4e-4)))
    m = replace(
        synthetic(),
        layer_bodies={"dense": (body,)},
        head=(head,),
        head_scale=2.0,
        attention=(attention,),
    )
    fastest = fastest_parts(m)
    assert fastest.layer_bodies["dense"][0].seconds == 2e-3
    assert fastest.head[0].seconds == 4e-3
    assert fastest.attention[0].seconds == 4e-4
    untimed = replace(synthetic(), head=(ComponentTime(1, 1e-3),))
    assert fastest_parts(untimed).head == untimed.head


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


def test_the_itl_model_fits_the_engines_steps_not_the_bare_parts() -> None:
    """The engine's own work (a constant and a per-sequence term) lands in α and β: the ITL model
    describes the same step as the plan's predictions."""
    engine = Engine("e", "an engine", ("cpu",), 2e-3, 1e-4, "bench")
    layers = LLAMA_8B.num_layers
    (plan,) = plan_models(synthetic(), (4096,), 141 << 30, 9.9e14, PlanOptions(), engine)
    assert plan.itl_model is not None
    assert plan.itl_model.coefficients == pytest.approx(
        (layers * (1e-3 + 5e-6) + 2e-3 + 2e-3, layers * 1e-4 + 1e-4, layers * 1e-9), rel=1e-9
    )
    for p in plan.predictions:
        fitted = plan.itl_model.step_seconds(p.batch, p.context_tokens)
        assert fitted == pytest.approx(p.step_seconds)


def with_glue(m: ModelMeasurements, seconds: float = 3e-4) -> ModelMeasurements:
    """``m`` with every layer kind's glue timed at ``seconds`` (its fastest sample a third less)."""
    glue = Measurement("glue", (seconds, 2 * seconds / 3))
    return replace(
        m,
        layer_glue={
            kind: tuple(ComponentTime(t.batch, seconds, glue) for t in times)
            for kind, times in m.layer_bodies.items()
        },
    )


FUSING = Engine("e", "an engine", ("cpu",), 2e-3, 1e-4, "bench", fuses_glue=True,
                per_layer_seconds=5e-5)  # fmt: skip


def test_an_engine_that_fuses_the_glue_replaces_each_layers_eager_glue_with_its_own_work() -> None:
    m = with_glue(synthetic())
    layers = LLAMA_8B.num_layers
    for batch in BATCHES:
        eager = step_seconds(m, batch, 1024)
        assert step_seconds(m, batch, 1024, eager_glue=False) == pytest.approx(
            eager - layers * 3e-4
        )
        expected = eager - layers * 3e-4 + 2e-3 + 1e-4 * batch + layers * 5e-5
        assert engine_step_seconds(m, FUSING, batch, 1024) == pytest.approx(expected)
    (plan,) = plan_models(m, (1024,), 141 << 30, 9.9e14, PlanOptions(), FUSING)
    assert plan.engine.glue == "fused"
    assert plan.engine.per_layer_seconds == 5e-5
    assert plan.to_dict()["engine"]["perLayerSeconds"] == 5e-5
    assert StepEngine.from_dict(plan.to_dict()["engine"]) == plan.engine


def test_without_the_glue_timed_an_engine_that_fuses_it_predicts_the_eager_bodies() -> None:
    """A result from before the glue was timed: the eager bodies stand, and no per-layer work
    is added on top of them (it would count the glue twice)."""
    m = synthetic()
    assert not m.has_glue()
    for batch in BATCHES:
        expected = step_seconds(m, batch, 1024) + 2e-3 + 1e-4 * batch
        assert engine_step_seconds(m, FUSING, batch, 1024) == pytest.approx(expected)
    (plan,) = plan_models(m, (1024,), 141 << 30, 9.9e14, PlanOptions(), FUSING)
    assert (plan.engine.glue, plan.engine.per_layer_seconds) == ("eager", 0.0)
    with pytest.raises(MissingMeasurement, match="the dense layer's glue was not measured"):
        step_seconds(m, 1, 1024, eager_glue=False)


def test_an_engine_that_runs_eagerly_keeps_the_glue_it_was_timed_with() -> None:
    m = with_glue(synthetic())
    engine = Engine("e", "an engine", ("cpu",), 2e-3, 1e-4, "bench")
    for batch in BATCHES:
        expected = step_seconds(m, batch, 1024) + 2e-3 + 1e-4 * batch
        assert engine_step_seconds(m, engine, batch, 1024) == pytest.approx(expected)


def test_the_fastest_parts_take_the_glues_fastest_sample_too() -> None:
    fastest = fastest_parts(with_glue(synthetic()))
    assert all(t.seconds == pytest.approx(2e-4) for t in fastest.layer_glue["dense"])


def test_glue_that_waited_for_a_cpu_in_every_pass_is_named_in_the_contention_note() -> None:
    m = replace(
        synthetic(),
        layer_glue={"dense": tuple(ComponentTime(b, 1e-3, waited((0.6, 0.7))) for b in BATCHES)},
    )
    (note,) = contention_notes(m, 1024)
    assert "the dense layer's glue at batch 1, 2, 4, 8" in note


def faster_at_batch_4(m: ModelMeasurements, seconds: float = 0.5e-3) -> ModelMeasurements:
    """``m`` with its dense layer body at batch 4 faster than at batch 1 (a kernel that streams
    its weight faster at M = 4 than at M = 1, as oneDNN's packed bf16 GEMM does on some CPUs)."""
    bodies = tuple(
        replace(t, seconds=seconds) if t.batch == 4 else t for t in m.layer_bodies["dense"]
    )
    return replace(m, layer_bodies={"dense": bodies})


def test_a_larger_batch_is_never_predicted_faster_than_a_smaller_one() -> None:
    m = faster_at_batch_4(synthetic())
    assert parts_step_seconds(m, NONE, 4, 1024) < parts_step_seconds(m, NONE, 1, 1024)
    steps = [p.step_seconds for p in predictions(m, 1024)]
    assert steps == sorted(steps)
    assert engine_step_seconds(m, NONE, 4, 1024) == pytest.approx(
        parts_step_seconds(m, NONE, 2, 1024)
    )


def test_where_the_envelope_lifts_a_batch_the_plan_says_which_and_from_which() -> None:
    m = faster_at_batch_4(synthetic())
    (plan, _) = plan_models(m, (1024, 4096), 141 << 30, 9.9e14, PlanOptions())
    (note,) = [w for w in plan.warnings if w.startswith("StepNotMonotone")]
    assert "batch 4" in note
    assert "than at batch 2" in note
    assert monotonicity_notes(synthetic(), NONE, 1024) == ()


def test_a_batch_that_was_measured_alone_keeps_its_own_step() -> None:
    m = synthetic()
    for batch in BATCHES:
        assert engine_step_seconds(m, NONE, batch, 1024) == parts_step_seconds(m, NONE, batch, 1024)
