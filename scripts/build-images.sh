#!/usr/bin/env bash
# Build both images of the Dockerfile (targets `operator` and `profiler`) with buildah: no Docker
# engine, no daemon. Needs root (buildah's vfs storage and debootstrap), buildah and, for stand-in
# bases, debootstrap.
#
#   scripts/build-images.sh                  build (or reuse) both images, print their names
#   ROOFLINE_IMAGE_BASES=standin scripts/build-images.sh
#
# Bases (ROOFLINE_IMAGE_BASES):
#   public   the Dockerfile's pinned defaults (python slim, CUDA PyTorch), pulled from Docker Hub
#   standin  local stand-ins made here from a debootstrapped Debian bookworm (minbase): Debian's
#            Python 3.11 in a virtual environment for the operator; the same plus torch from PyPI
#            (the CUDA build PyPI serves, so `torch.version.cuda` is set as in the real base) for
#            the profiler. For machines that reach a Debian mirror and PyPI but no image registry.
#   auto     public when Docker Hub answers, else standin (the default)
#
# Images are named localhost/roofline-operator:<version>[-standin] and
# localhost/roofline:<version>[-standin]; the build-context digest is kept in the label
# dev.roofline.context-digest, and an image whose label matches the current Dockerfile, sources
# and bases is reused, not rebuilt. Stand-in bases are cached the same way, keyed by what they
# contain. Everything lives in ROOFLINE_IMAGE_STORE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/containers), outside the repository.
#
# The last lines on stdout are key=value pairs (root, runroot, operator, profiler, bases) that
# the image tests read; progress goes to stderr.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

BASES="${ROOFLINE_IMAGE_BASES:-auto}"
STORE="${ROOFLINE_IMAGE_STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/containers}"
SUITE=bookworm
# The profiler stand-in's torch: the build the Makefile installs, and a numpy the real base
# also ships.
TORCH_REQUIREMENTS=("torch==2.13.0" "numpy==2.4.6")
# The CAs this machine trusts (pip's own setting first): the stand-ins trust them too, so that pip
# inside the build reaches PyPI wherever the host's pip does, TLS-inspecting proxies included.
CA_BUNDLE="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"

log() { printf 'build-images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (buildah's vfs storage and debootstrap need it)"
command -v buildah >/dev/null || die "buildah not found (apt-get install buildah)"
case "$BASES" in auto | public | standin) ;; *) die "ROOFLINE_IMAGE_BASES=$BASES (expected auto, public or standin)" ;; esac

mkdir -p "$STORE/storage" "$STORE/run" "$STORE/wheels" "$STORE/tmp"
export TMPDIR="$STORE/tmp"
bh() { buildah --root "$STORE/storage" --runroot "$STORE/run" --storage-driver vfs "$@"; }

# The label value of an image, empty when the image is absent.
image_label() {
    bh inspect --type image --format "{{index .OCIv1.Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}

sha() { sha256sum | cut -c1-16; }

# A stand-in build that was interrupted leaves its working container (a whole root file system).
bh containers --format '{{.ContainerName}}' | grep '^roofline-standin-build-' \
    | while read -r stale; do bh rm "$stale" >/dev/null; done || true

# The Debian mirror apt uses here, so that debootstrap reaches what apt reaches.
debian_mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then
        echo "$DEBIAN_MIRROR"
        return
    fi
    local uri
    uri="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | head -n 1 | awk '{print $2}' || true)"
    echo "${uri:-http://deb.debian.org/debian}"
}

