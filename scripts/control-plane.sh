#!/usr/bin/env bash
# Builds the control plane the real-server tests run against, once per machine:
#   kube-apiserver and kubectl from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3,
# at the versions pinned in scripts/control-plane/go.mod, and the NodeFeature CRD of
# node-feature-discovery (the YAML its pinned Go module ships; NFD_VERSION below). Binaries are cached outside the repository
# under ${ROOFLINE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/control-plane}
# in a directory named after the Kubernetes version; a complete directory is reused as it is.
#
#   scripts/control-plane.sh           build if missing, then print the binaries' directory
#   scripts/control-plane.sh --dir     print the directory without building
#   scripts/control-plane.sh --force   rebuild even if the directory is complete
#
# Go >= 1.25 and the Go module proxy are needed. GOFLAGS (e.g. -p=2) is honoured; the default keeps
# the build to two parallel compile jobs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
module="$here/control-plane"
kube_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$module/go.mod")"
if [ -z "$kube_version" ]; then
    echo "control-plane: no k8s.io/kubernetes version in $module/go.mod" >&2
    exit 2
fi
cache_root="${ROOFLINE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/control-plane}"
dest="$cache_root/$kube_version"
binaries=(etcd kube-apiserver kubectl)
NFD_MODULE=sigs.k8s.io/node-feature-discovery
NFD_VERSION=v0.17.3
NFD_CRD=nfd-api-crds.yaml

complete() {
    local b
    for b in "${binaries[@]}"; do [ -x "$dest/$b" ] || return 1; done
    [ -f "$dest/BUILD-INFO" ]
}

case "${1:-}" in
    --dir) echo "$dest"; exit 0 ;;
    --force) rm -rf "$dest" ;;
    "") ;;
    *) echo "usage: $0 [--dir|--force]" >&2; exit 2 ;;
esac

# The NodeFeature CRD from NFD's module zip (the module proxy verifies it against go.sum's database).
fetch_nfd_crd() {
    local scratch dir
    scratch="$(mktemp -d)"
    dir="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$NFD_MODULE@$NFD_VERSION" |
        awk -F'"' '$2 == "Dir" {print $4}')"
    rm -rf "$scratch"
    cp "$dir/deployment/base/nfd-crds/$NFD_CRD" "$dest/$NFD_CRD.tmp"
    mv "$dest/$NFD_CRD.tmp" "$dest/$NFD_CRD"
}

if complete && [ -f "$dest/$NFD_CRD" ]; then
    echo "$dest"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "control-plane: Go is not installed; it is needed to build kube-apiserver, etcd and kubectl" >&2
    exit 3
fi

# Several test processes may ask at once: one builds, the others wait for it.
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if complete; then
    [ -f "$dest/$NFD_CRD" ] || fetch_nfd_crd
    echo "$dest"
    exit 0
fi

minor="${kube_version#v1.}"
minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# What `/version` and `kubectl version` report; the release's own hack/lib/version.sh sets the same.
version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    version_flags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

staging="$(mktemp -d "$cache_root/.build-$kube_version.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--p=2}" GOTOOLCHAIN=local
cd "$module"
echo "control-plane: building kube-apiserver, kubectl $kube_version and etcd into $dest" >&2
started=$SECONDS
go build -trimpath -ldflags "-s -w$version_flags" -o "$staging/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags "-s -w$version_flags" -o "$staging/kubectl" k8s.io/kubernetes/cmd/kubectl
go build -trimpath -ldflags "-s -w" -o "$staging/etcd" ./etcd
{
    echo "kubernetes $kube_version"
    echo "etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)"
    echo "node-feature-discovery CRD $NFD_VERSION"
    echo "go $(go env GOVERSION)"
    echo "built $build_date in $((SECONDS - started)) s"
} >"$staging/BUILD-INFO"
rm -rf "$dest"
mv "$staging" "$dest"
trap - EXIT
fetch_nfd_crd
echo "$dest"
