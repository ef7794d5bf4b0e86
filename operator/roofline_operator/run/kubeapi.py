"""The operator's own API calls: pod create/delete, node label and profile status patches, and
the listing of a profile's NodeFeature objects.

One shared aiohttp session, built from the credentials Kopf logged in with, carries every
request; a semaphore bounds the requests in flight. Transient answers (429, 5xx, conflicts on
patches, dropped connections) are retried with a short backoff; anything else is an
:class:`ApiError` for the caller to turn into a per-node failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import kopf

from roofline_operator.core.names import GROUP, PLURAL, VERSION
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.decide.node_features import (
    NFD_GROUP,
    NFD_NODE_NAME_LABEL,
    NFD_PLURAL,
    NFD_VERSION,
    profile_selector,
)
from roofline_operator.decide.records import record_annotation_key

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
DELETE_IN_BACKGROUND = {
    "kind": "DeleteOptions",
    "apiVersion": "v1",
    "propagationPolicy": "Background",
}
#: Delays before the 2nd, 3rd and 4th try of a transiently failed request.
RETRY_DELAYS = (0.2, 0.5, 1.0)
REQUEST_TIMEOUT_SECONDS = 30.0
#: Objects per page of a priming LIST: the API server's own default chunk size for clients.
LIST_PAGE_SIZE = 500


class ApiError(Exception):
    """A request the API server refused for good; ``str()`` is a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _transient(status: int, method: str) -> bool:
    # A 409 on a merge patch means a concurrent write; the patch itself is still valid.
    return status == 429 or status >= 500 or (status == 409 and method == "PATCH")


