# Two entry points: `make run` (the main job on the embedded broker) and `make test`.
# Every target installs what it needs, idempotently: a stamp file records the
# pyproject.toml it was installed from, so a changed dependency list reinstalls.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml setup.py src/kproducer/_speedups.c src/kproducer/network/_sockio.c src/kproducer/record/_compression_worker.c src/kproducer/avro/_avro_encoder.c 2>/dev/null | sha1sum | cut -c1-12)
.PHONY: run run-exactly-once run-stream test lint typecheck bench install java stunnel codecs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PIP) install -q -e '.[test,dev,spark]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# Spark needs a JVM; install Debian's OpenJDK 17 only when no java is on PATH.
java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing openjdk-17-jre-headless"; \
	  (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) >/dev/null; }

# The TLS tests terminate TLS in front of the test broker with Debian's stunnel4; install it only
# when no stunnel is on PATH.
stunnel:
	@command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1 || { \
	  echo "stunnel not found: installing stunnel4"; \
	  (apt-get update -qq && apt-get install -y -qq stunnel4) >/dev/null; }

# The compression worker (kproducer.record._compression_worker) opens the system's liblz4 and
# libzstd at run time; Debian has them wherever apt is, this only makes sure.
codecs:
	@{ ldconfig -p | grep -q 'liblz4.so.1 ' && ldconfig -p | grep -q 'libzstd.so.1 '; } || { \
	  echo "liblz4/libzstd not found: installing liblz4-1 libzstd1"; \
	  (apt-get update -qq && apt-get install -y -qq liblz4-1 libzstd1) >/dev/null; }

# The whole suite twice: with the C speedups, then on the pure-Python fallback they must agree with.
# The pure pass skips tests/integration/spark/test_spark_deploy.py and tests/integration/spark/test_spark_exactly_once.py (said so
# below): their jobs run Spark in other processes to check deployment (local-cluster, Spark
# Connect) and the two-phase commit under killed drivers and retried tasks, not the C speedups'
# twin (the transactional send path is tested in both passes by the transactions tests), and
# they are the suite's slowest tests.
test: install java stunnel codecs
	$(PY) -m pytest -q
	@echo "pure-Python pass: deselecting tests/integration/spark/test_spark_deploy.py and tests/integration/spark/test_spark_exactly_once.py (Spark deployment and Spark failure scenarios, covered by the native pass)"
	KPRODUCER_PURE_PYTHON=1 $(PY) -m pytest -q --deselect tests/integration/spark/test_spark_deploy.py --deselect tests/integration/spark/test_spark_exactly_once.py

run: install java codecs
	$(PY) examples/flights_pipeline.py

run-exactly-once: install java
	$(PY) examples/flights_pipeline.py --exactly-once

run-stream: install java
	$(PY) examples/flights_pipeline.py --stream --duration 30

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

bench: install
	$(PY) benchmarks/compare.py

clean:
	rm -rf $(VENV) build src/*.egg-info
