# The two commands a user needs: `make loadtest` and `make test`. Both install what they need.
SFU ?= janus
ROOMS ?=
ARGS ?=
PY := .venv/bin/python

CLOUD ?= aws

.PHONY: deps media loadtest study cloud-loadtest report compare trend test test-sfus test-cloud bench soak list-sfus help

help:
	@echo "make loadtest [SFU=janus] [ARGS='--preset browsers ...']        the study in miniature against one SFU: runs/<stamp>-<sfu>/"
	@echo "make study [ARGS='--sfus janus,inhouse --repeat 1 --out DIR']     every SFU to its knee, repeated, compared: runs/study/"
	@echo "make cloud-loadtest SFU=janus CLOUD=aws [ARGS='--dry-run ...']    the same on a cloud host and a Kubernetes grid"
	@echo "make test                                                         the test suite (what CI runs)"
	@echo "make test-sfus                                                    the adapter conformance suite and synthetic drivers, every local SFU"
	@echo "make test-cloud                                                   the cloud path rehearsed on bare Debian 12 hosts, every local SFU"
	@echo "make list-sfus                                                    the SFU adapters, their versions and profiles"
	@echo "make bench                                                        speed and memory benchmarks"
	@echo "make soak [ARGS='--minutes 60 --rooms 3']                          the study's scenario held an hour: the engine must stay flat"
	@echo "make report RUN=runs/<dir>                                        rebuild a run's report"
	@echo "make compare RUNS='runs/a runs/b'                                 overlay runs of several SFUs"
	@echo "make trend SFU=janus                                              metrics over recorded runs"


deps:
	@scripts/deps.sh

media: deps
	@$(PY) -m sfubench.cli media

loadtest: deps
	@$(PY) -m sfubench.cli loadtest --sfu $(SFU) $(if $(ROOMS),--rooms $(ROOMS)) $(ARGS)

study: deps
	@$(PY) -m sfubench.cli study $(ARGS)

# Terraform and kustomize come from PATH, or are built once from the Go module proxy.
cloud-loadtest: deps
	@$(PY) -m sfubench.cli cloud-loadtest --sfu $(SFU) --cloud $(CLOUD) $(if $(ROOMS),--rooms $(ROOMS)) $(ARGS)

report: deps
	@$(PY) -m sfubench.cli report $(RUN)

# The Go modules' own tests (the in-house SFU: fuzz seeds, leak check, fan-out), then the pytest
# suite; pytest exits 5 when it collected no test: that must fail, not pass quietly.
test: deps
	@scripts/deps.sh cloud
	@cd sfu/inhouse && go test -count=1 ./...
	@cd synth && go test -count=1 ./...
	@cd netem && go test -count=1 ./...
	@$(PY) -m pytest -ra --durations=20 $(ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# Every local adapter through the conformance suite, mediasoup and Medooze included: their builds
# take about half an hour each on two cores, once (cached by version), so `make test` leaves them out.
test-sfus: deps
	@SFUBENCH_CONFORMANCE=all $(PY) -m pytest -ra tests/test_conformance.py tests/test_synthetic.py tests/test_simulcast.py tests/test_codecs.py $(ARGS)

# The cloud path rehearsed on bare Debian hosts for every local SFU (tests/test_cloud_rehearsal.py);
# `make test` rehearses janus, inhouse and livekit.
test-cloud: deps
	@scripts/deps.sh cloud
	@SFUBENCH_REHEARSAL=all $(PY) -m pytest -ra -k rehearsal tests/test_cloud_rehearsal.py $(ARGS)

list-sfus: deps
	@$(PY) -m sfubench.cli list-sfus

bench: deps
	@$(PY) bench/quality.py
	@$(PY) bench/report.py
	@$(PY) bench/clients.py
	@$(PY) bench/forwarding.py
	@$(PY) bench/budget.py
	@$(PY) bench/netem.py

# An hour at a steady load (not in `make bench`: it takes the machine for the hour).
soak: deps
	@$(PY) bench/soak.py $(ARGS)

compare: deps
	@$(PY) -m sfubench.cli compare $(RUNS)

trend: deps
	@$(PY) -m sfubench.cli trend --sfu $(SFU) $(ARGS)
