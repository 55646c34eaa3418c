# Two commands do all of their own set-up on a fresh machine: `make demo` and `make test`.
PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= smoke
TORCH ?= torch==2.13.0

.PHONY: demo test book venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev,notebooks]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (frontier)" >/dev/null
	touch $(STAMP)

# Prepare the embedded corpus, train the current best recipe with the cpu profile, print its val_bpb.
demo: $(STAMP)
	$(PY) -m frontier train --recipe best --profile cpu --out runs/demo/$$(date +%Y%m%d-%H%M%S)

# The whole test suite, the book's smoke run included.
test: $(STAMP)
	$(PY) -m pytest -q

# Re-run the chapters: `make book PROFILE=cpu` (into build/book/cpu), `make book PROFILE=cpu ARGS=--in-place`.
book: $(STAMP)
	$(PY) -m frontier book --profile $(PROFILE) $(ARGS)

clean:
	rm -rf build .pytest_cache