def session_for(info: kopf.ConnectionInfo) -> aiohttp.ClientSession:
    """An aiohttp session with the same TLS, headers and auth as Kopf's own session (whose
    ``as_http_headers()`` carries every scheme, basic auth included)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context()),
        headers={**info.as_http_headers(), "User-Agent": "roofline-operator"},
        proxy=info.proxy_url,
        trust_env=info.trust_env,
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS),
    )


class KubeClient:
    def __init__(self, session: aiohttp.ClientSession, server: str, concurrency: int) -> None:
        self._session = session
        self._server = server.rstrip("/")
        self._slots = asyncio.Semaphore(concurrency)

    async def close(self) -> None:
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | list[dict[str, Any]] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        last: ApiError | None = None
        for attempt, delay in enumerate((0.0, *RETRY_DELAYS)):
            if delay:
                # One INFO line per retried request, not one per try: the caller logs the
                # final failure, if any.
                log = logger.info if attempt == 1 else logger.debug
                log("Retrying %s %s after %s", method, path, last)
                await asyncio.sleep(delay)
            try:
                async with (
                    self._slots,
                    self._session.request(
                        method,
                        self._server + path,
                        json=body,
                        headers={"Content-Type": content_type} if body is not None else None,
                    ) as response,
                ):
                    payload = await self._payload(response)
                    if response.status < 400:
                        return payload
                    message = str(payload.get("message") or response.reason or "")
                    last = ApiError(response.status, message)
                    if not _transient(response.status, method):
                        raise last
            except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as exc:
                last = ApiError(503, f"connection failed: {exc}")
        assert last is not None
        raise last

    @staticmethod
    async def _payload(response: aiohttp.ClientResponse) -> dict[str, Any]:
        try:
            data = await response.json(content_type=None)
        except (ValueError, aiohttp.ContentTypeError):
            return {}
        return data if isinstance(data, dict) else {}

    async def create_pod(self, pod: Mapping[str, Any]) -> bool:
        """Create ``pod``; ``False`` when it already exists (a repeated create of an attempt)."""
        namespace = quote(pod["metadata"]["namespace"])
        try:
            await self.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def _delete_if_present(self, path: str) -> None:
        """Delete the object at ``path`` in the background; one that is already gone is fine."""
        try:
            await self.request("DELETE", path, body=DELETE_IN_BACKGROUND)
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod; one that is already gone is fine."""
        await self._delete_if_present(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}")

    async def delete_pods(self, namespace: str, label_selector: str, field_selector: str) -> int:
        """Delete every pod of ``namespace`` that both selectors match, in one request.

        Returns how many pods the server deleted. Needs the ``deletecollection`` verb on pods.
        """
        query = urlencode({"labelSelector": label_selector, "fieldSelector": field_selector})
        answer = await self.request(
            "DELETE",
            f"/api/v1/namespaces/{quote(namespace)}/pods?{query}",
            body=DELETE_IN_BACKGROUND,
        )
        return len(answer.get("items") or [])

    async def list_pages(
        self, path: str, label_selector: str | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The items of a LIST, page by page (``limit``/``continue``): one consistent snapshot
        without holding a 10,000-object answer in memory at once."""
        token: str | None = None
        while True:
            query = {"limit": str(LIST_PAGE_SIZE)}
            if label_selector:
                query["labelSelector"] = label_selector
            if token:
                query["continue"] = token
            answer = await self.request("GET", f"{path}?{urlencode(query)}")
            items = answer.get("items") or []
            yield [item for item in items if isinstance(item, dict)]
            token = (answer.get("metadata") or {}).get("continue")
            if not token:
                return

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A pod as the API server has it now; ``None`` when there is no such pod."""
        try:
            return await self.request(
                "GET", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def patch_node_labels(
        self,
        node: str,
        labels: Mapping[str, str | None],
        annotations: Mapping[str, str | None] | None = None,
    ) -> bool:
        """Merge-patch a node's labels and annotations (``None`` removes one) in one request;
        ``False`` if the node is gone."""
        metadata: dict[str, Any] = {}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        try:
            await self.request(
                "PATCH",
                f"/api/v1/nodes/{quote(node)}",
                body={"metadata": metadata},
                content_type=MERGE_PATCH,
            )
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def node_features_path(self, namespace: str) -> str:
        return f"/apis/{NFD_GROUP}/{NFD_VERSION}/namespaces/{quote(namespace)}/{NFD_PLURAL}"

    async def write_node_feature(self, body: Mapping[str, Any]) -> None:
        """Create an NFD ``NodeFeature``, or make the existing one exactly ``body``.

        The existing object is replaced where it matters, by a JSON patch (RFC 6902) whose
        ``add`` operations set ``spec``, the labels and the annotations whole: under a merge
        patch a smaller ``spec.labels`` removes nothing, and the labels a profile stopped
        owning stayed on the node through nfd-master.
        """
        metadata = body["metadata"]
        path = self.node_features_path(metadata["namespace"])
        try:
            await self.request("POST", path, body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            replace = [
                {"op": "add", "path": "/spec", "value": dict(body["spec"])},
                {"op": "add", "path": "/metadata/labels", "value": dict(metadata["labels"])},
                {
                    "op": "add",
                    "path": "/metadata/annotations",
                    "value": dict(metadata.get("annotations") or {}),
                },
            ]
            name = quote(metadata["name"])
            await self.request("PATCH", f"{path}/{name}", body=replace, content_type=JSON_PATCH)

    async def delete_node_feature(self, namespace: str, name: str) -> None:
        """Delete a ``NodeFeature``; one that is already gone is fine."""
        await self._delete_if_present(f"{self.node_features_path(namespace)}/{quote(name)}")

    async def create_config_map(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create a ConfigMap; the object the API server stores under its name: the one
        created, or the one that already existed (which the caller must check is its own).
        ``None`` when one existed and is gone again."""
        namespace = quote(body["metadata"]["namespace"])
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        try:
            return await self.request("POST", path, body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        try:
            return await self.request("GET", f"{path}/{quote(body['metadata']['name'])}")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def delete_config_map(self, namespace: str, name: str, uid: str) -> None:
        """Delete the ConfigMap of UID ``uid``: the precondition leaves alone whatever else took
        its name (a foreign object is never deleted); one that is already gone is fine."""
        options = {**DELETE_IN_BACKGROUND, "preconditions": {"uid": uid}}
        path = f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}"
        try:
            await self.request("DELETE", path, body=options)
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise

    async def get_config_map_object(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap as the API server has it now (metadata, ``immutable``, ``data``);
        ``None`` when there is no such ConfigMap."""
        try:
            return await self.request(
                "GET", f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}"
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def get_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's ``data``; ``None`` when there is no such ConfigMap."""
        answer = await self.get_config_map_object(namespace, name)
        if answer is None:
            return None
        data = answer.get("data") or {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    async def patch_profile_status(self, name: str, status: Mapping[str, Any]) -> None:
        await self.request(
            "PATCH",
            f"/apis/{GROUP}/{VERSION}/{PLURAL}/{quote(name)}/status",
            body={"status": dict(status)},
            content_type=MERGE_PATCH,
        )


@dataclass(frozen=True)
class FoundNodeFeature:
    """One of a profile's NodeFeature objects as listed: its name, its node, and its record
    annotation as the node it describes would carry it."""

    name: str
    node: str
    carrier: NodeFacts


async def list_node_features(
    client: KubeClient, namespace: str, profile: str
) -> list[FoundNodeFeature]:
    """A profile's NodeFeature objects (by their label selector)."""
    found = []
    key = record_annotation_key(profile)
    path = client.node_features_path(namespace)
    async for page in client.list_pages(path, profile_selector(profile)):
        for body in page:
            metadata = body.get("metadata") or {}
            node = (metadata.get("labels") or {}).get(NFD_NODE_NAME_LABEL)
            name = metadata.get("name")
            if not node or not name:
                continue
            text = (metadata.get("annotations") or {}).get(key)
            records = {key: str(text)} if text else {}
            found.append(
                FoundNodeFeature(str(name), str(node), NodeFacts(str(node), records=records))
            )
    return found
