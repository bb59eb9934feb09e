# Two commands matter: `make bench` (the main job on the embedded pair) and `make test`.
# Both install what they need first: an optimized BLAS for MLX's CPU backend, then a venv.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install bench test test-fast lint chromium check baseline blas clean

# Debian/Ubuntu: MLX's CPU wheel bundles the reference BLAS; OpenBLAS is ~50x faster and
# specdec preloads it when present. Elsewhere (macOS uses Accelerate) this step does nothing.
blas:
	@if [ -f /etc/debian_version ] && ! ldconfig -p 2>/dev/null | grep -q libopenblas.so.0; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q libopenblas0-pthread; fi

$(BIN)/python:
	$(PY) -m venv $(VENV)

# --no-compile: pip would byte-compile every file of every dependency, half of its time. The
# venv and the harness are compiled after, in parallel: where PYTHONDONTWRITEBYTECODE is set
# (container images often do) Python never keeps what it compiles on import, and every
# process, each engine and command the tests start, compiled scipy and matplotlib again (a
# report took 2.9 s instead of 1.7). Up to date, the compile takes a second. The venv's own pip
# is enough (editable installs need pip 21.3, Python 3.10's has 22).
install: blas $(BIN)/python
	$(BIN)/python -m pip install -q --no-compile -e '.[specdec,test,train]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib harness >/dev/null

bench: install
	$(BIN)/harness run

# Everything CI needs: lint, then every test (the end-to-end ones too). Three workers, one test
# file each at a time, the end-to-end files first (tests/conftest.py orders them; xdist would
# otherwise start the files with most tests first and these last); the tests that read this
# host's CPU load run afterwards, alone, since the others would be load.
test: install lint chromium
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder -m "not host_alone" --durations=20
	$(BIN)/python -m pytest -m host_alone

# The quick loop while editing: every test but the end-to-end ones (e2e).
test-fast: install
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not e2e and not host_alone"
	$(BIN)/python -m pytest -m host_alone

# ruff, the import layering (pyproject.toml [tool.importlinter]: no package imports one above
# it), mypy --strict over harness/ (pyproject.toml [tool.mypy]), the workflow files against
# GitHub's workflow schema (check-jsonschema's vendored copy, no download: actionlint's Python
# wrapper downloads its binary as it installs), no module over 500 lines; then the count of
# string-keyed record accesses, printed.
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_module_size.py
	$(BIN)/python scripts/studies/count_record_keys.py

# The dashboard test drives a real headless browser; install one where none is found.
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
	    && ! command -v google-chrome >/dev/null 2>&1 && [ -f /etc/debian_version ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium; fi

# Each arm's output against its own recorded baseline (record one first with `make baseline`).
check: install
	$(BIN)/harness check harness/suites/default.toml

baseline: install
	$(BIN)/harness baseline record harness/suites/default.toml

clean:
	rm -rf $(VENV) build *.egg-info
