#!/usr/bin/env bash
# Builds the control plane the real-server tests run against, once per machine:
#   kube-apiserver and kubectl from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3,
# at the versions pinned in scripts/control-plane/go.mod, and the NodeFeature CRD of
# node-feature-discovery (the YAML its pinned Go module ships; NFD_VERSION below). With --node it
# builds the real-node tests' node instead: kubelet, kube-scheduler, kube-controller-manager and
# kube-proxy from the same pinned k8s.io/kubernetes, and the sandbox image's static `pause`
# (scripts/control-plane/pause). Binaries are cached outside the repository under
# ${ROOFLINE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/control-plane}
# in a directory named after the Kubernetes version (the node's with a -node suffix); a complete
# directory is reused as it is.
#
#   scripts/control-plane.sh [--node]           build if missing, then print the binaries' directory
#   scripts/control-plane.sh [--node] --dir     print the directory without building
#   scripts/control-plane.sh [--node] --force   rebuild even if the directory is complete
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
node=false
if [ "${1:-}" = --node ]; then
    node=true
    shift
fi
if $node; then
    dest="$cache_root/$kube_version-node"
    binaries=(kubelet kube-scheduler kube-controller-manager kube-proxy pause)
else
    dest="$cache_root/$kube_version"
    binaries=(etcd kube-apiserver kubectl)
fi
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
    *) echo "usage: $0 [--node] [--dir|--force]" >&2; exit 2 ;;
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

# The control plane's directory is complete with the NodeFeature CRD too; the node's needs none.
extras_present() { $node || [ -f "$dest/$NFD_CRD" ]; }

if complete && extras_present; then
    echo "$dest"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "control-plane: Go is not installed; it is needed to build ${binaries[*]}" >&2
    exit 3
fi

# Several test processes may ask at once: one builds, the others wait for it.
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if complete; then
    extras_present || fetch_nfd_crd
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

staging="$(mktemp -d "$cache_root/.build-$(basename "$dest").XXXXXX")"
trap 'rm -rf "$staging"' EXIT
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--p=2}" GOTOOLCHAIN=local
cd "$module"
echo "control-plane: building ${binaries[*]} ($kube_version) into $dest" >&2
started=$SECONDS
for binary in "${binaries[@]}"; do
    case "$binary" in
        etcd | pause) go build -trimpath -ldflags "-s -w" -o "$staging/$binary" "./$binary" ;;
        *) go build -trimpath -ldflags "-s -w$version_flags" -o "$staging/$binary" "k8s.io/kubernetes/cmd/$binary" ;;
    esac
done
{
    echo "kubernetes $kube_version"
    if $node; then
        echo "pause $(sha256sum <"$module/pause/main.go" | cut -c1-16) (scripts/control-plane/pause/main.go)"
    else
        echo "etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)"
        echo "node-feature-discovery CRD $NFD_VERSION"
    fi
    echo "go $(go env GOVERSION)"
    echo "built $build_date in $((SECONDS - started)) s"
} >"$staging/BUILD-INFO"
rm -rf "$dest"
mv "$staging" "$dest"
trap - EXIT
extras_present || fetch_nfd_crd
echo "$dest"
