# The two commands: `make demo` and `make test`. Each installs what is missing
# (as root; otherwise it says what to install), configures with CMake into build/,
# builds, and runs. `make bench` runs the benchmarks.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# PoCL's kernel cache lives inside the build tree: a fresh clone never shares a
# cache with another build or PoCL version.
export POCL_CACHE_DIR := $(abspath $(BUILD))/pocl-cache
# CI (CI=true, as .ci/run sets it) builds with warnings as errors.
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(if $(filter true,$(CI)),-DCLBOUND_WERROR=ON)

.PHONY: all setup configure build tool demo test bench bench-docs doc-figures env-doc clean
# the sub-makes of CMake's build need not announce every directory
MAKEFLAGS += --no-print-directory

all: build

setup:
	@sh scripts/setup.sh

# Every step says what it does and prints as it goes (never quiet for long): a
# first configure shows CMake's checks, a repeated one only warnings and errors;
# the build shows CMake's [NN%] lines.
configure: setup
	@if [ -f $(BUILD)/CMakeCache.txt ]; then \
	  echo "configure: cmake -S . -B $(BUILD) (already configured: warnings and errors only)"; \
	  cmake -S . -B $(BUILD) $(CMAKE_FLAGS) --log-level=WARNING; \
	else \
	  echo "configure: cmake -S . -B $(BUILD) $(CMAKE_FLAGS) (first time: about 10-30 s)"; \
	  cmake -S . -B $(BUILD) $(CMAKE_FLAGS); \
	fi

build: configure
	@echo "build: cmake --build $(BUILD) -j $(JOBS) (everything, tests included; from scratch: about 2-4 minutes on 2 cores)"
	@cmake --build $(BUILD) -j $(JOBS)

# The library and the clbound command only: what the demo needs.
tool: configure
	@echo "build: cmake --build $(BUILD) --target clbound_tool (the library and the command; from scratch: about 1 minute on 2 cores)"
	@cmake --build $(BUILD) -j $(JOBS) --target clbound_tool

# The demo prints a line per workload and policy as it starts and its progress
# on stderr; every policy builds its programs from source (--cache cold, the
# default: about a minute on 2 cores; `clbound demo --cache warm` compares them
# from a filled cache). `clbound demo --full`: every policy, 100 steps.
demo: tool
	@mkdir -p $(POCL_CACHE_DIR)
	$(BUILD)/bin/clbound info
	$(BUILD)/bin/clbound demo

# Tests build optimized at once (cmake/clbound-test.cmake says why); the tests of
# the default tiered builds set CLBOUND_COLD_BUILD=fast themselves.
# Afterwards, nothing of the run's may be left in the temporary folder
# (scripts/tmp-leaks.sh).
test: build
	@mkdir -p $(POCL_CACHE_DIR)
	@sh scripts/tmp-leaks.sh snapshot $(BUILD)/tmp-before-test.txt
	cd $(BUILD) && CLBOUND_COLD_BUILD=$${CLBOUND_COLD_BUILD:-optimized} ctest --output-on-failure -j $(JOBS)
	@sh scripts/tmp-leaks.sh check $(BUILD)/tmp-before-test.txt

# `make bench`: every benchmark as JSON lines in $(BUILD)/bench/, the plots in
# $(BUILD)/bench/img/ (gnuplot; each names the device, the date and the commit),
# and a short text summary. Nothing outside $(BUILD) changes: `make bench-docs`
# copies the plots into docs/img/ when they are to be published. Figures go to
# docs/benchmarks.md with their commands.
BENCH_DIR := $(BUILD)/bench
bench: build
	@sh scripts/setup.sh gnuplot-nox
	@mkdir -p $(POCL_CACHE_DIR) $(BENCH_DIR)
	$(BUILD)/bin/clbound info
	@{ echo "device=$$($(BUILD)/bin/clbound info | sed -n 's/^\[0\] \(.*\) (platform.*/\1/p' | head -n 1)"; \
	   echo "date=$$(date -u +%Y-%m-%d)"; \
	   echo "commit=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD 2>/dev/null || echo ' (modified)')"; \
	 } > $(BENCH_DIR)/meta.txt
	rm -f $(BENCH_DIR)/ops.jsonl
	for i in 1 2 3; do $(BUILD)/bin/clbound bench ops --json | tee -a $(BENCH_DIR)/ops.jsonl || exit 1; done
	$(BUILD)/bin/clbound bench gemm --json | tee $(BENCH_DIR)/gemm.jsonl
	$(BUILD)/bin/clbound bench steps --json --reps 5 --sizes 64,128,256,512,1024,2048,4096 | tee $(BENCH_DIR)/steps.jsonl
	$(BUILD)/bin/clbound bench whole-step --json | tee $(BENCH_DIR)/whole-step.jsonl
	$(BUILD)/bin/clbound demo --full --json | tee $(BENCH_DIR)/demo.jsonl
	python3 bench/plot-bench.py $(BENCH_DIR) $(BENCH_DIR)/img

# The plots of the last `make bench` into docs/img/, to publish them.
bench-docs:
	@ls $(BENCH_DIR)/img/*.svg > /dev/null 2>&1 || { echo "bench-docs: no plots in $(BENCH_DIR)/img: run make bench first"; exit 1; }
	cp $(BENCH_DIR)/img/*.svg docs/img/
	@echo "bench-docs: copied $$(ls $(BENCH_DIR)/img/*.svg | wc -l) plot(s) into docs/img/"

# The deterministic figures (bytes, counts) quoted in README.md and docs/:
# measured again and written in place, with docs/figures.md (run it after a
# change that moves one, then commit; ctest docs/figures checks them).
doc-figures: tool
	@mkdir -p $(POCL_CACHE_DIR)
	python3 scripts/doc-figures.py $(BUILD)

# The table of CLBOUND_* variables in docs/api.md and README.md, regenerated
# from runtime/core/env.h (the test core/env-doc fails while they differ).
env-doc: configure
	@cmake --build $(BUILD) -j $(JOBS) --target test-core-env-doc
	$(BUILD)/tests/test-core-env-doc --write docs/api.md README.md

clean:
	rm -rf $(BUILD)
