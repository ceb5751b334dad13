# The two commands a user needs: `make loadtest` and `make test`. Both install what they need.
SFU ?= janus
ROOMS ?= 1
ARGS ?=
PY := .venv/bin/python

.PHONY: deps media loadtest report compare test test-go bench lab-clean help

help:
	@echo "make loadtest [SFU=janus] [ROOMS=1] [ARGS='--media paper ...']   run a ramp, write runs/<stamp>-<sfu>/"
	@echo "make test                                                         the test suite (what CI runs)"
	@echo "make bench                                                        speed and memory benchmarks"
	@echo "make report RUN=runs/<dir>       make compare RUNS='runs/a runs/b'  rebuild / compare reports"

deps:
	@scripts/deps.sh

media: deps
	@$(PY) -m sfubench.cli media

loadtest: deps
	@$(PY) -m sfubench.cli loadtest --sfu $(SFU) --rooms $(ROOMS) $(ARGS)

report: deps
	@$(PY) -m sfubench.cli report $(RUN)

# pytest exits 5 when it collected no test: that must fail, not pass quietly.
test: deps
	@$(PY) -m pytest -ra $(ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

bench: deps
	@$(PY) bench/quality.py
