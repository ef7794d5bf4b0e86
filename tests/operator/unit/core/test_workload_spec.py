from __future__ import annotations

from typing import Any

import pytest
from tests.operator.unit.operator_builders import spec

from roofline_operator.core.spec_fields import SpecError
from roofline_operator.core.workload_spec import (
    MAX_BATCHED_TOKENS,
    MAX_NUM_SEQS,
    MAX_TTFT_SLO_SECONDS,
    MAX_WORKLOAD_TOKENS,
    PlannedWorkload,
    workload_arguments,
)

MODELS = [{"name": "m", "preset": "qwen3-8b"}]
WORKLOAD = {"promptTokens": 1000, "outputTokens": 200}


def test_the_workload_and_the_ttft_target_are_read_as_tokens_and_seconds() -> None:
    parsed = spec(
        workload=WORKLOAD, slo={"interTokenLatency": "50ms", "timeToFirstToken": "1s500ms"}
    )
    assert parsed.workload == PlannedWorkload(prompt_tokens=1000, output_tokens=200)
    assert parsed.ttft_slo_seconds == pytest.approx(1.5)
    assert parsed.ttft_slo == "1s500ms"
    assert parsed.itl_slo_seconds == pytest.approx(0.05)


def test_a_profile_without_a_workload_has_none() -> None:
    parsed = spec(slo={"interTokenLatency": "50ms"})
    assert (parsed.workload, parsed.ttft_slo_seconds, parsed.ttft_slo) == (None, None, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"workload": [1, 2]}, r"spec.workload must be an object", id="a-list"),
        pytest.param(
            {"workload": {"promptTokens": 1000}},
            r"spec.workload.outputTokens must be an integer in 1\.\.1048576, got None",
            id="no-output",
        ),
        pytest.param(
            {"workload": {"promptTokens": 0, "outputTokens": 1}},
            r"spec.workload.promptTokens must be an integer in 1\.\.1048576, got 0",
            id="zero-prompt",
        ),
        pytest.param(
            {"workload": {"promptTokens": MAX_WORKLOAD_TOKENS + 1, "outputTokens": 1}},
            r"spec.workload.promptTokens must be an integer",
            id="prompt-over-limit",
        ),
        pytest.param(
            {"workload": {"promptTokens": True, "outputTokens": 1}},
            r"spec.workload.promptTokens must be an integer",
            id="a-boolean",
        ),
        pytest.param(
            {"workload": {"promptTokens": 1, "outputTokens": 2.5}},
            r"spec.workload.outputTokens must be an integer",
            id="a-fraction",
        ),
        pytest.param(
            {"workload": {**WORKLOAD, "maxNumBatchedTokens": 0}},
            r"spec.workload.maxNumBatchedTokens must be an integer in 1\.\.1048576, got 0",
            id="zero-token-budget",
        ),
        pytest.param(
            {"workload": {**WORKLOAD, "maxNumSeqs": MAX_NUM_SEQS + 1}},
            r"spec.workload.maxNumSeqs must be an integer in 1\.\.65536, got 65537",
            id="seqs-over-limit",
        ),
        pytest.param(
            {"workload": {**WORKLOAD, "maxNumSeqs": "128"}},
            r"spec.workload.maxNumSeqs must be an integer in 1\.\.65536, got '128'",
            id="seqs-as-text",
        ),
        pytest.param(
            {"slo": {"timeToFirstToken": "2s"}},
            r"spec.slo.timeToFirstToken needs spec.workload",
            id="ttft-without-workload",
        ),
        pytest.param(
            {"workload": WORKLOAD, "slo": {"timeToFirstToken": "2"}},
            r"spec.slo.timeToFirstToken must be a duration such as 500ms, got '2'",
            id="no-unit",
        ),
        pytest.param(
            {"workload": WORKLOAD, "slo": {"timeToFirstToken": "0s"}},
            r"must be above 0 and at most 3600s, got '0s'",
            id="zero",
        ),
        pytest.param(
            {"workload": WORKLOAD, "slo": {"timeToFirstToken": "60m1s"}},
            r"must be above 0 and at most 3600s, got '60m1s'",
            id="over-limit",
        ),
    ],
)
def test_a_bad_workload_or_ttft_target_is_one_line_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        spec(**fields)
    assert "\n" not in str(caught.value)


def test_the_engines_scheduler_limits_are_read_where_the_workload_names_them() -> None:
    limited = {**WORKLOAD, "maxNumBatchedTokens": MAX_BATCHED_TOKENS, "maxNumSeqs": 64}
    assert spec(workload=limited).workload == PlannedWorkload(1000, 200, MAX_BATCHED_TOKENS, 64)
    assert spec(workload=WORKLOAD).workload == PlannedWorkload(1000, 200, None, None)


def test_the_ttft_target_may_be_as_long_as_the_limit() -> None:
    parsed = spec(workload=WORKLOAD, slo={"timeToFirstToken": "60m"})
    assert parsed.ttft_slo_seconds == MAX_TTFT_SLO_SECONDS


def test_the_workload_changes_the_digest_only_of_a_profile_with_models() -> None:
    assert spec(workload=WORKLOAD).measurement_hash() == spec().measurement_hash()
    plain = spec(models=MODELS)
    loaded = spec(models=MODELS, workload=WORKLOAD)
    longer = spec(models=MODELS, workload={**WORKLOAD, "outputTokens": 201})
    with_ttft = spec(models=MODELS, workload=WORKLOAD, slo={"timeToFirstToken": "2s"})
    budget = spec(models=MODELS, workload={**WORKLOAD, "maxNumBatchedTokens": 8192})
    seqs = spec(models=MODELS, workload={**WORKLOAD, "maxNumSeqs": 64})
    digests = {s.measurement_hash() for s in (plain, loaded, longer, with_ttft, budget, seqs)}
    assert len(digests) == 6


def test_the_profiler_gets_the_workload_and_the_ttft_target_as_its_flags() -> None:
    assert workload_arguments(None, None) == []
    assert workload_arguments(PlannedWorkload(1000, 200), None) == [
        "--prompt-tokens",
        "1000",
        "--output-tokens",
        "200",
    ]
    assert workload_arguments(PlannedWorkload(1000, 200), 0.5)[-2:] == ["--ttft-slo", "0.5s"]


def test_the_profiler_gets_the_scheduler_limits_as_vllms_flags_only_where_named() -> None:
    assert workload_arguments(PlannedWorkload(1000, 200, 8192, None), None)[-2:] == [
        "--max-num-batched-tokens",
        "8192",
    ]
    assert workload_arguments(PlannedWorkload(1000, 200, None, 64), 0.5)[-4:] == [
        "--ttft-slo",
        "0.5s",
        "--max-num-seqs",
        "64",
    ]
    assert "--max-num-seqs" not in workload_arguments(PlannedWorkload(1000, 200), None)
