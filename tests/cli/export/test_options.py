from __future__ import annotations

import hashlib

import pytest

from roofline_cli.export.options import by_model, classes_note, object_name, safest
from tests.cli.export_sources import class_plan


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("llama-3.1-8b", "llama-3-1-8b"),
        ("Llama_3.1-8B-Instruct", "llama-3-1-8b-instruct"),
        ("NVIDIA H200", "nvidia-h200"),
        ("--", "model"),
        ("x" * 63, "x" * 63),
        ("x" * 80, "x" * 52 + "-" + hashlib.sha256(b"x" * 80).hexdigest()[:10]),
    ],
)
def test_an_object_name_is_an_rfc_1123_label(text: str, name: str) -> None:
    assert object_name(text) == name


def test_two_long_names_that_share_their_first_63_characters_stay_two() -> None:
    model = "a-very-long-model-name-for-the-engine-args-x46"
    forty, eighty = (
        object_name(f"{model}-NVIDIA A100-SXM4-{memory}-engine-args") for memory in ("40GB", "80GB")
    )
    assert forty != eighty
    assert len(forty) == len(eighty) == 63
    assert forty[:52] == eighty[:52]


def test_the_safest_class_has_the_smallest_batch_and_the_note_names_the_others() -> None:
    plans = [
        class_plan(gpu_class="H100", max_batch=104),
        class_plan(gpu_class="L40S", max_batch=24),
    ]
    chosen = safest(plans)
    assert chosen.gpu_class == "L40S"
    assert "also H100" in classes_note(plans, chosen)
    assert classes_note(plans[:1], plans[0]) == "GPU class H100"


def test_plans_group_by_model_in_order() -> None:
    plans = [class_plan(model="b"), class_plan(model="a"), class_plan(model="b", gpu_class="H")]
    assert [(m, len(p)) for m, p in by_model(plans).items()] == [("b", 2), ("a", 1)]
