# KernelIndex Ledger. Build: docker build -t kernelindex .
# Run:   docker run -v kernelindex-data:/data kernelindex            (demo ledger on the volume)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    KERNELINDEX_HOME=/data PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY ledger ./ledger
COPY projections ./projections
COPY gpu_agent ./gpu_agent
COPY api ./api
RUN pip install '.[postgres]' \
    && useradd --system --uid 10001 --home-dir /data kernelindex \
    && mkdir -p /data && chown kernelindex /data

USER kernelindex
VOLUME ["/data"]
ENTRYPOINT ["kernelindex"]
# Becomes `serve` when the HTTP API lands (issue: HTTP API and web pages).
CMD ["demo", "--home", "/data"]
