# The two commands of the README (demo, test), and the rest. Each sets up .venv first (once).
.PHONY: demo test check lint bench clean constraints docs

STAMP := .venv/.redraft-installed

$(STAMP): pyproject.toml constraints.txt scripts/setup.sh
	bash scripts/setup.sh
	touch $(STAMP)

# Refine 10 generated arithmetic problems with the embedded model on a local Ray.
demo: $(STAMP)
	.venv/bin/redraft run arithmetic --limit 10

test: $(STAMP)
	.venv/bin/python -m pytest -q

# The edit-test loop: the unit tests alone (no Ray, no model, no browser), a few minutes on 2 cores.
check: $(STAMP)
	.venv/bin/python -m pytest -q tests/unit

# The documentation site, into site/; strict: a dead link, a missing anchor or any other warning fails it.
docs: $(STAMP)
	.venv/bin/mkdocs build --strict --site-dir site

lint: $(STAMP)
	.venv/bin/ruff check redraft tests benchmarks
	.venv/bin/ruff format --check redraft tests benchmarks
	.venv/bin/mypy redraft

clean:
	rm -rf .venv runs

# The exact versions of a working .venv, for `make` and CI to install (pyproject.toml keeps the ranges).
constraints: $(STAMP)
	{ sed -n '1,2p' constraints.txt; .venv/bin/pip freeze --exclude redraft | grep -v -e '^-e ' -e '@ file://'; } > constraints.new
	mv constraints.new constraints.txt

bench: $(STAMP)
	.venv/bin/python benchmarks/bench_engine.py
	.venv/bin/python benchmarks/bench_engine_throughput.py
	.venv/bin/python benchmarks/bench_peers.py
	.venv/bin/python benchmarks/bench_http_clients.py
	.venv/bin/python benchmarks/bench_backends.py
	.venv/bin/python benchmarks/bench_prompt_cache.py
	.venv/bin/python benchmarks/bench_local_batching.py
	.venv/bin/python benchmarks/bench_quantization.py
	.venv/bin/python benchmarks/bench_batch.py
	.venv/bin/python benchmarks/bench_adaptive.py
	.venv/bin/python benchmarks/bench_adaptive_concurrency.py
	.venv/bin/python benchmarks/bench_provider_batch.py
	.venv/bin/python benchmarks/bench_estimate.py
	.venv/bin/python benchmarks/bench_sandbox_files.py
	.venv/bin/python benchmarks/bench_plan_steps.py
	.venv/bin/python benchmarks/bench_tune.py
	.venv/bin/python benchmarks/bench_shared_fleet.py
	.venv/bin/python benchmarks/chaos.py
	.venv/bin/python benchmarks/bench_cli_start.py
