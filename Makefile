# The two commands of the README: `make up` and `make test`. Each sets up what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up lint test test-heavy test-cluster screenshots fuzz system-deps deploy-deps images bench bench-detector bench-incidents bench-cluster lint-docker

# The test runs keep Python's bytecode in the venv (never in the source tree) and write it even where
# the environment says not to (PYTHONDONTWRITEBYTECODE=1): otherwise every pytest worker rewrites
# and compiles every test module again, and every jetwatch command a test starts compiles the package
# (0.4 s of CPU each, hundreds of them a run, on two cores).
test test-heavy test-cluster screenshots fuzz: export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
test test-heavy test-cluster screenshots fuzz: export PYTHONDONTWRITEBYTECODE :=
# numba's compiled window pass is cached there too (else beside health/window_pass.py).
test test-heavy test-cluster screenshots fuzz: export NUMBA_CACHE_DIR := $(abspath $(VENV))/numba_cache

# --no-compile: the test runs never read the bytecode pip would write beside the packages (they keep
# theirs under PYTHONPYCACHEPREFIX), and `jetwatch up` compiles what it imports on first use.
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q --no-compile -e '.[test]'
	touch $(STAMP)

up: $(STAMP)
	$(VENV)/bin/jetwatch up

# Debian packages the tests drive: Chromium for the browser tests, a Java runtime for Spark,
# Prometheus (with promtool) and Alertmanager for the metrics and alerting tests, faketime, and nftables
# and iproute2 for the partition test (its own network namespace, its own firewall table).
system-deps:
	@command -v chromium >/dev/null && command -v java >/dev/null && command -v prometheus >/dev/null \
	  && command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null \
	  && command -v faketime >/dev/null && command -v nft >/dev/null && command -v ip >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium openjdk-17-jre-headless \
	  prometheus prometheus-alertmanager faketime nftables iproute2 >/dev/null; }

# The Prometheus Operator's CRD schemas (npm, pinned in its package-lock.json) that the Kubernetes
# manifests' tests validate the PodMonitor and PrometheusRule against; Node.js from Debian if absent.
DEPLOY_DEPS := deploy/kubernetes/validate/node_modules/.package-lock.json
deploy-deps: $(DEPLOY_DEPS)
$(DEPLOY_DEPS): deploy/kubernetes/validate/package-lock.json
	@command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --prefix deploy/kubernetes/validate --no-audit --no-fund --loglevel=error

# The role images (Dockerfile targets collector and pipeline) with buildah, on a Debian 12 base
# made here by debootstrap with Debian's Python 3.11 (no registry needed), then their sizes. RUN
# steps run in a chroot: no container runtime is needed (none can run here); they see the host's
# CA bundle for their downloads (a TLS proxy's CA with it), mounted, never copied into an image.
IMAGE_BUILD := buildah bud -q --layers --isolation chroot --build-arg BASE=localhost/jetwatch-base:bookworm \
	--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
