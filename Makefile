# The two commands: `make demo` and `make test`. Each installs what is missing
# (as root; otherwise it says what to install), configures with CMake into build/,
# builds, and runs. `make bench` runs the benchmarks.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# PoCL's kernel cache lives inside the build tree: a fresh clone never shares a
# cache with another build or PoCL version.
export POCL_CACHE_DIR := $(abspath $(BUILD))/pocl-cache

.PHONY: all setup configure build demo test bench clean

all: build

setup:
	@sh scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
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
	$(BUILD)/bin/clbound demo --json | tee $(BENCH_DIR)/demo.jsonl
	python3 bench/plot-bench.py $(BENCH_DIR) docs/img

clean:
	rm -rf $(BUILD)
