# Two commands on a fresh clone: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
DB ?= scprof.duckdb

.PHONY: demo test install install-test lint proto clean browser perf-tables

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml exporters/_perfetto_wire.c analyzers/_sweep.c profiler/xspace/_events.c profiler/xspace/_planes.c profiler/xspace/_wire.h sim_backend/_highway.c | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml exporters/_perfetto_wire.c analyzers/_sweep.c profiler/xspace/_events.c profiler/xspace/_planes.c profiler/xspace/_wire.h sim_backend/_highway.c | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@ $(STAMP)

install: $(STAMP)
install-test: $(TEST_STAMP)

demo: $(STAMP)
	SCPROF_DB=$(DB) $(PY) -m scprof.demo $(if $(NO_UI),--no-ui,)

# The browser tests drive Debian's chromium (tests/ui/test_browser.py); install it when missing.
browser:
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium) \
		|| echo "warning: could not install chromium (apt-get needs root); the browser tests will fail"

# SCPROF_REQUIRE_TEST_EXTRAS=1: here the tests that need chromium, playwright, xprof or
# grpcio-tools must run (pytest alone skips them when one is missing).
# The browser sweep (tests/ui/test_browser_sweep.py) includes a run of SWEEP_EVENTS events (about 2 min
# at 10 M; SWEEP_EVENTS=0 leaves it out).
SWEEP_EVENTS ?= 10000000
test: $(TEST_STAMP) browser
	$(VENV)/bin/ruff check .
	SCPROF_REQUIRE_TEST_EXTRAS=1 SCPROF_SWEEP_EVENTS=$(SWEEP_EVENTS) $(PY) -m pytest -q

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Regenerate the committed protobuf code (and docs/schema.md, whose events columns follow the
# typed fields) after editing proto/*.proto.
proto: $(TEST_STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=profiler --pyi_out=profiler proto/scprof_trace.proto
	$(PY) -m grpc_tools.protoc -Iproto --python_out=profiler/xspace --pyi_out=profiler/xspace proto/xplane.proto
	$(PY) -m profiler.schema > docs/schema.md

# Regenerate the bundled roofline performance tables (sim_backend/perf_tables/<generation>/).
perf-tables: $(STAMP)
	$(PY) -m sim_backend.perf_tables.generate

clean:
	rm -rf $(VENV) .pytest_cache
