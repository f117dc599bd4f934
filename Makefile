# The two commands of the README: `make demo` and `make test`. Both set up
# everything they need (Debian packages, the virtual environment).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo deps system-deps venv lint bench bench-gate fuzz chaos ansible-fuzz lab-down clean conformance

system-deps:
	@scripts/system-deps.sh

# The product and the simulated fleet (lab/, its own distribution), both editable. Paths are
# relative or quoted: the checkout may live anywhere, spaces included.
$(STAMP): pyproject.toml lab/pyproject.toml setup.py gpuconf/__init__.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip >/dev/null
	$(BIN)/pip install -q -e '.[test]' -e ./lab
	@touch $(STAMP)

# The package's bytecode, compiled here once (incremental: only changed sources): an editable install
# gets none from pip, and an environment with PYTHONDONTWRITEBYTECODE (CI, shells) would otherwise
# compile every module on every run, a third of a small check's CPU. The nodes keep -B (never write there).
venv: $(STAMP)
	@$(BIN)/python -m compileall -q gpuconf

deps: system-deps venv

# ruff over the tree; mypy --strict over the whole product (STRICT) but the remote runner
# (gpuconf/connection/remote/, excluded in pyproject.toml): it is sent to hosts and runs on their
# python3, 3.6 at the oldest, which today's mypy cannot target (3.10 at the least). It is checked
# on its own, for Python 3.6 (its type comments, and the bodies of its functions against 3.6's
# standard library), by the last mypy that targets 3.6, in a virtual environment of its own.
STRICT := gpuconf
REMOTE := gpuconf/connection/remote
REMOTE_MYPY_VENV := tests/.mypy36-venv
REMOTE_MYPY_STAMP := $(REMOTE_MYPY_VENV)/.installed-stamp

$(REMOTE_MYPY_STAMP):
	$(PYTHON) -m venv $(REMOTE_MYPY_VENV)
	$(REMOTE_MYPY_VENV)/bin/pip install -q --upgrade pip >/dev/null
	$(REMOTE_MYPY_VENV)/bin/pip install -q mypy==0.971
	@touch $(REMOTE_MYPY_STAMP)

lint: venv $(REMOTE_MYPY_STAMP)
	$(BIN)/ruff check gpuconf lab tests bench
	$(BIN)/mypy --strict $(STRICT)
	$(REMOTE_MYPY_VENV)/bin/mypy --python-version 3.6 --check-untyped-defs --no-incremental \
		--follow-imports skip $(REMOTE)/*.py

# The differential suite's oracle (tests/ansible_diff): ansible-core in its own virtual environment,
# never a dependency of gpuconf; passlib is what Ansible's password_hash needs.
ANSIBLE_VENV := tests/.ansible-venv
ANSIBLE_STAMP := $(ANSIBLE_VENV)/.installed-stamp

$(ANSIBLE_STAMP):
	$(PYTHON) -m venv $(ANSIBLE_VENV)
	$(ANSIBLE_VENV)/bin/pip install -q --upgrade pip >/dev/null
	$(ANSIBLE_VENV)/bin/pip install -q ansible-core==2.19.14 passlib==1.7.4
	@touch $(ANSIBLE_STAMP)

# The suite in TEST_WORKERS processes (pytest-xdist): the lab tests mostly wait (reboots, Slurm,
# converging a GPU lab) while the unit tests compute, so on 2 cores 4 processes overlap them. Which tests
# share a process (each lab starts once) and the order: tests/parallel.py. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 4
test: deps lint $(ANSIBLE_STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

demo: deps
	@scripts/demo.sh

# ansible-core's integration targets (tests/conformance/README.md), each run by ansible-core and by
# gpuconf behind the same `ansible-playbook`: prints the table and writes it into docs/ansible.md.
# CONFORMANCE_ARGS="--targets tags,handlers" for some of them (then the doc is left alone).
conformance: deps $(ANSIBLE_STAMP)
	$(BIN)/python -m tests.conformance $(if $(CONFORMANCE_ARGS),$(CONFORMANCE_ARGS),--doc)

# The fuzz cases of tests/fuzz at length: prints the cases run and the tracebacks found.
FUZZ_CASES ?= 10000
fuzz: venv
	$(BIN)/python bench/fuzz.py --cases $(FUZZ_CASES)

# Generated programs through ansible-core (the oracle) and gpuconf, compared (tests/ansible_fuzz): prints
# its seed (ANSIBLE_FUZZ_SEED replays a run); each divergence is shrunk into tests/ansible_fuzz/found/.
ANSIBLE_FUZZ_PROGRAMS ?= 2000
ansible-fuzz: venv $(ANSIBLE_STAMP)
	$(BIN)/python -m tests.ansible_fuzz.main --programs $(ANSIBLE_FUZZ_PROGRAMS)

# Generated fault scenarios for remediate on a lab with real Slurm, the five invariants of issue 35
# checked after each (bench/chaos.py): prints its seed; CHAOS_SEED replays a run. Long (minutes a scenario).
CHAOS_SCENARIOS ?= 200
chaos: deps
	CHAOS_SCENARIOS=$(CHAOS_SCENARIOS) CHAOS_SEED=$(CHAOS_SEED) $(BIN)/python bench/chaos.py

# The benchmark (bench/run.py): its peers (ansible-core, pyinfra) and the profiler (yappi) live in their own
# virtual environment, never in the project's. Not part of `make test`. BENCH_ARGS="--counts 1,20".
BENCH_VENV := bench/.venv
BENCH_STAMP := $(BENCH_VENV)/.installed-stamp

$(BENCH_STAMP): bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --upgrade pip >/dev/null
	$(BENCH_VENV)/bin/pip install -q -r bench/requirements.txt
	@touch $(BENCH_STAMP)

bench: deps $(BENCH_STAMP)
	$(BIN)/python bench/run.py --profile $(BENCH_ARGS)

# What `gpuconf gate` (Slurm's Prolog) costs a job: median and p99 on a lab node (bench/gate.py).
bench-gate: deps
	$(BIN)/python bench/gate.py $(BENCH_ARGS)

lab-down: venv
	-$(BIN)/gpuconf lab down --name demo

clean:
	rm -rf $(VENV) $(ANSIBLE_VENV) $(REMOTE_MYPY_VENV) build *.egg-info lab/build lab/*.egg-info .pytest_cache
