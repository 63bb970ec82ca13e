# The README's two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYX    := $(wildcard _ext/*.pyx)

.PHONY: run test bench build clean

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

bench: build
	$(PY) -m bench.compare

clean:
	rm -rf $(VENV) build *.egg-info _ext/*.c vsr_fast/_ext/*.so
