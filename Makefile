# Two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs rlstack with PyTorch, trains PPO on CartPole, prints the table
#   make test   creates .venv if needed, installs, runs the test suite (all but the learning matrix)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# constraints.txt pins every package CI installs (torch==2.13.0 CPU build among them).
# TORCH_INDEX: an extra index for torch's wheels. On a Linux machine whose pip would fetch
# the CUDA build (several GB), `make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu`
# gets the CPU build; left empty, pip's own indexes serve torch (the CPU build where they
# carry it, as on the CI machines).
TORCH_INDEX ?=
PIP_INSTALL := $(PY) -m pip install --quiet -c constraints.txt $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))

.PHONY: demo test test-unit test-learning test-compat docs docs-serve bench bench-check soak chaos clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Everything the test suite exercises: every extra and the test tools.
$(VENV)/.installed: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP_INSTALL) -e '.[all,test]'
	touch $@

# What the demo needs: rlstack and PyTorch (no TensorFlow, no optional extras).
$(VENV)/.installed-demo: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP_INSTALL) -e '.[torch]'
	touch $@

$(VENV)/.installed-docs: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP_INSTALL) -e '.[docs]'
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed
	$(PIP_INSTALL) -e '.[all,test,bench,mujoco]'
	touch $@

# Byte-compiled up front: rlstack is installed editable, and where PYTHONDONTWRITEBYTECODE
# is set every process (each Ray worker too) would compile its sources again.
COMPILE := $(PY) -m compileall -q rlstack

demo: $(VENV)/.installed-demo
	$(COMPILE)
	$(VENV)/bin/rlstack train -f tune_configs/cartpole-ppo.yaml

# The documentation site (docs/, mkdocs.yml) into site/; docs-serve previews it with live
# reload on http://127.0.0.1:8000.
docs: $(VENV)/.installed-docs
	$(VENV)/bin/mkdocs build --strict

docs-serve: $(VENV)/.installed-docs
	$(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

# Unit and integration tests, README blocks, notebooks and the learning canaries, two test
# files at a time (a file's module-scoped trainers stay in one worker).
test: $(VENV)/.installed
	$(COMPILE)
	$(PY) -m pytest tests -q -p no:cacheprovider -m "not learning or canary" -n 2 --dist loadfile --durations=30

test-unit: $(VENV)/.installed
	$(COMPILE)
	$(PY) -m pytest tests/unit -q -p no:cacheprovider

# Every tuned example to its bar in both frameworks, and the offline and serving learning
# tests: the synchronous runs two at a time, then the asynchronous ones alone (their result
# per env step depends on their speed). Each part prints its table of runs.
LEARNING := $(PY) -m pytest tests/learning -q -p no:cacheprovider
test-learning: $(VENV)/.installed
	$(COMPILE)
	$(LEARNING) -m "not two_slots" -n 2 --dist loadgroup; first=$$?; \
	$(LEARNING) -m two_slots; second=$$?; \
	test $$first -eq 0 && test $$second -eq 0

# RLlib 1.13's own example scripts (from the ray==1.13.0 wheel, cached in .compat-cache/),
# after `rlstack migrate`, in torch and TF; the table goes to COMPAT.md. They run in a fresh
# virtualenv of rlstack-ray[all], made anew each time, so the table is what a user who
# installs the documented extras gets (nothing left over from the development venv).
COMPAT_VENV := .compat-cache/venv
test-compat:
	rm -rf $(COMPAT_VENV)
	$(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT_VENV)/bin/python -m pip install --quiet -c constraints.txt $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -e '.[all]'
	$(COMPAT_VENV)/bin/python tests/compat/run_examples.py --installed 'rlstack-ray[all]' --write COMPAT.md

# Each script prints one JSON line; BENCHMARKS.md records them with their commands.
bench: $(VENV)/.installed-bench
	$(PY) bench/ppo_cartpole.py --compare --runs 3
	$(PY) bench/sampling.py
	$(PY) bench/learner.py
	$(PY) bench/startup.py
	$(PY) bench/scaling.py
	$(PY) bench/dqn_cartpole.py --runs 3 --with-rllib --max-wall 240
	$(PY) bench/impala_cartpole.py --runs 3 --workers 1,2,4 --max-wall 90
	$(PY) bench/faults.py --iterations 8

# README's headline speed figures, the working tree against commit REF, measured alternately
# (bench/check.py: ~30 minutes at 3 rounds; exits 1 when a figure is worse beyond its spread).
# REF runs from a temporary git worktree with its own venv, kept under .bench-venvs/<sha>.
#   make bench-check REF=main [CHECK_ARGS="--only ppo --rounds 5"]
ifneq ($(filter bench-check,$(MAKECMDGOALS)),)
ifeq ($(strip $(REF)),)
$(error make bench-check needs the commit to compare against: make bench-check REF=main (a sha, branch or tag))
endif
endif
bench-check: $(VENV)/.installed
	$(PY) bench/check.py --ref '$(REF)' $(CHECK_ARGS)

# Hours-long reliability runs (RELIABILITY.md), not part of make test or make bench:
# soak: PPO, IMPALA and ApeX for 1M env steps each, the RSS of every process kind and the
# object store sampled every 10 s; chaos: PPO and IMPALA for 10 minutes each under killed
# workers and failing envs, against a clean run.
soak: $(VENV)/.installed
	$(COMPILE)
	$(PY) bench/soak.py

chaos: $(VENV)/.installed
	$(COMPILE)
	$(PY) bench/chaos.py

clean:
	rm -rf $(VENV) .bench-venvs build site *.egg-info
