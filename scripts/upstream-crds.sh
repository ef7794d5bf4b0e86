#!/usr/bin/env bash
# Fetches, once per machine, the upstream schemas `roofline export` writes for, at pinned versions,
# from their Go module zips (the module proxy verifies each zip against the checksum database):
#   KEDA v2.21.1                                the ScaledObject CRD
#   Kueue v0.17.0                               the ResourceFlavor, ClusterQueue, Cohort and LocalQueue CRDs
#   Gateway API Inference Extension v1.6.2      the InferencePool CRD
#   Gateway API Inference Extension v1.5.0      the endpoint picker's configuration types (the last
#                                               release whose module holds the endpoint picker) and
#                                               the templates and values of its inferencepool chart
# into ${ROOFLINE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/upstream-schemas}
# in a directory named after the versions; a complete directory is reused as it is.
#
#   scripts/upstream-crds.sh           fetch if missing, then print the directory
#   scripts/upstream-crds.sh --dir     print the directory without fetching
#
# Go and the Go module proxy are needed. KEDA's module asks for a newer Go than it needs to be
# downloaded: `go mod download` reports that, and still leaves the verified zip in the module cache.
set -euo pipefail

KEDA=github.com/kedacore/keda/v2@v2.21.1
KUEUE=sigs.k8s.io/kueue@v0.17.0
GAIE=sigs.k8s.io/gateway-api-inference-extension@v1.6.2
EPP=sigs.k8s.io/gateway-api-inference-extension@v1.5.0

# module@version  path in its zip  file name here
FILES=(
    "$KEDA config/crd/bases/keda.sh_scaledobjects.yaml keda.sh_scaledobjects.yaml"
    "$KUEUE config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml kueue.x-k8s.io_resourceflavors.yaml"
    "$KUEUE config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml kueue.x-k8s.io_clusterqueues.yaml"
    "$KUEUE config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml kueue.x-k8s.io_cohorts.yaml"
    "$KUEUE config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml kueue.x-k8s.io_localqueues.yaml"
    "$GAIE config/crd/bases/inference.networking.k8s.io_inferencepools.yaml inference.networking.k8s.io_inferencepools.yaml"
    "$EPP apix/config/v1alpha1/endpointpickerconfig_types.go epp-endpointpickerconfig_types.go"
    "$EPP pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/config.go epp-utilization-config.go"
    "$EPP config/charts/inferencepool/values.yaml chart-inferencepool-values.yaml"
    "$EPP config/charts/inferencepool/templates/inferencepool.yaml chart-inferencepool-pool.yaml"
    "$EPP config/charts/epplib/templates/_config.yaml chart-epplib-config.yaml"
    "$EPP config/charts/epplib/templates/_deployment.yaml chart-epplib-deployment.yaml"
)

cache_root="${ROOFLINE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/upstream-schemas}"
dest="$cache_root/keda-v2.21.1_kueue-v0.17.0_gaie-v1.6.2_epp-v1.5.0"

complete() {
    local entry name
    for entry in "${FILES[@]}"; do
        name="${entry##* }"
        [ -s "$dest/$name" ] || return 1
    done
    [ -f "$dest/VERSIONS" ]
}

case "${1:-}" in
    --dir) echo "$dest"; exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--dir]" >&2; exit 2 ;;
esac

if complete; then
    echo "$dest"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "upstream-crds: Go is not installed; it downloads the upstream modules" >&2
    exit 3
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.fetch.lock"
flock 9
if complete; then
    echo "$dest"
    exit 0
fi

# The zip of one module version (downloaded and verified by the Go command).
module_zip() {
    local scratch zip
    scratch="$(mktemp -d)"
    zip="$(cd "$scratch" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "$1" 2>/dev/null |
        awk -F'"' '$2 == "Zip" {print $4}' || true)"
    rm -rf "$scratch"
    if [ -z "$zip" ] || [ ! -f "$zip" ]; then
        echo "upstream-crds: go mod download $1 gave no zip" >&2
        exit 4
    fi
    echo "$zip"
}

staging="$(mktemp -d "$cache_root/.fetch.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
for entry in "${FILES[@]}"; do
    read -r module path name <<<"$entry"
    zip="$(module_zip "$module")"
    python3 - "$zip" "$module/$path" "$staging/$name" <<'PY'
import sys
import zipfile

archive, member, target = sys.argv[1:]
with zipfile.ZipFile(archive) as z, open(target, "wb") as out:
    out.write(z.read(member))
PY
done
printf '%s\n' "$KEDA" "$KUEUE" "$GAIE" "$EPP" >"$staging/VERSIONS"
rm -rf "$dest"
mv "$staging" "$dest"
trap - EXIT
echo "$dest"
