"""Readiness follows whether the operator can list its profiles, with its own client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from prometheus_client import CollectorRegistry

from roofline_operator.run.config import load_config
from roofline_operator.run.kubeapi import ApiError
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.readiness import PROFILES_PATH, check_once
from roofline_operator.run.runtime import Runtime


class ListingClient:
    """Answers LISTs with one item, or refuses them with ``error``; remembers each request's
    path and query. Paging through every profile would fail the test."""

    def __init__(self, error: ApiError | None = None) -> None:
        self.error = error
        self.listed: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        self.listed.append(path)
        if self.error is not None:
            raise self.error
        return {"items": [{"metadata": {"name": "gpu-nodes"}}], "metadata": {"continue": "x"}}

    async def list_pages(
        self, path: str, label_selector: str | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        raise AssertionError("readiness lists one profile, not pages of them")
        yield []

    async def close(self) -> None:
        pass


def runtime_with(client: ListingClient | None) -> Runtime:
    runtime = Runtime(config=load_config([], {}), metrics=OperatorMetrics(CollectorRegistry()))
    if client is not None:
        runtime.api.connection = kopf.ConnectionInfo(server="https://cluster.invalid")
        runtime.api.built_from = runtime.api.connection
        runtime.api.client = client  # type: ignore[assignment]
    return runtime


@pytest.mark.asyncio
async def test_before_login_the_operator_is_not_ready() -> None:
    runtime = runtime_with(None)
    assert not await check_once(runtime)
    assert not runtime.health.ready
    assert "not logged in" in runtime.health.not_ready_because


@pytest.mark.asyncio
async def test_a_successful_list_of_the_profiles_makes_it_ready() -> None:
    client = ListingClient()
    runtime = runtime_with(client)
    assert await check_once(runtime)
    assert runtime.health.ready
    assert client.listed == [f"{PROFILES_PATH}?limit=1"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("error", "shown"),
    [
        pytest.param(ApiError(503, "connection failed: refused"), "connection failed", id="down"),
        pytest.param(ApiError(401, "Unauthorized"), "HTTP 401", id="token-refused"),
        pytest.param(ApiError(403, "forbidden: list"), "HTTP 403", id="rbac-missing"),
        pytest.param(ApiError(404, "not found"), "HTTP 404", id="crd-missing"),
    ],
)
async def test_a_failed_list_makes_a_ready_operator_unready_and_says_why(
    error: ApiError, shown: str
) -> None:
    client = ListingClient()
    runtime = runtime_with(client)
    assert await check_once(runtime)
    client.error = error
    assert not await check_once(runtime)
    assert not runtime.health.ready
    assert "cannot list rooflineprofiles.roofline.dev" in runtime.health.not_ready_because
    assert shown in runtime.health.not_ready_because
