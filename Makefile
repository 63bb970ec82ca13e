# The README's two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYX    := $(wildcard _ext/*.pyx)

.PHONY: run test test-clients bench build clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Extensions are rebuilt in place whenever a .pyx changes.
build: $(STAMP) $(PYX)
	$(PY) setup.py -q build_ext --inplace

run: build
	$(PY) -m bench.quickstart --config config/quickstart.yaml

test: build
	bash tests/ensure_redis.sh
	$(PY) -m pytest

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
	rm -rf $(VENV) $(CLIENTS) build *.egg-info _ext/*.c vsr_fast/_ext/*.so
