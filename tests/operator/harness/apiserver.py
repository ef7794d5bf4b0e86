"""The HTTP face of the emulated API server: routing, discovery, watch streams, fault injection.

Clients find resources through discovery (``/api``, ``/apis``, ``/apis/<group>/<version>``), so a
CRD created through the API appears there at once, with its short names and subresources. Every
request is counted by verb and resource, which is how the scale benchmark measures the operator's
API traffic. Injected faults answer the next matching requests with 409 or 5xx, the way a busy or
restarting control plane does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .resources import ApiError, ResourceType
from .selectors import SelectorError, compile_selectors
from .store import ObjectStore
from .tables import to_table

logger = logging.getLogger(__name__)

#: Idle watch streams carry a BOOKMARK this often when the client allows bookmarks.
BOOKMARK_INTERVAL_SECONDS = 5.0


@dataclass
class InjectedFault:
    """Answer the next ``count`` requests matching verb and resource with ``status``."""

    verb: str
    resource: str  # "rooflineprofiles", "rooflineprofiles/status", "pods", "nodes", ...
    status: int
    count: int


@dataclass(frozen=True)
class Route:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def resource_label(self) -> str:
        return f"{self.rtype.plural}/{self.subresource}" if self.subresource else self.rtype.plural


class ApiServer:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.requests: Counter[tuple[str, str]] = Counter()
        self.faults: list[InjectedFault] = []
        self.pod_logs: dict[tuple[str, str], str] = {}
        self.watches: set[asyncio.Task[Any]] = set()
        #: Emulator bugs answered as 500; fixtures fail the test if any happened.
        self.internal_errors: list[str] = []
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    # ---------------------------------------------------------------- routing
    def _route(self, parts: list[str]) -> Route | None:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return None
        namespace = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and (group, version, rest[2]) in self.store.types
        ):
            namespace, rest = rest[1], rest[2:]
        rtype = self.store.type_of(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        subresource = "/".join(rest[2:]) or None
        if subresource and subresource not in rtype.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Route(rtype, namespace, name, subresource)

    def _verb(self, method: str, route: Route, query: Any) -> str:
        if method == "GET":
            if query.get("watch") in ("true", "1"):
                return "watch"
            return "get" if route.name else "list"
        if method == "DELETE" and not route.name:
            return "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
            method, method.lower()
        )

    def _injected(self, verb: str, resource: str) -> ApiError | None:
        for fault in self.faults:
            if fault.count > 0 and fault.verb == verb and fault.resource == resource:
                fault.count -= 1
                reason = {409: "Conflict", 429: "TooManyRequests", 503: "ServiceUnavailable"}
                return ApiError(
                    fault.status,
                    reason.get(fault.status, "InternalError"),
                    f"injected fault: {verb} {resource} answered {fault.status}",
                )
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        try:
            route = self._route(parts)
            if route is None:
                self.requests[("get", "/" + "/".join(parts[:3]))] += 1
                return web.json_response(self._discovery(parts))
            verb = self._verb(request.method, route, request.query)
            self.requests[(verb, route.resource_label)] += 1
            fault = self._injected(verb, route.resource_label)
            if fault is not None:
                raise fault
            if verb == "watch":
                return await self._watch(request, route)
            return await self._serve(request, route, verb)
        except ApiError as exc:
            return web.json_response(exc.as_status(), status=exc.status)
        except SelectorError as exc:
            return web.json_response(ApiError(400, "BadRequest", str(exc)).as_status(), status=400)
        except Exception as exc:  # a bug in the emulator must read as a server error, not hang
            logger.exception("emulated API server failed on %s %s", request.method, request.path)
            self.internal_errors.append(f"{request.method} {request.path}: {exc!r}")
            error = ApiError(500, "InternalError", f"{type(exc).__name__}: {exc}")
            return web.json_response(error.as_status(), status=500)

    # ---------------------------------------------------------------- discovery
    def _discovery(self, parts: list[str]) -> dict[str, Any]:
        types = list(self.store.types.values())
        if parts == ["version"]:
            return {"major": "1", "minor": "31", "gitVersion": "v1.31.0", "platform": "linux/amd64"}
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["apis"]:
            groups = sorted({(t.group, t.version) for t in types if t.group})
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    self._group(g, [v for gg, v in groups if gg == g])
                    for g in sorted({g for g, _ in groups})
                ],
            }
        if len(parts) == 2 and parts[0] == "apis":
            versions = [t.version for t in types if t.group == parts[1]]
            if versions:
                return {"apiVersion": "v1", **self._group(parts[1], sorted(set(versions)))}
        if parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis"):
            group, version = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
            served = [t for t in types if (t.group, t.version) == (group, version)]
            if served:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": [entry for t in served for entry in t.discovery_entries()],
                }
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi_v3(parts[2:])
        if parts in ([], ["healthz"], ["livez"], ["readyz"]):
            return {"paths": ["/api", "/api/v1", "/apis", "/version"]}
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _openapi_v3(self, path: list[str]) -> dict[str, Any]:
        """Just enough OpenAPI v3 for kubectl to see that PATCH takes ``fieldValidation``.

        kubectl then validates server-side (``fieldValidation=Strict``), which the store applies
        with the CRD's structural schema, instead of validating client-side against full schemas.
        """
        versions = sorted({(t.group, t.version) for t in self.store.types.values()})
        if not path:
            return {
                "paths": {
                    (f"apis/{g}/{v}" if g else f"api/{v}"): {
                        "serverRelativeURL": f"/openapi/v3/{f'apis/{g}/{v}' if g else f'api/{v}'}"
                        f"?hash={self.store.resource_version}"
                    }
                    for g, v in versions
                }
            }
        group, version = ("", path[1]) if path[0] == "api" else (path[1], path[2])
        served = [t for t in self.store.types.values() if (t.group, t.version) == (group, version)]
        if not served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        parameter = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
        paths = {}
        for t in served:
            prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
            scope = "/namespaces/{namespace}" if t.namespaced else ""
            gvk = {"group": group, "version": version, "kind": t.kind}
            paths[f"{prefix}{scope}/{t.plural}/{{name}}"] = {
                "patch": {
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [parameter],
                    "responses": {},
                }
            }
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.31.0"},
            "paths": paths,
            "components": {"schemas": {}},
        }

    @staticmethod
    def _group(group: str, versions: list[str]) -> dict[str, Any]:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    # ---------------------------------------------------------------- verbs
    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApiError(400, "BadRequest", f"the request body is not JSON: {exc}") from None

    async def _serve(self, request: web.Request, route: Route, verb: str) -> web.StreamResponse:
        store, rtype, query = self.store, route.rtype, request.query
        strict = query.get("fieldValidation") == "Strict"
        if verb == "list":
            predicate = compile_selectors(query.get("labelSelector"), query.get("fieldSelector"))
            items = store.list(rtype, route.namespace, predicate)
            if "as=Table" in request.headers.get("Accept", ""):
                include = query.get("includeObject", "Metadata")
                return web.json_response(to_table(rtype, items, store.resource_version, include))
            return web.json_response(self._page(rtype, items, query))
        if route.subresource == "log":
            return self._log(route)
        if verb == "get":
            obj = store.get(rtype, route.namespace, route.name or "")
            if "as=Table" in request.headers.get("Accept", ""):
                include = query.get("includeObject", "Metadata")
                return web.json_response(to_table(rtype, [obj], store.resource_version, include))
            return web.json_response(obj)
        body = await self._body(request)
        if verb == "create" and route.subresource == "binding":
            target = body.get("target", {}).get("name", "")
            patch = {"spec": {"nodeName": target}}
            store.patch(
                rtype, route.namespace, route.name or "", "application/merge-patch+json", patch
            )
            return web.json_response(
                {"kind": "Status", "apiVersion": "v1", "status": "Success"}, status=201
            )
        if verb == "create":
            return web.json_response(store.create(rtype, route.namespace, body, strict), status=201)
        if verb == "update":
            obj = store.replace(
                rtype, route.namespace, route.name or "", body, route.subresource, strict
            )
            return web.json_response(obj)
        if verb == "patch":
            content_type = request.headers.get("Content-Type", "application/merge-patch+json")
            obj = store.patch(
                rtype,
                route.namespace,
                route.name or "",
                content_type,
                body,
                route.subresource,
                strict,
            )
            return web.json_response(obj)
        if verb == "delete":
            options = {
                **body,
                **(
                    {"gracePeriodSeconds": int(query["gracePeriodSeconds"])}
                    if "gracePeriodSeconds" in query
                    else {}
                ),
            }
            return web.json_response(
                store.delete(rtype, route.namespace, route.name or "", options)
            )
        if verb == "deletecollection":
            predicate = compile_selectors(query.get("labelSelector"), query.get("fieldSelector"))
            deleted = [
                store.delete(rtype, obj["metadata"].get("namespace"), obj["metadata"]["name"], body)
                for obj in store.list(rtype, route.namespace, predicate)
            ]
            return web.json_response(self._list(rtype, deleted))
        raise ApiError(405, "MethodNotAllowed", f"{request.method} is not supported here")

    def _list(self, rtype: ResourceType, items: list[dict[str, Any]]) -> dict[str, Any]:
        if rtype.builtin:
            # Typed lists of built-in resources omit kind and apiVersion on items.
            items = [
                {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")} for obj in items
            ]
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": self.store.resource_version},
            "items": items,
        }

    def _page(self, rtype: ResourceType, items: list[dict[str, Any]], query: Any) -> dict[str, Any]:
        """``limit``/``continue`` chunking, as ``kubectl get`` requests it (500 at a time)."""
        offset = 0
        if query.get("continue"):
            try:
                offset = int(base64.urlsafe_b64decode(query["continue"]).decode())
            except ValueError:
                raise ApiError(400, "BadRequest", "invalid continue token") from None
        limit = int(query.get("limit") or 0)
        page = items[offset : offset + limit] if limit else items[offset:]
        result = self._list(rtype, page)
        if limit and offset + limit < len(items):
            token = base64.urlsafe_b64encode(str(offset + limit).encode()).decode()
            result["metadata"]["continue"] = token
            result["metadata"]["remainingItemCount"] = len(items) - offset - limit
        return result

    def _log(self, route: Route) -> web.Response:
        pod = self.store.get(route.rtype, route.namespace, route.name or "")
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if key not in self.pod_logs:
            raise ApiError(400, "BadRequest", f'container in pod "{key[1]}" is waiting to start')
        return web.Response(text=self.pod_logs[key], content_type="text/plain")

    async def _watch(self, request: web.Request, route: Route) -> web.StreamResponse:
        query = request.query
        predicate = compile_selectors(query.get("labelSelector"), query.get("fieldSelector"))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            subscription = self.store.subscribe(
                route.rtype, route.namespace, predicate, query.get("resourceVersion")
            )
        except ApiError as exc:
            # A too-old resourceVersion is reported inside the stream, as the API server does.
            await response.prepare(request)
            await response.write(
                json.dumps({"type": "ERROR", "object": exc.as_status()}).encode() + b"\n"
            )
            return response
        timeout = float(query["timeoutSeconds"]) if "timeoutSeconds" in query else None
        bookmarks = query.get("allowWatchBookmarks") == "true"
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout is not None else None
        task = asyncio.current_task()
        if task is not None:
            self.watches.add(task)
        try:
            while deadline is None or loop.time() < deadline:
                wait = BOOKMARK_INTERVAL_SECONDS
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - loop.time()))
                try:
                    event = await asyncio.wait_for(subscription.queue.get(), timeout=wait)
                except TimeoutError:
                    if bookmarks:
                        await response.write(self._bookmark(route.rtype))
                    continue
                line = {"type": event.type, "object": event.object}
                await response.write(json.dumps(line).encode() + b"\n")
        except ConnectionResetError:
            pass
        finally:
            self.store.events.unsubscribe(subscription)
            if task is not None:
                self.watches.discard(task)
        return response

    def drop_watches(self) -> int:
        """Cut every open watch connection, as an API server restart or a load balancer does."""
        dropped = list(self.watches)
        for task in dropped:
            task.cancel()
        return len(dropped)

    def _bookmark(self, rtype: ResourceType) -> bytes:
        meta = {"resourceVersion": self.store.resource_version}
        obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"
