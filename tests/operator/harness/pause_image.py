"""The test node's sandbox ("pause") image: one static binary in a one-layer OCI archive.

Every pod's sandbox runs the runtime's ``sandbox_image``; with no registry to pull
``registry.k8s.io/pause`` from, the node uses this one: ``scripts/control-plane.sh --node``
builds ``pause`` (scripts/control-plane/pause: hold the namespaces, reap children, exit on
SIGTERM) and :func:`write_archive` packs it as an OCI image layout in a tar file, the form
``ctr images import`` reads. The archive is byte-for-byte the same for the same binary (sorted
entries, fixed owners and times), so its digest names the binary it holds.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
#: The user registry.k8s.io/pause runs as.
PAUSE_USER = "65535:65535"
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"


def _tar_entry(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    archive.addfile(info, io.BytesIO(data))


def _tar(entries: Mapping[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(entries):
            data, mode = entries[name]
            _tar_entry(archive, name, data, mode)
    return buffer.getvalue()


def _json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
    return {
        "mediaType": media_type,
        "digest": f"sha256:{hashlib.sha256(blob).hexdigest()}",
        "size": len(blob),
    }


def image_layout(binary: bytes, reference: str) -> dict[str, bytes]:
    """The files of an OCI image layout holding ``binary`` as ``/pause``, named ``reference``."""
    layer = _tar({"pause": (binary, 0o755)})
    config = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": PAUSE_USER},
            "rootfs": {"type": "layers", "diff_ids": [_descriptor(MEDIA_LAYER, layer)["digest"]]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": _descriptor(MEDIA_CONFIG, config),
            "layers": [_descriptor(MEDIA_LAYER, layer)],
        }
    )
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            {
                **_descriptor(MEDIA_MANIFEST, manifest),
                "annotations": {REF_NAME_ANNOTATION: reference},
                "platform": {"architecture": "amd64", "os": "linux"},
            }
        ],
    }
    files = {"oci-layout": _json({"imageLayoutVersion": "1.0.0"}), "index.json": _json(index)}
    for blob in (layer, config, manifest):
        files[f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}"] = blob
    return files


def write_archive(binary: Path, reference: str, archive: Path) -> Path:
    """Write the image as an OCI archive (a tar of the layout) to ``archive``."""
    layout = image_layout(binary.read_bytes(), reference)
    archive.write_bytes(_tar({name: (data, 0o644) for name, data in layout.items()}))
    return archive