# Minutes long and not a test: beside `make test-heavy`, never in `make test`.
IMAGE_ROOT := $(VENV)/image-base
images:
	@command -v buildah >/dev/null && command -v debootstrap >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah debootstrap >/dev/null; }
	@if ! buildah inspect --type image localhost/jetwatch-base:bookworm >/dev/null 2>&1; then \
	  rm -rf $(IMAGE_ROOT) && debootstrap --variant=minbase \
	    --include=python3,python3-pip,python-is-python3,ca-certificates bookworm $(IMAGE_ROOT) http://deb.debian.org/debian && \
	  rm -rf $(IMAGE_ROOT)/var/lib/apt/lists/* $(IMAGE_ROOT)/var/cache/apt/*.bin && \
	  tar -C $(IMAGE_ROOT) -cf $(IMAGE_ROOT).tar . && ctr=$$(buildah from scratch) && \
	  buildah add -q $$ctr $(IMAGE_ROOT).tar / && buildah commit -q $$ctr localhost/jetwatch-base:bookworm && \
	  buildah rm $$ctr >/dev/null && rm -rf $(IMAGE_ROOT) $(IMAGE_ROOT).tar; fi
	$(IMAGE_BUILD) --target collector -t jetwatch-collector .
	$(IMAGE_BUILD) --target pipeline -t jetwatch-pipeline .
	@buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E 'jetwatch-(base|collector|pipeline)'

# ruff over the whole tree; mypy over the package as installed (.ci/typed-tree lays out `jetwatch/`
# from the folders pyproject.toml maps, which mypy cannot find through the editable install). Both
# keep their caches in the venv, not in the source tree.
lint: $(STAMP)
	@ruff=0; types=0; \
	RUFF_CACHE_DIR=$(VENV)/ruff_cache $(VENV)/bin/ruff check . || ruff=$$?; \
	$(PY) .ci/typed-tree $(VENV)/typed && (cd $(VENV)/typed && $(abspath $(VENV))/bin/mypy --config-file $(CURDIR)/pyproject.toml) || types=$$?; \
	if [ $$ruff -ne 0 ] || [ $$types -ne 0 ]; then echo "make lint: FAILED (ruff exit $$ruff, mypy exit $$types)"; exit 1; fi

# Lint runs beside the parallel lane (its output kept until the lane ends); first the window pass is
# compiled into NUMBA_CACHE_DIR once (else the first processes to judge, four workers and the
# collectors they start, each compile it at once: ten seconds of CPU each; a failure here shows
# again in every test that judges). Then two lanes, as datasette runs
# its suite: first every test that can share the machine, on four pytest-xdist workers (tests in
# one xdist_group, which share a session fixture, on one worker). Many of its tests wait on the
# wall clock (a collector's cycles, a server's timers), not on a core: on two cores, four workers
# finish it sooner than one per core (`-n auto`), for the same CPU. Then the tests marked
# `serial`, away from the parallel lane's Spark, Chromium and Streamlit. They wait on the wall clock
# and use little CPU, so they run beside each other, one worker each: the incident library, the
# loss projection, the three-node cluster's tests one after another (xdist_group "three_nodes"),
# and the cluster failures, each on a cluster of its own. Lint and both lanes always run;
# the target fails if any failed (pytest's "no tests ran", exit 5, too). Nothing here writes to
# the source tree.
test: $(STAMP) system-deps deploy-deps
	@lint=0; parallel=0; serial=0; \
	$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & linting=$$!; \
	$(PY) -c "from jetwatch.health.window_pass import compile_now; compile_now()" || true; \
	$(PY) -m pytest -n 4 --dist loadgroup -m "not serial and not heavy" || parallel=$$?; \
	wait $$linting || lint=$$?; cat $(VENV)/lint.log; \
	if [ $$lint -ne 0 ]; then echo "make test: lint failed (exit $$lint)"; fi; \
	if [ $$parallel -ne 0 ]; then echo "make test: the parallel lane failed (exit $$parallel); the serial lane runs all the same"; fi; \
	$(PY) -m pytest -n 4 --dist loadgroup -m "serial and not heavy" || serial=$$?; \
	if [ $$lint -ne 0 ] || [ $$parallel -ne 0 ] || [ $$serial -ne 0 ]; then \
	  echo "make test: FAILED (lint exit $$lint, parallel lane exit $$parallel, serial lane exit $$serial)"; exit 1; fi

# Checks that are not tests of jetwatch and take minutes: the pipeline on a standalone Spark master,
# smoke runs of every bench, the screenshot-only browser runs (without writing them).
test-heavy: $(STAMP) system-deps
	$(PY) -m pytest -m heavy

# The three-node cluster's tests with each incident held named for 5 minutes (`make test` holds
# 30 s): tens of minutes of wall clock, little CPU. The window pass is compiled first, as for `make test`.
test-cluster: $(STAMP) system-deps
	$(PY) -c "from jetwatch.health.window_pass import compile_now; compile_now()" || true
	$(PY) -m pytest -n 4 --dist loadgroup -m cluster --cluster-hold 300 --timeout 1200

# The docs' screenshots (README.md, docs/pages.md), rewritten in docs/screenshots/ from the live pages.
screenshots: $(STAMP) system-deps
	$(PY) -m pytest -n auto --dist loadgroup -m screenshots --screenshots

# New generated examples for every property-based test (`make test` replays the same ones each run);
# failures are kept in .hypothesis/ to replay.
fuzz: $(STAMP) system-deps
	$(PY) -m pytest -n auto --dist loadgroup -m "hypothesis and not heavy" --hypothesis-profile=explore

# Every bench in turn, at its defaults; docs/benchmarks.md is then replaced with what they printed.
bench: $(STAMP) system-deps
	$(PY) -m bench.run_all

# The verdicts as a detector: time to name each incident, false alarms over 30 minutes of look-alikes.
bench-detector: $(STAMP)
	$(PY) -m bench.detector --minutes 30

# The same on a real server: the incident library, its look-alikes running 30 minutes beside it.
bench-incidents: $(STAMP)
	$(PY) -m bench.incidents --minutes 30

# The cluster incidents' time to be named (the suite's cluster tests, timed) and the look-alikes' outcomes.
bench-cluster: $(STAMP) system-deps
	$(PY) -m bench.cluster_incidents
