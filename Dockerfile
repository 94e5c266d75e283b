# jetwatch's images, one per role, from one recipe (targets):
#   collector  `jetwatch collect` and `jetwatch dashboard`: no Java, no Spark
#   pipeline   `jetwatch pipeline run`: a Java 17 runtime and PySpark
#   full       (the default) everything, `jetwatch up`: the laptop's shape in a container
# Each role's command is explicit and configured by JETWATCH_* variables and mounted files
# (credentials, the operators file), never by secrets on its command line. BASE is any Debian 12
# image with Python 3.11 (`make images` builds on a base of its own, made by debootstrap).
# The dashboard listens on every interface and is read-only (and says so) until operators exist:
#   docker exec -it <container> jetwatch operator add NAME
# It answers only to localhost and the container's own names: set JETWATCH_ALLOWED_HOSTS to the
# names users type, and put a TLS reverse proxy in front (docs/security.md).
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS base
# PIP_BREAK_SYSTEM_PACKAGES: on a Debian base the system Python is marked externally managed;
# in an image of its own, that Python is the environment.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JETWATCH_DATA_DIR=/data \
    JETWATCH_DB=/data/jetwatch.duckdb \
    JETWATCH_ADDRESS=0.0.0.0 \
    JETWATCH_OPERATORS_FILE=/data/operators \
    NATS_URL=nats://nats:4222 \
    NUMBA_CACHE_DIR=/opt/jetwatch/numba-cache
RUN useradd --create-home --uid 10001 jetwatch \
    && mkdir -p /data /opt/jetwatch && chown jetwatch:jetwatch /data
WORKDIR /app
COPY . /app

# The window features' compiled pass, compiled now and cached where the collector finds it (on a
# read-only root it is only read; docs/deployment.md).
FROM base AS collector
RUN pip install --no-cache-dir "/app[collector,dashboard]" \
    && python -c "from jetwatch.health.window_pass import compile_now; compile_now()" \
    && chown -R jetwatch:jetwatch /opt/jetwatch
USER 10001
VOLUME ["/data"]
EXPOSE 8501 9464
CMD ["jetwatch", "collect"]

FROM base AS pipeline
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir "/app[pipeline]" \
    && python -c "from jetwatch.health.window_pass import compile_now; compile_now()" \
    && chown -R jetwatch:jetwatch /opt/jetwatch
USER 10001
VOLUME ["/data"]
CMD ["jetwatch", "pipeline", "run"]

FROM pipeline AS full
USER 0
RUN pip install --no-cache-dir "/app[all]"
USER 10001
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]

# The server URL (which may carry credentials) reaches jetwatch through the environment, never
# its command line: `ps` shows argv to every user of the host. Credentials belong in
# JETWATCH_USER/JETWATCH_PASSWORD (or JETWATCH_CREDS); a user:password@ in the URL is lifted out.
CMD ["sh", "-c", "export JETWATCH_SERVER=\"${JETWATCH_SERVER:-$NATS_URL}\"; exec jetwatch up"]
