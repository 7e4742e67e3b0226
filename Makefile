# sokoforge: every target sets itself up through `install`.
SHELL := /bin/bash
VERSION ?= demo
FROM ?=
EXCLUDE ?=
AGAINST ?=
SEED ?=
JOBS ?= 1

# python3.12, wherever this machine keeps it (PATH, then pyenv).
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && { echo $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
EXAMPLES_STAMP := $(VENV)/.installed-examples
# `make serve` with no VERSION: the demo and a public game, whose play page works at once
SERVED := $(if $(filter command line environment,$(origin VERSION)),$(VERSION),demo public-W)
export NUMBA_CACHE_DIR := $(CURDIR)/.numba_cache

.PHONY: install install-test install-examples chromium postgres nginx test check lint dataset audit rotate serve \
	bench clean-cache

# the project alone (what dataset, audit, rotate and serve need); the tests add their extras
install: $(STAMP)
install-test: $(TEST_STAMP)
# what the README's snippets import beyond the project (Hugging Face datasets, arc-agi)
install-examples: $(EXAMPLES_STAMP)

# Debian's chromium and chromium-driver, for the headless-browser tests (the audit report's
# screenshot, the play page driven through chromium-driver): installed only when either is
# missing (apt-get update once, then install; as root, or through sudo when not root).
chromium:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then as_root=; \
	  elif command -v sudo >/dev/null 2>&1; then as_root="sudo -n"; \
	  else echo "chromium is missing and this is not root: apt-get install -y chromium chromium-driver"; exit 1; fi; \
	  $$as_root apt-get -o DPkg::Lock::Timeout=600 update && \
	  DEBIAN_FRONTEND=noninteractive $$as_root apt-get -o DPkg::Lock::Timeout=600 install -y chromium chromium-driver; }

# Debian's PostgreSQL server, for the store's tests (they start a throw-away cluster): installed
# only when missing, the same way.
postgres:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then as_root=; \
	  elif command -v sudo >/dev/null 2>&1; then as_root="sudo -n"; \
	  else echo "PostgreSQL is missing and this is not root: apt-get install -y postgresql"; exit 1; fi; \
	  $$as_root apt-get -o DPkg::Lock::Timeout=600 update && \
	  DEBIAN_FRONTEND=noninteractive $$as_root apt-get -o DPkg::Lock::Timeout=600 install -y postgresql; }

# Debian's nginx and systemd-analyze, for the tests of deploy/ (the server behind its
# reverse-proxy configuration, its unit verified): installed only when missing, the same way.
nginx:
	@{ command -v nginx || test -x /usr/sbin/nginx; } >/dev/null 2>&1 && \
	  command -v systemd-analyze >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then as_root=; \
	  elif command -v sudo >/dev/null 2>&1; then as_root="sudo -n"; \
	  else echo "nginx or systemd-analyze is missing and this is not root: apt-get install -y nginx-light systemd"; exit 1; fi; \
	  $$as_root apt-get -o DPkg::Lock::Timeout=600 update && \
	  DEBIAN_FRONTEND=noninteractive $$as_root apt-get -o DPkg::Lock::Timeout=600 install -y \
	    nginx-light systemd; }

$(STAMP): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "python3.12 not found: install it or set PYTHON312=/path/to/python3.12"; exit 1; }
	$(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

$(EXAMPLES_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[examples]'
	touch $(EXAMPLES_STAMP)

# pytest on one worker per core (pytest-xdist), each handed a whole module at a time (its
# module fixtures built once), in the order tests/conftest.py gives (the longest modules
# first, by tests/durations.json; --no-loadscope-reorder keeps xdist from sorting by test
# count instead);
# here rather than in pyproject's addopts, so that a plain `pytest tests/test_x.py` runs in
# one process, and in a venv without pytest-xdist at all.
PARALLEL := -n auto --dist loadfile --no-loadscope-reorder

# The tests need Debian's chromium, PostgreSQL and nginx too; the other targets need the venv
# alone.
test: install-test chromium postgres nginx
	$(PY) -m engine.warmup
	$(PY) -m pytest -q $(PARALLEL)

# The edit-test loop: ruff, then every test not marked slow (under a minute).
check: install-test chromium postgres nginx
	$(VENV)/bin/ruff check engine pipeline serve sokoforge sokoforge_gym tests benchmarks scripts
	$(PY) -m engine.warmup
	$(PY) -m pytest -q $(PARALLEL) -m "not slow"

# ruff on everything; mypy on the packages (pyproject's [tool.mypy]: untyped bodies checked too).
lint: install-test
	$(VENV)/bin/ruff check engine pipeline serve sokoforge sokoforge_gym tests benchmarks scripts
	$(VENV)/bin/mypy

dataset: install
	$(VENV)/bin/sokoforge build $(VERSION) --jobs $(JOBS) $(if $(SEED),--seed $(SEED),)
	$(VENV)/bin/sokoforge panel $(VERSION) --jobs $(JOBS)

audit: install
	$(VENV)/bin/sokoforge audit $(VERSION) $(if $(AGAINST),--against $(AGAINST),)

rotate: install
	@test -n "$(FROM)" || { echo "usage: make rotate VERSION=NEW FROM=PREV [EXCLUDE=files]"; exit 2; }
	$(VENV)/bin/sokoforge rotate $(VERSION) --from $(FROM) --jobs $(JOBS) $(foreach f,$(EXCLUDE),--exclude $(f))

serve: install
	$(VENV)/bin/sokoforge serve $(SERVED)

bench: install-test
	$(PY) benchmarks/engine.py
	$(PY) benchmarks/render.py
	$(PY) benchmarks/planner.py
	$(PY) benchmarks/build.py
	$(PY) benchmarks/serve.py
	$(PY) benchmarks/serve.py --looks before,arc,shared,themed,themed+noise --sessions 8
	$(PY) benchmarks/arc.py
	$(PY) benchmarks/arc_export.py
	$(PY) benchmarks/trajectories.py
	$(PY) benchmarks/import_grade.py

clean-cache:
	rm -rf .numba_cache
