# Two entry points: `make run` (the main job on the embedded broker) and `make test`;
# `make docs` builds the documentation site.
# Every target installs what it needs, idempotently: a stamp file records the
# pyproject.toml it was installed from, so a changed dependency list reinstalls.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
HASH   := $(shell sha1sum pyproject.toml setup.py src/kproducer/_speedups.c src/kproducer/network/_sockio.c src/kproducer/record/_compression_worker.c src/kproducer/avro/_avro_encoder.c 2>/dev/null | sha1sum | cut -c1-12)
STAMP  := $(VENV)/.installed-$(HASH)
# The other CPython versions the unit suite also runs on, each in its own venv (.venv312, .venv313),
# found under pyenv's versions or as a working pythonX.Y on PATH (a pyenv shim may not run).
OTHER_PYTHONS ?= 3.12 3.13
PYENV_ROOT    ?= $(HOME)/.pyenv
.PHONY: run run-exactly-once run-stream test test-pythons lint typecheck bench docs install java stunnel codecs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PIP) install -q -e '.[test,dev,demo,docs]'
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
# Then the unit suite (tests/unit only, to keep the added time small) on each other Python of
# OTHER_PYTHONS the machine has, with its C extensions built for it with -Werror.
test: install java stunnel codecs
	$(PY) -m pytest -q
	@echo "pure-Python pass: deselecting tests/integration/spark/test_spark_deploy.py and tests/integration/spark/test_spark_exactly_once.py (Spark deployment and Spark failure scenarios, covered by the native pass)"
	KPRODUCER_PURE_PYTHON=1 $(PY) -m pytest -q --deselect tests/integration/spark/test_spark_deploy.py --deselect tests/integration/spark/test_spark_exactly_once.py
	@$(MAKE) --no-print-directory test-pythons

# Each venv is made and filled once per dependency list (a stamp, as for .venv); `pip install -e`
# builds the extensions in place for that interpreter (next to the other versions' builds).
test-pythons: codecs
	@ran=""; missing=""; \
	for v in $(OTHER_PYTHONS); do \
	  venv=.venv$$(echo $$v | tr -d .); \
	  py=$$(ls -d $(PYENV_ROOT)/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -n 1); \
	  [ -n "$$py" ] || py=$$(command -v python$$v 2>/dev/null); \
	  if [ -z "$$py" ] || ! $$py -c pass 2>/dev/null; then \
	    echo "Python $$v: not on this machine (no python$$v on PATH or under $(PYENV_ROOT)/versions): unit suite not run on it"; \
	    missing="$$missing $$v"; continue; \
	  fi; \
	  if [ ! -f $$venv/.installed-$(HASH) ]; then \
	    echo "Python $$v: preparing $$venv from $$py"; \
	    rm -rf $$venv && $$py -m venv $$venv && $$venv/bin/python -m pip install -q --upgrade pip && \
	    KPRODUCER_REQUIRE_NATIVE=1 KPRODUCER_WERROR=1 $$venv/bin/python -m pip install -q -e '.[unit]' && \
	    touch $$venv/.installed-$(HASH) || exit 1; \
	  fi; \
	  echo "unit suite on $$($$venv/bin/python -V) ($$venv):"; \
	  $$venv/bin/python -m pytest -q -p no:cacheprovider tests/unit || exit 1; \
	  ran="$$ran $$v"; \
	done; \
	echo "unit suite ran on Python$${ran:- (none)}$${missing:+; not run on$$missing (not installed)}"

run: install java codecs
	$(PY) examples/flights_pipeline.py

run-exactly-once: install java
	$(PY) examples/flights_pipeline.py --exactly-once

run-stream: install java
	$(PY) examples/flights_pipeline.py --stream --duration 30

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

# The documentation site (guides and the API reference from the docstrings) into site/;
# --strict fails on a broken link, a page missing from the nav or an unresolvable reference.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

bench: install
	$(PY) benchmarks/compare.py

clean:
	rm -rf $(VENV) .venv312 .venv313 build site src/*.egg-info
