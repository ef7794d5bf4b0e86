#!/usr/bin/env python3
"""A real single-node Kubernetes cluster on this machine, started as the real-node tests start it.

    .venv/bin/python scripts/real-node.py             the node alone (its sandbox image only)
    .venv/bin/python scripts/real-node.py --images    also the project's two images (make images)
    .venv/bin/python scripts/real-node.py --install   also the chart, as the tests install it

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd with runc and the CNI
bridge, the kubelet and kube-proxy, with a fake GPU (docs/testing-operator.md, "The real-node
suite"). The Kubernetes binaries are built on first use (scripts/control-plane.sh, with --node).
It prints the admin kubeconfig and waits for Enter or Ctrl-C; then it stops everything it started
and undoes its host changes, and exits 1 if anything on the host is still different.

Needs root, Go, containerd, runc, containernetworking-plugins, iptables, nftables and (for the
images) buildah and debootstrap.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), *(str(ROOT / d) for d in ("profiler", "operator", "cli"))]

from tests.deploy import images as img  # noqa: E402
from tests.operator.harness.containerd import project_images  # noqa: E402
from tests.operator.harness.controlplane import build_binaries  # noqa: E402
from tests.operator.harness.noderelease import (  # noqa: E402
    install,
    node_values,
    wait_operator_ready,
)
from tests.operator.harness.processes import Kubectl  # noqa: E402
from tests.operator.harness.realnode import (  # noqa: E402
    RealNode,
    build_node_binaries,
    unavailable_reason,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", action="store_true", help="import the project's images")
    parser.add_argument("--install", action="store_true", help="install the chart (and --images)")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        parser.error(f"a real node cannot run here: {reason}")
    images = img.build_images() if args.images or args.install else None
    workdir = Path(tempfile.mkdtemp(prefix="roofline-real-node-"))
    node = RealNode(
        build_binaries(), build_node_binaries(), workdir, project_images(images) if images else ()
    )
    # SIGTERM stops the node as Enter and Ctrl-C do.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        node.start()
        print(f"node Ready in {sum(node.timings.values()):.0f} s: {node.timings}")
        kubectl = Kubectl(node.kubeconfig, workdir, node.kubectl_binary)
        if args.install and images is not None:
            values = node_values(images.operator, images.profiler)
            release = install(kubectl, workdir, values, "roofline-operator", "roofline-system")
            pod = wait_operator_ready(kubectl, release)
            print(f"operator pod {pod['metadata']['name']} Ready at {pod['status']['podIP']}")
        print(f"\nexport KUBECONFIG={node.kubeconfig}\nalias kubectl={node.kubectl_binary}\n")
        input("Enter (or Ctrl-C) stops the node and undoes its host changes. ")
    except (KeyboardInterrupt, EOFError):
        print()
    finally:
        leftovers = node.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if leftovers:
        print("still different on the host:\n  " + "\n  ".join(leftovers), file=sys.stderr)
        return 1
    print("stopped; the host is as it was")
    return 0


if __name__ == "__main__":
    sys.exit(main())
