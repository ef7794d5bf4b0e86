"""Readiness: the operator is ready while it can list its profiles.

A task of the operator lists the RooflineProfiles (``limit=1``) with the operator's own client and
credentials, every :data:`READY_RECHECK_SECONDS` while that works and every
:data:`NOT_READY_RETRY_SECONDS` while it does not, and sets ``/readyz`` (``server.py``) from the
outcome. A list is what every round needs first (the profiles, through Kopf's watch), and what
fails when the API server is out of reach, its address wrong, the token refused or the RBAC
missing; the message says which.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlencode

from roofline_operator.core.names import GROUP, PLURAL, VERSION
from roofline_operator.run.kubeapi import KubeClient
from roofline_operator.run.runtime import Runtime

logger = logging.getLogger(__name__)

PROFILES_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
#: Seconds between two checks while ready: a LIST of one profile, cheap for the API server.
READY_RECHECK_SECONDS = 10.0
#: Seconds between two checks while not ready.
NOT_READY_RETRY_SECONDS = 2.0


#: Profiles one readiness LIST asks for: whether the list works is the question, not what it
#: holds, so one item answers it (a page of 500 profiles with their statuses would not be
#: cheaper to learn that from).
READY_LIST_LIMIT = 1


async def list_profiles(client: KubeClient) -> None:
    """List at most :data:`READY_LIST_LIMIT` profiles; raises what the request raised."""
    await client.request("GET", f"{PROFILES_PATH}?{urlencode({'limit': READY_LIST_LIMIT})}")


async def check_once(runtime: Runtime) -> bool:
    """List the profiles once and record the outcome in ``runtime.health``; whether ready."""
    try:
        await list_profiles(await runtime.client())
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # whatever the reason, the operator is not ready; say it
        runtime.health.mark_not_ready(f"cannot list {PLURAL}.{GROUP}: {exc}")
        return False
    runtime.health.mark_ready()
    return True


async def keep_readiness(runtime: Runtime) -> None:
    """Check readiness until cancelled (at the operator's cleanup)."""
    while True:
        ready = await check_once(runtime)
        await asyncio.sleep(READY_RECHECK_SECONDS if ready else NOT_READY_RETRY_SECONDS)
