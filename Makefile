# The two commands of the README: `make run` (broker on 127.0.0.1:9092, data in ./minikafka-data)
# and `make test` (the whole test suite, as CI runs it). Both install what they need first.
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: run test setup setup-test installed bench clean kafka-lab kafka-lab-run spark-jars soak docs

setup:
	scripts/setup.sh

setup-test:
	scripts/setup.sh test

run: setup
	$(VENV)/bin/minikafka serve --config config/server.properties

# minikafka as users install it (scripts/installed.py): an sdist, a wheel built from it, a fresh virtualenv
# with that wheel. `make test` runs every broker process of its minikafka passes from this install.
INSTALLED ?= .venv-installed
installed: setup-test
	$(VENV)/bin/python scripts/installed.py --venv $(INSTALLED)

# The whole suite against minikafka, then the black-box suites again against Apache Kafka (the
# oracle): every semantic test must hold for both. Tests of minikafka internals are deselected there.
# The minikafka passes start every broker (single nodes, clusters, the Docker entrypoint, the CLIs) from the
# wheel installed by `make installed` (MINIKAFKA_EXECUTABLE), not from the editable checkout; a plain
# `pytest` in the checkout runs them from the checkout (the fast inner loop).
# Each pass runs on PYTEST_WORKERS pytest-xdist workers (whole files per worker), then its tests marked
# `serial` (timing- or load-sensitive) alone. PYTEST_WORKERS=0: no xdist (ORACLE_WORKERS: the oracle pass's own). Exit 5 (nothing selected, e.g.
# PYTEST_ARGS names a file without serial tests) is no failure of a pass.
PYTEST_WORKERS ?= 2
ORACLE_WORKERS ?= $(PYTEST_WORKERS)
xdist = $(if $(filter-out 0,$(1)),-n $(1) --dist loadfile,)
PYTEST = $(VENV)/bin/python -m pytest -q
NONE_OK = || [ $$? -eq 5 ]
ORACLE = $(PYTEST) -o cache_dir=.pytest_cache_kafka --broker=kafka
FROM_WHEEL = MINIKAFKA_EXECUTABLE=$(abspath $(INSTALLED))/bin/minikafka
test: setup-test installed kafka-lab spark-jars
	$(FROM_WHEEL) $(PYTEST) -p no:cacheprovider --durations=15 $(call xdist,$(PYTEST_WORKERS)) --serial=exclude $(PYTEST_ARGS) $(NONE_OK)
	$(FROM_WHEEL) $(PYTEST) -p no:cacheprovider --durations=10 --serial=only $(PYTEST_ARGS) $(NONE_OK)
	rc=0; { $(ORACLE) $(call xdist,$(ORACLE_WORKERS)) --serial=exclude tests/integration $(PYTEST_ARGS) $(NONE_OK); } || rc=1; \
	  { $(ORACLE) --serial=only tests/integration $(PYTEST_ARGS) $(NONE_OK); } || rc=1; \
	  [ $$rc -eq 0 ] || { echo "oracle pass: re-running its failed tests once (Apache Kafka updates metadata asynchronously)"; \
	    $(ORACLE) --lf tests/integration $(PYTEST_ARGS); }

# The docs site (mkdocs.yml, docs/) into site/, strictly: a broken link or anchor fails (as in the tests).
docs: setup-test
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Apache Kafka (KRaft, one node) from Maven Central jars, cached in ~/.cache/minikafka: the oracle.
kafka-lab:
	python3 scripts/apache_kafka.py fetch

# Spark's Kafka connector (spark-sql-kafka-0-10 at the pinned pyspark version) + its runtime deps, and
# spark-avro (docs/schema-registry.md's pipeline), cached in ~/.cache/minikafka/spark-kafka-<version>/jars,
# for the Spark pipeline tests (docs/spark.md).
spark-jars:
	python3 scripts/spark_jars.py fetch

kafka-lab-run: kafka-lab
	python3 scripts/apache_kafka.py run --port 9192

# The protocol fuzzer (tests/integration/robustness/test_protocol_fuzz.py) at length, with a random seed: CI runs
# a small fixed-seed budget. MINIKAFKA_FUZZ_EXAMPLES is spread over the API keys the broker serves.
# The hostile-load test (tests/integration/robustness/test_hostile_load.py) runs longer and with more clients.
MINIKAFKA_FUZZ_EXAMPLES ?= 20000
MINIKAFKA_HOSTILE_SECONDS ?= 120
MINIKAFKA_HOSTILE_SCALE ?= 2
# The metadata quorum's Raft simulation (tests/unit/raft/test_quorum_raft.py): more seeds, longer runs.
MINIKAFKA_RAFT_SEEDS ?= 400
MINIKAFKA_RAFT_SIM_MS ?= 120000
# The Jepsen-style cluster run (bench/jepsen.py via tests/integration/cluster/test_cluster_jepsen.py).
MINIKAFKA_JEPSEN_SECONDS ?= 600
soak: setup-test
	MINIKAFKA_FUZZ_EXAMPLES=$(MINIKAFKA_FUZZ_EXAMPLES) MINIKAFKA_HOSTILE_SECONDS=$(MINIKAFKA_HOSTILE_SECONDS) \
	  MINIKAFKA_HOSTILE_SCALE=$(MINIKAFKA_HOSTILE_SCALE) MINIKAFKA_RAFT_SEEDS=$(MINIKAFKA_RAFT_SEEDS) \
	  MINIKAFKA_RAFT_SIM_MS=$(MINIKAFKA_RAFT_SIM_MS) MINIKAFKA_JEPSEN_SECONDS=$(MINIKAFKA_JEPSEN_SECONDS) \
	  $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
	  -o timeout=0 tests/integration/robustness/test_protocol_fuzz.py tests/unit/protocol/test_codec_checks.py \
	  tests/integration/robustness/test_hostile_load.py tests/unit/raft/test_quorum_raft.py \
	  tests/integration/cluster/test_cluster_jepsen.py $(PYTEST_ARGS)

# minikafka vs Apache Kafka (warm, cold, CPU per GB, scaling) into BENCHMARKS.md; run it on a quiet
# machine. BENCH_ARGS passes options, e.g. BENCH_ARGS="--quick" or "--mode warm --no-scaling".
BENCH_ARGS ?=
bench: setup-test kafka-lab
	$(VENV)/bin/pip install -q -e '.[test,bench]'
	$(VENV)/bin/python -m bench.run_all $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(INSTALLED) dist build minikafka-data
