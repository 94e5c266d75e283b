# jetwatch: collector, pipeline and dashboard in one image. Install steps match the README's:
# a Java 17 runtime for Spark, then `pip install` of this repository.
# The dashboard listens on every interface and is read-only (and says so) until operators exist:
#   docker exec -it <container> jetwatch operator add NAME
# It answers only to localhost and the container's own names: set JETWATCH_ALLOWED_HOSTS to the
# names users type, and put a TLS reverse proxy in front (docs/security.md).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JETWATCH_DATA_DIR=/data \
    JETWATCH_DB=/data/jetwatch.duckdb \
    JETWATCH_ADDRESS=0.0.0.0 \
    JETWATCH_OPERATORS_FILE=/data/operators \
    NATS_URL=nats://nats:4222 \
    NUMBA_CACHE_DIR=/opt/jetwatch/numba-cache

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 jetwatch \
    && mkdir -p /data && chown jetwatch:jetwatch /data

WORKDIR /app
COPY . /app
# The window features' compiled pass, compiled now and cached where the collector finds it.
RUN pip install --no-cache-dir "/app[all]" \
    && python -c "from jetwatch.health.window_pass import compile_now; compile_now()" \
    && chown -R jetwatch:jetwatch /opt/jetwatch

USER 10001
VOLUME ["/data"]
EXPOSE 8501

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]

# The server URL (which may carry credentials) reaches jetwatch through the environment, never
# its command line: `ps` shows argv to every user of the host. Credentials belong in
# JETWATCH_USER/JETWATCH_PASSWORD (or JETWATCH_CREDS); a user:password@ in the URL is lifted out.
CMD ["sh", "-c", "export JETWATCH_SERVER=\"${JETWATCH_SERVER:-$NATS_URL}\"; exec jetwatch up"]
