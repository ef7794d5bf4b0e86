from roofline_profiler.cli import model_report
from roofline_profiler.core import model_config, planning
from roofline_profiler.core.planning import PlanOptions, StepPrediction

GIB = 2**30
PEAK = 1e15


def _plan(memory: int, **options: float) -> planning.ModelPlan:
    arch = model_config.load_model("llama-3.1-8b")
    predictions = [StepPrediction(1, 4096, 0.008), StepPrediction(64, 4096, 0.030)]
    return planning.plan_model(
        arch, "bfloat16", 4096, 1, True, predictions, memory, PEAK, PlanOptions(**options)
    )


def test_the_summary_shows_each_engines_flags_on_one_line() -> None:
    lines = model_report.summary_lines((_plan(80 * GIB),))
    vllm = next(line for line in lines if line.strip().startswith("vLLM"))
    assert "--max-num-seqs=" in vllm
    assert "--max-model-len=4096" in vllm


def test_a_model_that_does_not_fit_shows_no_flags_and_says_why() -> None:
    plan = _plan(8 * GIB)
    for lines in (model_report.summary_lines((plan,)), model_report.markdown_lines((plan,))):
        engine_lines = [line for line in lines if "TensorRT-LLM" in line]
        assert engine_lines
        assert all(model_report.NO_FLAGS in line for line in engine_lines)
        assert any("leave no room" in line for line in lines)


def test_markdown_quotes_flags_as_code_and_lists_every_batch() -> None:
    lines = model_report.markdown_lines((_plan(80 * GIB, gpu_hour_cost=2.0),))
    assert any(line.startswith("| vLLM | `--max-num-seqs=") for line in lines)
    assert "| B | step (ITL) | tokens/s | cost / 1M tokens |" in lines
    assert any(line.startswith("| 64 | 30.0 ms |") for line in lines)


def test_the_headline_says_when_no_slo_was_given() -> None:
    rows = dict(model_report.headline(_plan(80 * GIB)))
    assert rows["max batch by latency"] == "no SLO given"
    # 8,030,261,248 parameters in bf16: 14.96 GiB, to three significant digits.
    assert rows["weights per device"] == "15.0 GiB"
    assert rows["KV cache per token"] == "128 KiB"
