# syntax=docker/dockerfile:1.7
#
# Two images from one file (BuildKit):
#
#   docker build --target operator -t ghcr.io/roofline-dev/roofline-operator:0.1.0 .
#   docker build --target profiler -t ghcr.io/roofline-dev/roofline:0.1.0 .
#
# The operator image is slim Python with the `operator` extra and no torch. The profiler image
# starts from a CUDA PyTorch image and keeps the torch it ships: the project wheel goes in with
# --no-deps, so pip never resolves a second (CPU or mismatched-CUDA) torch on top of it.
#
# Bases are pinned by tag and digest; bump both together (docker buildx imagetools inspect).
# Another base goes in with --build-arg PYTHON_IMAGE=... / PYTORCH_IMAGE=...; the image's
# org.opencontainers.image.base.name label names whichever base it was built from.
# scripts/build-images.sh builds both targets with buildah, on stand-in bases where these
# cannot be pulled (docs/deploy.md).

ARG PYTHON_IMAGE=docker.io/library/python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1
ARG PYTORCH_IMAGE=docker.io/pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime@sha256:2b59b1b91885677814f78be1f8df48a25d5dc952eb6580eaecfefca510f9afd3

# ---- builder: one pure-Python wheel shared by both images -----------------------------------
# Never shipped, so it carries no image labels.
# hadolint ignore=DL3049
FROM ${PYTHON_IMAGE} AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY profiler/ profiler/
COPY operator/ operator/
COPY cli/ cli/
RUN pip wheel --no-deps --wheel-dir /dist . \
    && test "$(find /dist -name 'roofline_operator-*.whl' | wc -l)" -eq 1

# ---- operator: Kopf operator, no torch ------------------------------------------------------
FROM ${PYTHON_IMAGE} AS operator
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="roofline-operator" \
      org.opencontainers.image.description="Kubernetes operator that profiles GPU nodes' decode roofline and publishes it as node labels, RooflineProfile status and Prometheus metrics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheel is bind-mounted from the builder, so it never lands in a layer of this image.
# DL3013 cannot see that "$1" is the local wheel itself: its version is the build's, and its
# dependencies are the ranges of the `operator` extra in pyproject.toml.
# Once it is in, pip (the only package manager a non-root user could use here: HOME is
# writable) and the build tools setuptools and wheel are uninstalled; nothing needs them at run
# time.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=builder,source=/dist,target=/dist \
    set -- /dist/roofline_operator-*.whl \
    && pip install --no-cache-dir "$1[operator]" \
    && python -c "import roofline_cli, roofline_operator, kopf, prometheus_client" \
    && ! python -c "import torch" 2>/dev/null \
    && python -m pip uninstall --yes --quiet pip setuptools wheel \
    && groupadd --system --gid 65532 roofline \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin roofline
# Numeric, so that Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["roofline"]
CMD ["operator", "--standalone"]

# ---- profiler: CUDA PyTorch base, its torch reused ------------------------------------------
FROM ${PYTORCH_IMAGE} AS profiler
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG PYTORCH_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="roofline-profiler" \
      org.opencontainers.image.description="Measures a GPU's decode roofline: memory bandwidth, peak matrix FLOP/s, decode-GEMM batch sweep, ridge point and recommended minimum batch" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTORCH_IMAGE}"
# HOME and MPLCONFIGDIR point at /tmp: the pod's root filesystem is read-only and /tmp is an
# emptyDir there.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp
# --no-deps keeps the base image's CUDA torch (and its numpy); only the two small runtime
# dependencies the profiler imports are added, pinned. matplotlib is left out: profiler pods
# never plot (`roofline profile --plot` needs matplotlib). pip goes last, as in the operator
# image; setuptools stays, torch declares it (torch.utils.cpp_extension).
RUN --mount=type=bind,from=builder,source=/dist,target=/dist \
    pip install --no-cache-dir --no-deps /dist/roofline_operator-*.whl \
    && pip install --no-cache-dir "jsonschema==4.23.0" "nvidia-ml-py==12.575.51" \
    && python -c "import torch, roofline_cli, roofline_profiler.cli.commands; assert torch.version.cuda, 'no CUDA torch'" \
    && test "$(pip list 2>/dev/null | grep -c '^torch ')" -eq 1 \
    && python -m pip uninstall --yes --quiet pip wheel \
    && groupadd --system --gid 65532 roofline \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin roofline
USER 65532:65532
ENTRYPOINT ["roofline"]
CMD ["profile", "--help"]
