from __future__ import annotations

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
        ("x" * 80, "x" * 63),
    ],
)
def test_an_object_name_is_an_rfc_1123_label(text: str, name: str) -> None:
    assert object_name(text) == name


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
