# Two commands do all of their own set-up on a fresh machine: `make demo` and `make test`.
PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= smoke
TORCH ?= torch==2.13.0
# PyPI's torch wheel for Linux is the CUDA build (gigabytes): without an NVIDIA GPU, torch's CPU index gives the CPU
# build, where that index answers (5 s); a machine that cannot reach it (a mirror, a wheel on disk) installs from its
# configured indexes. `make venv TORCH_INDEX=` installs from the configured indexes only.
CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(shell ! command -v nvidia-smi >/dev/null 2>&1 && $(PYTHON_BOOT) -c "import urllib.request as u; \
	u.urlopen('$(CPU_INDEX)/torch/', timeout=5)" >/dev/null 2>&1 && echo $(CPU_INDEX))

.PHONY: demo test test-trn2-dry book venv clean gpu-check

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	idx="$(TORCH_INDEX)"; $(PY) -m pip install -q "$(TORCH)" $${idx:+--index-url "$$idx"}
	$(PY) -m pip install -q -e ".[dev,notebooks]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (frontier)" >/dev/null
	touch $(STAMP)

# Prepare the cpu profile's corpus (docstrings), train the current best recipe with the cpu profile, print its val_bpb.
demo: $(STAMP)
	$(PY) -m frontier train --recipe best --profile cpu --out build/demo/$$(date +%Y%m%d-%H%M%S)

# The whole test suite, the book's smoke run included (one process: the tests train on both cores, and two
# workers made the book's smoke run twice as slow on 2 cores).
test: $(STAMP)
	$(PY) -m pytest -q --durations=12

# Every chapter executed at trn2-dry on a stand-in Neuron host (tests/test_notebooks_trn2.py): what a Trn2 host would
# hit that needs no hardware to find. Tens of minutes on 2 cores, so not part of `make test`.
test-trn2-dry: $(STAMP)
	$(PY) -m pytest -q --trn2-dry tests/test_notebooks_trn2.py

# Re-run the chapters: `make book PROFILE=cpu` (into build/book/cpu), `make book PROFILE=cpu ARGS=--in-place`,
# `make book PROFILE=trn2 DATA=/path/to/prepared/web-text` (every chapter on that data folder).
book: $(STAMP)
	$(PY) -m frontier book --profile $(PROFILE) $(if $(DATA),--data $(DATA)) $(ARGS)

clean:
	rm -rf build .pytest_cache

# One CUDA GPU, short: prepare the embedded corpus at the gpu profile's vocabulary, benchmark eager against
# compiled, train `compile` for GPU_BUDGET charged seconds, run the bigram + n-gram recipe for a few steps.
# Records and logs land in GPU_OUT. On a machine without this venv: make gpu-check PY=python3 GPU_OUT=/some/dir
GPU_OUT ?= build/gpu
GPU_BUDGET ?= 90
gpu-check:
	mkdir -p $(GPU_OUT)
	PYTHONPATH=. $(PY) -m pytest -q tests/test_cuda.py 2>&1 | tee $(GPU_OUT)/test-cuda.log
	PYTHONPATH=. $(PY) -m frontier prepare --corpus embedded --out $(GPU_OUT)/data-v8192 --vocab-size 8192 2>&1 | tee $(GPU_OUT)/prepare.log
	PYTHONPATH=. $(PY) -m frontier bench baseline compile --profile gpu --device cuda --steps 20 --repeats 3 \
		--data $(GPU_OUT)/data-v8192 2>&1 | tee $(GPU_OUT)/bench.log
	PYTHONPATH=. $(PY) -m frontier train --recipe compile --profile gpu --device cuda --budget $(GPU_BUDGET) \
		--data $(GPU_OUT)/data-v8192 --out $(GPU_OUT)/compile --no-progress 2>&1 | tee $(GPU_OUT)/train-compile.log
	PYTHONPATH=. $(PY) -m frontier train --recipe ngram --profile gpu --device cuda --steps 40 \
		--data $(GPU_OUT)/data-v8192 --out $(GPU_OUT)/ngram --no-progress 2>&1 | tee $(GPU_OUT)/train-ngram.log
