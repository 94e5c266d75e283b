# jetwatch: collector, pipeline and dashboard in one image. Install steps match the README's:
# a Java 17 runtime for Spark, then `pip install` of this repository.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JETWATCH_DATA_DIR=/data \
    JETWATCH_DB=/data/jetwatch.duckdb \
    JETWATCH_ADDRESS=0.0.0.0 \
    NATS_URL=nats://nats:4222

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 jetwatch \
    && mkdir -p /data && chown jetwatch:jetwatch /data

WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir /app

USER 10001
VOLUME ["/data"]
EXPOSE 8501

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]

CMD ["sh", "-c", "exec jetwatch up --server \"$NATS_URL\""]
