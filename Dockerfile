# gdn-ucache serving image: vLLM's official OpenAI server image with the gdn-ucache patch
# series applied to its installed vllm package and the ucache kernel selected.
#
# Build it with scripts/build-container.sh (it computes the label values and prints the
# docker run command); see docs/container.md. Needs BuildKit (the default builder since
# Docker 23; the script sets DOCKER_BUILDKIT=1).
#
# Build args:
#   VLLM_VERSION   vLLM release of the base image, default: the pin in vllm.pin. The apply
#                  step refuses any other installed vllm version unless SERIES_FORCE=1.
#   BASE_IMAGE     base image repository, tagged v<VLLM_VERSION> (default vllm/vllm-openai).
#   UCACHE_KERNEL  ours (default): VLLM_GDN_UCACHE_MODULE points at our kernel,
#                  /opt/gdn-ucache/kernels/gdn_ucache_flush.py.
#                  flashinfer: VLLM_GDN_UCACHE_MODULE stays unset, so vLLM loads the kernel
#                  shipped in the image's flashinfer-python.
#   SERIES_FORCE   1: apply the series to a vllm version other than the pin (warns).
#   SERIES_VERSION, SERIES_DIGEST, PATCH_COUNT, SOURCE_REVISION: label values.
ARG BASE_IMAGE=vllm/vllm-openai
ARG VLLM_VERSION=0.33.0
ARG UCACHE_KERNEL=ours

FROM ${BASE_IMAGE}:v${VLLM_VERSION} AS patched
ARG SERIES_FORCE=0
# The build context (.dockerignore admits only the apply tooling, patches/, vllm.pin and the
# kernel) is bind-mounted for this one step, so none of it stays in the image: the layer holds
# exactly the changed vllm files, their .pyc and the manifest. The step prints each file.
RUN --mount=type=bind,target=/tmp/gdn-ucache-src \
    set --; if [ "${SERIES_FORCE}" = 1 ]; then set -- --force; fi; \
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/tmp/gdn-ucache-src \
    python3 -m tools.container --root /tmp/gdn-ucache-src install \
        --manifest /opt/gdn-ucache/series-manifest.txt "$@"

# vLLM loads flashinfer's gdn_decode_bf16_wy_ucache_flush when VLLM_GDN_UCACHE_MODULE is unset.
FROM patched AS kernel-flashinfer

FROM patched AS kernel-ours
COPY kernels/gdn_ucache_flush.py /opt/gdn-ucache/kernels/gdn_ucache_flush.py
ENV VLLM_GDN_UCACHE_MODULE=/opt/gdn-ucache/kernels/gdn_ucache_flush.py

# The final stage is one of the two above, chosen by UCACHE_KERNEL (a stage name, not an
# image, so it carries no tag).
# hadolint ignore=DL3006
FROM kernel-${UCACHE_KERNEL}
ARG BASE_IMAGE
ARG VLLM_VERSION
ARG UCACHE_KERNEL
ARG SERIES_VERSION=unknown
ARG SERIES_DIGEST=unknown
ARG PATCH_COUNT=unknown
ARG SOURCE_REVISION=unknown
LABEL org.opencontainers.image.title="gdn-ucache vLLM server" \
      org.opencontainers.image.description="vLLM ${VLLM_VERSION} OpenAI server with the gdn-ucache patch series (Qwen3.5 MTP speculative decoding, ReplaySSM ucache backend)" \
      org.opencontainers.image.version="${SERIES_VERSION}" \
      org.opencontainers.image.revision="${SOURCE_REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}:v${VLLM_VERSION}" \
      gdn-ucache.series-version="${SERIES_VERSION}" \
      gdn-ucache.series-digest="${SERIES_DIGEST}" \
      gdn-ucache.base-version="${VLLM_VERSION}" \
      gdn-ucache.patch-count="${PATCH_COUNT}" \
      gdn-ucache.kernel="${UCACHE_KERNEL}" \
      gdn-ucache.manifest="/opt/gdn-ucache/series-manifest.txt"
# The same entrypoint as the base image: arguments to docker run go to `vllm serve`.
ENTRYPOINT ["vllm", "serve"]
