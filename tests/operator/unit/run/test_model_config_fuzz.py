"""Property-based: whatever text a model's ConfigMap holds, the profile's round goes on.

A model config reaches the operator as the text of a ConfigMap key that anyone who may write
ConfigMaps in the profiler namespace may have written. Whatever it holds (any field of a config
with any hostile value, integers longer than Python parses, any text), the round creates the
node's pod, publishes the status, and that model alone fails, with a reason the operator knows
and without echoing the ConfigMap's values; the profile's inline model is planned as usual.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from tests.model_configs import TINY_LLAMA, TINY_MOE
from tests.operator.unit.model_client import ENV, ModelClient, loop_with
from tests.operator.unit.operator_builders import node
from tests.tampering import json_values

from roofline_operator.decide.model_sources import (
    CONFIG_MAP_KEY_NOT_FOUND,
    INVALID_MODEL,
    UNREADABLE_CONFIG,
)
from roofline_profiler.core.limits import MODEL_FIELD_LIMITS

#: Every field a config reader looks at, integer or not.
CONFIG_FIELDS = (
    *MODEL_FIELD_LIMITS,
    "model_type",
    "architectures",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "use_sliding_window",
    "mlp_only_layers",
)
MODELS = [
    {"name": "mapped", "configMapRef": {"name": "cfg"}},
    {"name": "inline", "config": TINY_LLAMA},
]
#: Where a long integer literal goes: ``json.dumps`` itself refuses one of over 4300 digits.
LONG = "LONG-INTEGER"


def long_integer(digits: int) -> str:
    return "9" * digits


hostile_values = st.one_of(
    json_values,
    st.integers(min_value=-(10**30), max_value=10**30),
    st.just(LONG),
    st.lists(st.integers(min_value=-3, max_value=2000), max_size=40),
    st.text(max_size=200),
)


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    """A config with one field of a real config set to a hostile value, or any text."""
    if draw(st.booleans()):
        return draw(st.text(max_size=300))
    base = draw(st.sampled_from([TINY_LLAMA, TINY_MOE]))
    field = draw(st.sampled_from(CONFIG_FIELDS))
    value = draw(hostile_values)
    text = json.dumps({**base, field: value})
    if value == LONG:
        digits = draw(st.integers(min_value=1, max_value=6000))
        text = text.replace(f'"{LONG}"', long_integer(digits))
    return text


def round_with(text: str) -> tuple[ModelClient, dict[str, Any]]:
    """One round of a profile whose ``mapped`` model's ConfigMap holds ``text``."""
    client = ModelClient({("ns", "cfg"): {"config.json": text}})
    loop = loop_with(client, {"models": MODELS}, ENV)
    asyncio.run(loop.round({"a": node("a")}, [], {}))
    return client, client.statuses[-1]


@given(text=config_texts())
@example(text=json.dumps(TINY_LLAMA).replace("256", long_integer(4301)))
@example(text=json.dumps(TINY_LLAMA).replace("256", long_integer(100_000)))
@example(text=json.dumps({**TINY_LLAMA, "mlp_only_layers": list(range(10_000))}))
@example(text="[" * 100_000)
def test_any_config_map_text_fails_its_model_alone_and_the_round_goes_on(text: str) -> None:
    client, status = round_with(text)
    (pod,) = client.created
    planned = [m["name"] for m in client.models_of(pod)]
    assert planned[-1] == "inline"
    assert status["nodes"][0]["state"] == "Profiling"
    failures = {m["name"]: m for m in status.get("models") or [] if "reason" in m}
    if "mapped" in planned:
        assert "mapped" not in failures
        return
    failure = failures["mapped"]
    assert failure["reason"] in (INVALID_MODEL, CONFIG_MAP_KEY_NOT_FOUND)
    assert UNREADABLE_CONFIG not in failure["message"], "a reader raised something unforeseen"
    assert "got" not in failure["message"], "a value of the ConfigMap is echoed"


def test_a_config_map_with_an_integer_of_5000_digits_no_longer_stalls_the_round() -> None:
    """``json.loads`` raised a plain ``ValueError`` that left the round: no pod, no status."""
    client, status = round_with(json.dumps(TINY_LLAMA).replace("256", long_integer(5000)))
    assert len(client.created) == 1
    (failure,) = [m for m in status["models"] if m["name"] == "mapped"]
    assert failure["reason"] == INVALID_MODEL
    assert "an integer of 5000 digits" in failure["message"]
