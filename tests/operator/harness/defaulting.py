"""What the API server fills in on its own: pod defaults, a CRD's acceptance, timestamps.

A pod created without ``terminationMessagePath`` still has ``/dev/termination-log``; a CRD is
``Established`` as soon as its names are accepted. The operator and kubectl read these fields,
so the emulator sets them as the real server does.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from .resources import ApiError


def now_rfc3339() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_is_running(pod: Mapping[str, Any]) -> bool:
    bound = bool(pod.get("spec", {}).get("nodeName"))
    return bound and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")


def default_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    if not spec.get("containers"):
        raise ApiError(422, "Invalid", "Pod: spec.containers: Required value")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for container in spec["containers"]:
        if not container.get("name") or not container.get("image"):
            raise ApiError(422, "Invalid", "Pod: spec.containers: name and image are required")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("imagePullPolicy", "IfNotPresent")
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}


def accept_crd(crd: dict[str, Any]) -> None:
    names = crd.get("spec", {}).get("names", {})
    crd["status"] = {
        "acceptedNames": names,
        "storedVersions": [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")],
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": r,
                "message": m,
                "lastTransitionTime": now_rfc3339(),
            }
            for t, r, m in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ],
    }
