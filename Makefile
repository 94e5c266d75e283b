# The two commands of the README: `make up` and `make test`. Each sets up what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up test system-deps bench bench-detector lint-docker

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $(STAMP)

up: $(STAMP)
	$(VENV)/bin/jetwatch up

# Debian packages the tests drive: Chromium for the browser tests, a Java runtime for Spark,
# Prometheus (with promtool) and Alertmanager for the metrics and alerting tests.
system-deps:
	@command -v chromium >/dev/null && command -v java >/dev/null && command -v prometheus >/dev/null \
	  && command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null \
	  && command -v faketime >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium openjdk-17-jre-headless \
	  prometheus prometheus-alertmanager faketime >/dev/null; }

test: $(STAMP) system-deps
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m bench.run_all

# The verdicts as a detector: time to name each incident, false alarms over 30 minutes of look-alikes.
bench-detector: $(STAMP)
	$(PY) -m bench.detector --minutes 30
