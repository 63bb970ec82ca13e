# The README's two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
RUNTIME := $(VENV)/.runtime-stamp
PYX    := $(wildcard _ext/*.pyx)

.PHONY: run test test-clients bench build build-runtime clean

# `make run` installs the runtime dependencies (and Cython, to build the extensions); `make test` adds the
# dev extras (pytest, the SDKs, hypothesis). One line of progress per step; pip's own output only on failure.
# The project's build requirements (setuptools: the venv's own; wheel, Cython) go in first and the editable
# install uses them in place: pip's build isolation made a second environment for the same three packages.
$(RUNTIME): pyproject.toml setup.py
	@echo "vsr-fast: [1/3] creating .venv"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "vsr-fast: [2/3] installing the runtime dependencies"
	@($(PY) -m pip install -q --disable-pip-version-check 'setuptools>=65' wheel 'Cython>=3.1,<4' \
		&& VSR_FAST_SKIP_EXT=1 $(PY) -m pip install -q --disable-pip-version-check --no-build-isolation -e .) \
		> $(VENV)/pip.log 2>&1 || (cat $(VENV)/pip.log; exit 1)
	@touch $@

# One extra's packages alone ($(1): dev): `pip install -e '.[dev]'` would build the project (its extensions)
# again.
define install_extra
	@$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['$(1)']))" \
		| xargs $(PY) -m pip install -q --disable-pip-version-check > $(VENV)/pip-$(1).log 2>&1 \
		|| (cat $(VENV)/pip-$(1).log; exit 1)
endef

$(STAMP): $(RUNTIME)
	@echo "vsr-fast: installing the test tools (dev extras), beside the build"
	$(call install_extra,dev)
	@touch $@

# Extensions are rebuilt in place whenever a .pyx changes.
build-runtime: $(RUNTIME) $(PYX)
	@echo "vsr-fast: [3/3] building the extensions"
	@$(PY) setup.py -q build_ext --inplace --parallel 2 > $(VENV)/build.log 2>&1 || (cat $(VENV)/build.log; exit 1)
	@# Bytecode written once: where PYTHONDONTWRITEBYTECODE is set (this sandbox, its CI), every router, mock and
	@# CLI process the suite starts compiled the package's 200 modules again (a third of a process's start).
	@$(PY) -m compileall -q -j 2 vsr_fast bench replay tests > /dev/null
	@# py3langid's model unpacked once: each router with a language rule or vsr-static-11 otherwise spends
	@# ~0.45 s of CPU decompressing its xz file at start (vsr_fast/signals/langid_model.py).
	@$(PY) -m vsr_fast.signals.langid_model

# The dev extras' install and the extensions' build need only the runtime step and not each other: on two cores
# they run at once (pip mostly waits on downloads and unpacking while the compiler runs).
build: $(RUNTIME)
	@$(MAKE) --no-print-directory -j2 $(STAMP) build-runtime

# `make run PORT=9090 MOCK_PORT=9001`: the router and the mock elsewhere than 8080 and 8001; unset, the command is
# as it always was.
run: build-runtime
	$(PY) -m bench.quickstart --config config/quickstart.yaml$(if $(PORT), --port $(PORT))$(if $(MOCK_PORT), --mock-port $(MOCK_PORT))

# Four workers on two cores, each test file on one of them (its module fixtures: routers, mocks, started once):
# a test waiting on a router's start or a deadline leaves its core to another worker.
test: build
	bash tests/ensure_redis.sh
	$(PY) -m pytest -n 4 --dist loadfile

# The real clients (Claude Code, Codex CLI, the openai Node SDK; openai-agents, langchain-openai,
# pydantic-ai, llm) through the router: not part of `make test`, since installing them takes minutes.
# Node clients go to .clients/node_modules, Python ones to their own venv, .clients/venv.
CLIENTS := .clients
$(CLIENTS)/.npm-stamp: tests/clients/package.json
	mkdir -p $(CLIENTS)
	cp tests/clients/package.json $(CLIENTS)/package.json
	cd $(CLIENTS) && npm install --no-audit --no-fund --loglevel=error
	touch $@

$(CLIENTS)/.pip-stamp: tests/clients/requirements.txt
	test -x $(CLIENTS)/venv/bin/python || $(PYTHON) -m venv $(CLIENTS)/venv
	$(CLIENTS)/venv/bin/python -m pip install -q -r tests/clients/requirements.txt
	touch $@

test-clients: build $(CLIENTS)/.npm-stamp $(CLIENTS)/.pip-stamp
	$(PY) -m pytest -o addopts="-q -ra" -p no:cacheprovider tests/clients

bench: build
	$(PY) -m bench.compare

clean:
	rm -rf $(VENV) $(CLIENTS) build *.egg-info _ext/*.c vsr_fast/_ext/*.so vsr_fast/_ext/langid-model.npz*
