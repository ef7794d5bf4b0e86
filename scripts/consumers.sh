#!/usr/bin/env bash
# Builds, once per machine, the consumers of `roofline export`'s objects that the real-node tests run
# (tests/operator/realnode/test_real_kueue.py, test_real_keda.py), from their pinned Go module zips:
#   Kueue v0.17.0   sigs.k8s.io/kueue            cmd/kueue     -> kueue-manager
#   KEDA  v2.20.2   github.com/kedacore/keda/v2  cmd/operator  -> keda-operator
#                                                cmd/adapter   -> keda-metrics-apiserver
# and the manifests each one is installed with, from the same zips: Kueue's CRDs, the CRD patches
# that turn on its conversion webhook and its webhook manifest with the kustomization that patches
# it (kueue/), KEDA's CRDs (keda/). KEDA v2.21's go.mod asks for a newer Go than the local one these
# builds pin (GOTOOLCHAIN=local), so v2.20.2 runs here; the schema checks keep v2.21.1's CRD
# (scripts/upstream-crds.sh). Everything is cached outside the repository under
# ${ROOFLINE_CONSUMERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/consumers}
# in a directory named after the versions; a complete directory is reused as it is.
#
#   scripts/consumers.sh           build if missing, then print the directory
#   scripts/consumers.sh --dir     print the directory without building
#   scripts/consumers.sh --force   rebuild even if the directory is complete
#
# Go and the Go module proxy are needed (exit 3 without Go). GOFLAGS (e.g. -p=2) is honoured; the
# default keeps the build to two parallel compile jobs.
set -euo pipefail

KUEUE=sigs.k8s.io/kueue@v0.17.0
KEDA=github.com/kedacore/keda/v2@v2.20.2

cache_root="${ROOFLINE_CONSUMERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/consumers}"
dest="$cache_root/kueue-${KUEUE##*@}_keda-${KEDA##*@}"
binaries=(kueue-manager keda-operator keda-metrics-apiserver)

complete() {
    local b
    for b in "${binaries[@]}"; do [ -x "$dest/$b" ] || return 1; done
    [ -f "$dest/BUILD-INFO" ]
}
# The manifests are fetched apart from the binaries, so that a directory built before they were
# added is completed without a rebuild.
manifests_present() {
    [ -s "$dest/kueue/crd/bases/kueue.x-k8s.io_clusterqueues.yaml" ] &&
        [ -s "$dest/kueue/crd/kustomization.yaml" ] &&
        [ -s "$dest/kueue/webhook/manifests.yaml" ] &&
        [ -s "$dest/kueue/webhook/kustomization.yaml" ] &&
        [ -s "$dest/kueue/internalcert/secret.yaml" ] &&
        [ -s "$dest/keda/crd/bases/keda.sh_scaledobjects.yaml" ]
}

case "${1:-}" in
    --dir) echo "$dest"; exit 0 ;;
    --force) rm -rf "$dest" ;;
    "") ;;
    *) echo "usage: $0 [--dir|--force]" >&2; exit 2 ;;
esac

if complete && manifests_present; then
    echo "$dest"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "consumers: Go is not installed; it is needed to build ${binaries[*]}" >&2
    exit 3
fi

# Several test processes may ask at once: one builds, the others wait for it.
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--p=2} -buildvcs=false" GOTOOLCHAIN=local

# The directory of one module version's source (downloaded and verified by the Go command).
module_dir() {
    local scratch dir
    scratch="$(mktemp -d)"
    dir="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$1" |
        awk -F'"' '$2 == "Dir" {print $4}')"
    rm -rf "$scratch"
    if [ -z "$dir" ] || [ ! -d "$dir" ]; then
        echo "consumers: go mod download $1 gave no source directory" >&2
        exit 4
    fi
    echo "$dir"
}

# Kueue's and KEDA's install manifests, as their release's kustomizations read them.
fetch_manifests() {
    local kueue keda
    kueue="$(module_dir "$KUEUE")"
    keda="$(module_dir "$KEDA")"
    rm -rf "$dest/kueue" "$dest/keda" "$dest/.manifests"
    mkdir -p "$dest/.manifests/kueue" "$dest/.manifests/keda"
    cp -r "$kueue/config/components/crd" "$dest/.manifests/kueue/crd"
    cp -r "$kueue/config/components/webhook" "$dest/.manifests/kueue/webhook"
    cp -r "$kueue/config/components/internalcert" "$dest/.manifests/kueue/internalcert"
    cp -r "$keda/config/crd" "$dest/.manifests/keda/crd"
    chmod -R u+w "$dest/.manifests"
    mv "$dest/.manifests/kueue" "$dest/.manifests/keda" "$dest/"
    rmdir "$dest/.manifests"
}

if complete; then
    manifests_present || fetch_manifests
    echo "$dest"
    exit 0
fi

staging="$(mktemp -d "$cache_root/.build-$(basename "$dest").XXXXXX")"
trap 'chmod -R u+w "$staging" 2>/dev/null; rm -rf "$staging"' EXIT

# A writable copy of one module version's source, built in place.
module_source() {
    cp -r "$(module_dir "$1")" "$2"
    chmod -R u+w "$2"
}

echo "consumers: building ${binaries[*]} ($KUEUE, $KEDA) into $dest" >&2
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
started=$SECONDS
module_source "$KUEUE" "$staging/src-kueue"
(cd "$staging/src-kueue" &&
    go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE##*@}" \
        -o "$staging/kueue-manager" ./cmd/kueue)
kueue_seconds=$((SECONDS - started))

started_keda=$SECONDS
module_source "$KEDA" "$staging/src-keda"
version_flags="-s -w -X github.com/kedacore/keda/v2/version.Version=${KEDA##*@}"
(cd "$staging/src-keda" && go build -trimpath -ldflags "$version_flags" -o "$staging/keda-operator" ./cmd/operator)
operator_seconds=$((SECONDS - started_keda))
(cd "$staging/src-keda" && go build -trimpath -ldflags "$version_flags" -o "$staging/keda-metrics-apiserver" ./cmd/adapter)
keda_seconds=$((SECONDS - started_keda))

{
    echo "kueue $KUEUE (cmd/kueue) in $kueue_seconds s"
    echo "keda $KEDA (cmd/operator in $operator_seconds s, with cmd/adapter in $keda_seconds s)"
    echo "go $(go env GOVERSION)"
    echo "built $build_date in $((SECONDS - started)) s"
} >"$staging/BUILD-INFO"
rm -rf "$staging/src-kueue" "$staging/src-keda"
rm -rf "$dest"
mv "$staging" "$dest"
trap - EXIT
fetch_manifests
echo "$dest"
