"""A RooflineProfile read from the cluster, through ``kubectl``.

``kubectl`` reads the kubeconfig as every other tool the user runs does (contexts, exec
credential plugins, OIDC, client certificates, ``KUBECONFIG`` lists), so ``roofline export``
sees the cluster the user's ``kubectl apply`` of its output will reach, with no Kubernetes client
library in the command line's dependencies and no second reading of the kubeconfig that could
disagree with kubectl's. The one call is a ``get`` of one object, bounded in time and size.
"""

from __future__ import annotations

import subprocess
from typing import Any

from roofline_cli.export.source_text import UnreadableSource, parse_json
from roofline_profiler.core.errors import first_line

#: Longest wait for the API server, and the largest object read.
TIMEOUT_SECONDS = 60
MAX_BYTES = 16 * 1024 * 1024
RESOURCE = "rooflineprofiles.roofline.dev"


class ClusterError(RuntimeError):
    """kubectl could not read the profile; ``str()`` is one line."""


def kubectl_command(
    name: str, kubectl: str, kubeconfig: str | None, context: str | None
) -> list[str]:
    """kubectl's arguments: each option's value joined to it with ``=`` and the name after
    ``--``, so that no value can be read as another option (``command`` also refuses a name
    that is no Kubernetes object name, ``-x`` included)."""
    command = [kubectl, "get", RESOURCE, "--output=json"]
    if kubeconfig is not None:
        command.append(f"--kubeconfig={kubeconfig}")
    if context is not None:
        command.append(f"--context={context}")
    return [*command, "--", name]


def read_profile(
    name: str, kubectl: str = "kubectl", kubeconfig: str | None = None, context: str | None = None
) -> Any:
    """The RooflineProfile ``name`` as the cluster holds it."""
    command = kubectl_command(name, kubectl, kubeconfig, context)
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=TIMEOUT_SECONDS, check=False, stdin=None
        )
    except FileNotFoundError:
        raise ClusterError(
            f"{kubectl} not found: install kubectl or name it with --kubectl"
        ) from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"kubectl get {RESOURCE} {name} took over {TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        reason = first_line(done.stderr.decode(errors="replace"), f"exit status {done.returncode}")
        raise ClusterError(f"kubectl get {RESOURCE} {name}: {reason}")
    if len(done.stdout) > MAX_BYTES:
        raise ClusterError(f"kubectl returned more than {MAX_BYTES} bytes")
    try:
        return parse_json(done.stdout)
    except UnreadableSource as exc:
        raise ClusterError(f"kubectl did not return a JSON object ({exc})") from None
