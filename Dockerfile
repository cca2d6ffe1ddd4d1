# KernelIndex Ledger, one image for every process (image name: kernelindex-ledger).
# Build: docker build -t kernelindex-ledger .
# Run:   docker run -p 8000:8000 -v kernelindex-data:/data kernelindex-ledger   (demo ledger, served)
#        docker run -v kernelindex-data:/data kernelindex-ledger demo --home /data   (print the demo)
# On PostgreSQL with several workers, a projector and a sequencer: compose.yaml, and
# docs/deployment.md. .dockerignore keeps the context to what is copied below.
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
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"
ENTRYPOINT ["kernelindex"]
CMD ["serve", "--demo", "--home", "/data", "--host", "0.0.0.0", "--port", "8000"]
