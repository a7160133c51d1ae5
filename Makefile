# The two commands: `make demo` and `make test`. Each installs what is missing
# (as root; otherwise it says what to install), configures with CMake into build/,
# builds, and runs. `make bench` runs the benchmarks.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# PoCL's kernel cache lives inside the build tree: a fresh clone never shares a
# cache with another build or PoCL version.
export POCL_CACHE_DIR := $(abspath $(BUILD))/pocl-cache

.PHONY: all setup configure build tool demo test bench env-doc clean
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
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) --log-level=WARNING; \
	else \
	  echo "configure: cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) (first time: about 10-30 s)"; \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE); \
	fi

build: configure
	@echo "build: cmake --build $(BUILD) -j $(JOBS) (everything, tests included; from scratch: about 2-4 minutes on 2 cores)"
	@cmake --build $(BUILD) -j $(JOBS)

# The library and the clbound command only: what the demo needs.
tool: configure
	@echo "build: cmake --build $(BUILD) --target clbound_tool (the library and the command; from scratch: about 1 minute on 2 cores)"
	@cmake --build $(BUILD) -j $(JOBS) --target clbound_tool

# The demo prints a line per workload and policy as it starts and its progress
# on stderr; a first run builds every program from source (about a minute on 2
# cores), a second loads them from the disk cache. `clbound demo --full`: every
# policy, 100 steps.
demo: tool
	@mkdir -p $(POCL_CACHE_DIR)
	$(BUILD)/bin/clbound info
	$(BUILD)/bin/clbound demo

test: build
	@mkdir -p $(POCL_CACHE_DIR)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# `make bench`: every benchmark as JSON lines in $(BUILD)/bench/, then the plots
# in docs/img/ (gnuplot). Figures go to docs/benchmarks.md with their commands.
BENCH_DIR := $(BUILD)/bench
bench: build
	@sh scripts/setup.sh gnuplot-nox
	@mkdir -p $(POCL_CACHE_DIR) $(BENCH_DIR)
	$(BUILD)/bin/clbound info
	rm -f $(BENCH_DIR)/ops.jsonl
	for i in 1 2 3; do $(BUILD)/bin/clbound bench ops --json | tee -a $(BENCH_DIR)/ops.jsonl || exit 1; done
	$(BUILD)/bin/clbound bench gemm --json | tee $(BENCH_DIR)/gemm.jsonl
	$(BUILD)/bin/clbound bench steps --json --reps 5 --sizes 64,128,256,512,1024,2048,4096 | tee $(BENCH_DIR)/steps.jsonl
	$(BUILD)/bin/clbound bench whole-step --json | tee $(BENCH_DIR)/whole-step.jsonl
	$(BUILD)/bin/clbound demo --full --json | tee $(BENCH_DIR)/demo.jsonl
	python3 bench/plot-bench.py $(BENCH_DIR) docs/img

# The table of CLBOUND_* variables in docs/api.md and README.md, regenerated
# from runtime/core/env.h (the test core/env-doc fails while they differ).
env-doc: configure
	@cmake --build $(BUILD) -j $(JOBS) --target test-core-env-doc
	$(BUILD)/tests/test-core-env-doc --write docs/api.md README.md

clean:
	rm -rf $(BUILD)
