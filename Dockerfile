# The fabric service image: `fabric serve` on 0.0.0.0:8080 with the compose profile.
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    FABRIC_HOME=/data \
    FABRIC_PROFILE=compose

# CPU-only torch first (a plain `torch` pulls a multi-GB CUDA build), then the project with its embedder.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
WORKDIR /src
COPY pyproject.toml README.md ./
COPY fabric ./fabric
COPY lanes ./lanes
COPY fusion ./fusion
RUN pip install ".[embeddings]"
WORKDIR /app
COPY config ./config
RUN rm -rf /src && useradd --system --home /data fabric && mkdir -p /data /run/fabric-keys \
  && chown fabric /data /run/fabric-keys

USER fabric
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"
CMD ["fabric", "serve", "--host", "0.0.0.0", "--port", "8080"]
