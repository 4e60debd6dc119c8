# The fabric service image: `fabric serve` on 0.0.0.0:8080 as a non-root user, its home and model cache on volumes.
# Stage 1 builds the wheel; stage 2 installs it with deploy/install.sh (the install CI proves with .ci/wheel) and
# exports the embedding model, so that the first query of a new container is warm.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.6.1
COPY pyproject.toml README.md ./
COPY fabric ./fabric
COPY lanes ./lanes
COPY fusion ./fusion
RUN python -m build --wheel --outdir /dist .

FROM ${PYTHON_IMAGE}
# torch's CPU build (the default index would pull a multi-GB CUDA build)
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    FABRIC_HOME=/data \
    FABRIC_CACHE_DIR=/cache \
    FABRIC_PROFILE=compose
COPY deploy/install.sh /tmp/install.sh
COPY --from=build /dist/ /tmp/dist/
RUN set -- /tmp/dist/*.whl && TORCH_INDEX_URL="$TORCH_INDEX_URL" sh /tmp/install.sh python "$1[embeddings]" \
  && rm -rf /tmp/dist /tmp/install.sh \
  && useradd --system --uid 10001 --home-dir /data fabric \
  && mkdir -p /data /cache /run/fabric-keys \
  && chown fabric /data /cache /run/fabric-keys
USER 10001
WORKDIR /data
# the MiniLM export into /cache; a new volume mounted there starts with it
RUN fabric warm
VOLUME ["/data", "/cache"]
EXPOSE 8080
# ready, not merely alive: the stores repaired and the lanes warm (/healthz answers before that)
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=5 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2).status != 200)"]
CMD ["fabric", "serve", "--host", "0.0.0.0", "--port", "8080"]
