from __future__ import annotations

import pytest

from roofline_profiler.core.prefill_parts import (
    PrefillAttentionTime,
    PrefillMeasurements,
    PrefillTokensTime,
    causal_pairs,
)


@pytest.mark.parametrize(
    ("new", "prior", "pairs"),
    [
        pytest.param(1, 0, 1, id="one-token-attends-to-itself"),
        pytest.param(4, 0, 10, id="a-prompt-is-a-triangle"),
        pytest.param(2, 3, 2 * 3 + 3, id="a-later-chunk-also-reads-the-earlier-tokens"),
        pytest.param(0, 100, 0, id="no-new-token-no-pair"),
    ],
)
def test_a_causal_chunk_attends_to_the_prior_tokens_and_the_new_ones_up_to_itself(
    new: int, prior: int, pairs: int
) -> None:
    assert causal_pairs(new, prior) == pairs


def test_the_chunk_sizes_and_prompts_are_listed_sorted_once() -> None:
    p = PrefillMeasurements(
        {"dense": (PrefillTokensTime(64, 1.0), PrefillTokensTime(16, 0.5))},
        (PrefillAttentionTime(512, 1.0), PrefillAttentionTime(128, 0.1)),
        "roofline",
    )
    assert p.chunk_tokens == (16, 64)
    assert p.prompt_tokens == (128, 512)
    assert p.attention[1].pairs == 128 * 129 // 2