# A container from scratch holding a minimal Debian with Python 3.11 in /opt/venv (pip inside,
# as in the python image); prints the container's name.
debian_python_container() {
    local ctr mnt
    command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
    ctr="$(bh from --name "roofline-standin-build-$$-$RANDOM" scratch)"
    mnt="$(bh mount "$ctr")"
    log "debootstrap $SUITE into $ctr from $(debian_mirror)"
    debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$mnt" "$(debian_mirror)" \
        >"$STORE/tmp/debootstrap.log" 2>&1 || { tail -n 20 "$STORE/tmp/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/* "$mnt"/debootstrap
    bh umount "$ctr" >/dev/null
    bh run --isolation chroot "$ctr" -- python3 -m venv /opt/venv >&2
    bh config --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd python3 "$ctr"
    if [ -r "$CA_BUNDLE" ]; then
        bh copy --chmod 0644 "$ctr" "$CA_BUNDLE" /etc/ssl/certs/ca-certificates.crt >/dev/null
        bh config --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$ctr"
    fi
    echo "$ctr"
}

# Commit a stand-in base with labels that say what it is.
commit_standin() {
    local ctr="$1" ref="$2" key="$3" stands_for="$4" contents="$5"
    bh config \
        --label "org.opencontainers.image.title=$(basename "${ref%%:*}")" \
        --label "org.opencontainers.image.description=Local stand-in for $stands_for: $contents. Made by scripts/build-images.sh where the public base cannot be pulled; not for release." \
        --label "dev.roofline.standin-key=$key" "$ctr"
    bh commit --quiet --format docker --rm "$ctr" "$ref" >/dev/null
}

# What every stand-in holds, as text to hash: the recipe and the CAs it trusts.
debian_python_recipe() {
    printf '%s\n' "$SUITE minbase python3 python3-venv /opt/venv v1"
    if [ -r "$CA_BUNDLE" ]; then sha256sum <"$CA_BUNDLE"; fi
}

standin_python() {
    local key ref ctr
    key="$(debian_python_recipe | sha)"
    ref="localhost/roofline-standin-python:$SUITE-$key"
    if [ "$(image_label "$ref" dev.roofline.standin-key)" != "$key" ]; then
        log "making the Python stand-in base $ref"
        local start=$SECONDS
        ctr="$(debian_python_container)"
        commit_standin "$ctr" "$ref" "$key" "docker.io/library/python:3.11-slim-bookworm" \
            "Debian $SUITE minbase with Debian's Python 3.11 in /opt/venv"
        log "made $ref in $((SECONDS - start)) s"
    fi
    echo "$ref"
}

standin_pytorch() {
    local key ref ctr
    key="$({ debian_python_recipe; printf '%s\n' "${TORCH_REQUIREMENTS[@]}"; } | sha)"
    ref="localhost/roofline-standin-pytorch:$SUITE-$key"
    if [ "$(image_label "$ref" dev.roofline.standin-key)" != "$key" ]; then
        log "making the PyTorch stand-in base $ref"
        local start=$SECONDS
        ctr="$(debian_python_container)"
        # Wheels are kept in $STORE/wheels: the torch build and its CUDA libraries are GBs, and a
        # rebuilt base installs them from there without downloading them again.
        bh run --isolation chroot --volume "$STORE/wheels:/wheels" "$ctr" -- sh -c '
            pip install --quiet --no-index --find-links /wheels "$@" 2>/dev/null || {
                pip download --quiet --dest /wheels "$@" && pip install --quiet --no-index --find-links /wheels "$@"
            }' sh "${TORCH_REQUIREMENTS[@]}" >&2
        bh run --isolation chroot "$ctr" -- python -c "import torch; print('stand-in torch', torch.__version__, 'cuda', torch.version.cuda)" >&2
        commit_standin "$ctr" "$ref" "$key" "docker.io/pytorch/pytorch (CUDA runtime)" \
            "Debian $SUITE minbase with Debian's Python 3.11 and ${TORCH_REQUIREMENTS[*]} from PyPI in /opt/venv"
        log "made $ref in $((SECONDS - start)) s"
    fi
    echo "$ref"
}

registry_reachable() {
    command -v curl >/dev/null && curl --silent --output /dev/null --max-time 10 https://registry-1.docker.io/v2/
}

# What the images are built from: the Dockerfile, the context it may copy (.dockerignore's
# whitelist), this script and the bases.
context_digest() {
    {
        printf '%s\n' "$@"
        find Dockerfile .dockerignore scripts/build-images.sh pyproject.toml README.md profiler operator cli \
            -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info*' -print0 \
            | LC_ALL=C sort -z | xargs -0 sha256sum
    } | sha
}

if [ "$BASES" = auto ]; then
    if registry_reachable; then BASES=public; else BASES=standin; fi
    log "bases: $BASES"
fi

build_args=()
suffix=""
if [ "$BASES" = standin ]; then
    python_base="$(standin_python)"
    pytorch_base="$(standin_pytorch)"
    build_args=(--build-arg "PYTHON_IMAGE=$python_base" --build-arg "PYTORCH_IMAGE=$pytorch_base")
    suffix="-standin"
fi
digest="$(context_digest "$BASES" "${build_args[@]}")"

declare -A refs=([operator]="localhost/roofline-operator:$VERSION$suffix" [profiler]="localhost/roofline:$VERSION$suffix")
for target in operator profiler; do
    ref="${refs[$target]}"
    if [ "$(image_label "$ref" dev.roofline.context-digest)" = "$digest" ]; then
        log "$ref is current (context $digest)"
        continue
    fi
    log "building $ref (target $target, context $digest)"
    start=$SECONDS
    bh bud --quiet --isolation chroot --format docker --layers=false --pull=missing \
        --target "$target" --build-arg "VERSION=$VERSION" "${build_args[@]}" \
        --label "dev.roofline.context-digest=$digest" --tag "$ref" --file Dockerfile . >&2
    log "built $ref in $((SECONDS - start)) s"
done
# Older builds of the same names are left untagged, older stand-ins under other keys: drop them
# (a profiler image or its base holds GBs) and the stages' leftovers.
if [ "$BASES" = standin ]; then
    bh images --format '{{.Name}}:{{.Tag}}' \
        | grep -E '^localhost/roofline-standin-(python|pytorch):' \
        | grep -vxF -e "$python_base" -e "$pytorch_base" \
        | while read -r stale; do bh rmi "$stale" >/dev/null && log "removed $stale"; done || true
fi
bh rmi --prune >/dev/null 2>&1 || true

echo "root=$STORE/storage"
echo "runroot=$STORE/run"
echo "bases=$BASES"
echo "operator=${refs[operator]}"
echo "profiler=${refs[profiler]}"
