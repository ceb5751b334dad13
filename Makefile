# The two commands a user needs: `make loadtest` and `make test`. Both install what they need.
SFU ?= janus
ROOMS ?=
ARGS ?=
PY := .venv/bin/python

CLOUD ?= aws

.PHONY: deps media loadtest study cloud-loadtest report compare trend test test-all test-sfus test-cloud test-e2e bench soak list-sfus help

help:
	@echo "make loadtest [SFU=janus] [ARGS='--preset browsers ...']        the study in miniature against one SFU: runs/<stamp>-<sfu>/"
	@echo "make study [ARGS='--sfus janus,inhouse --repeat 1 --out DIR']     every SFU to its knee, repeated, compared: runs/study/"
	@echo "make cloud-loadtest SFU=janus CLOUD=aws [ARGS='--dry-run ...']    the same on a cloud host and a Kubernetes grid"
	@echo "make test                                                         the test suite every change passes (what CI runs)"
	@echo "make test-all                                                     make test and its three parts below: everything"
	@echo "make test-sfus                                                    every other SFU, codec and layer through the adapter suites"
	@echo "make test-cloud                                                   every other SFU rehearsed on a bare Debian 12 host, the cloud path"
	@echo "make test-e2e                                                     every other fault, network profile and end-to-end run"
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

# The suite's tiers (docs/testing.md, tests/support/tiers.py): `make test` is what every change passes (CI
# runs it); `make test-all` adds the rest, in parts. Each runs in two passes (scripts/pytest.sh): the
# tests that time nothing on every core at once, then the rest one at a time.
TIER_TEST := not full
PART_SFUS := full and sfus
PART_CLOUD := full and cloud
PART_E2E := full and not sfus and not cloud
pytest = scripts/pytest.sh "$(1)" $(ARGS)

# The Go modules' own tests (the in-house SFU: fuzz seeds, leak check, fan-out), then the pytest tier.
# `-short`: the leak check joins and leaves a hundred times here; its thousand are test-e2e's.
# `-parallel 8`: the in-house SFU's slow tests mostly wait on their clients, each beside its own server.
test: deps
	@scripts/deps.sh cloud
	@cd sfu/inhouse && go test -count=1 -short -parallel 8 ./...
	@cd synth && go test -count=1 ./...
	@cd netem && go test -count=1 ./...
	@$(call pytest,$(TIER_TEST))

# Everything: `make test`, then each part of what it leaves out.
test-all: test test-sfus test-cloud test-e2e

# What the adapter suites leave out of `make test`: every other local SFU (Medooze's build takes about
# half an hour on two cores, mediasoup's a few minutes, once, cached by version), codec and layer.
test-sfus: deps
	@$(call pytest,$(PART_SFUS))

# The cloud path's remaining tests: every other local SFU rehearsed on a bare Debian 12 host.
test-cloud: deps
	@scripts/deps.sh cloud
	@$(call pytest,$(PART_CLOUD))

# The rest of the end-to-end modules: every fault, network profile and browser run make test leaves out,
# and what `-short` leaves out of the Go tests.
test-e2e: deps
	@cd sfu/inhouse && go test -count=1 -run 'ThousandTimes' ./internal/sfu
	@$(call pytest,$(PART_E2E))

list-sfus: deps
	@$(PY) -m sfubench.cli list-sfus

bench: deps
	@$(PY) bench/quality.py
	@$(PY) bench/report.py
	@$(PY) bench/clients.py
	@$(PY) bench/forwarding.py --codec h264,vp9,av1
	@$(PY) bench/budget.py
	@$(PY) bench/budget.py --preset broadcast --sfus inhouse
	@$(PY) bench/netem.py

# An hour at a steady load (not in `make bench`: it takes the machine for the hour).
soak: deps
	@$(PY) bench/soak.py $(ARGS)

compare: deps
	@$(PY) -m sfubench.cli compare $(RUNS)

trend: deps
	@$(PY) -m sfubench.cli trend --sfu $(SFU) $(ARGS)
