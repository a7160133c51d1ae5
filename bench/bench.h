/* bench.h: the benchmarks behind `clbound bench` (tools/ dispatches here). Each
 * takes the arguments after its name and returns the process exit code; every
 * one prints a table, or with --json one JSON object per line (bench/README.md
 * lists the fields). */
#ifndef CLB_BENCH_INTERNAL_H
#define CLB_BENCH_INTERNAL_H

/* `clbound bench <name> ...`: picks the benchmark (ops when no name is given). */
int clb_bench_main(int argc, char **argv);
/* `bench ops`: nonzero, masked_select, masked_scatter against a copy kernel over
 * the same bytes and a host loop (ops.c). */
int clb_bench_ops(int argc, char **argv);
/* `bench gemm`: the matmul strategies against CLBlast at the exact size (gemm.c). */
int clb_bench_gemm(int argc, char **argv);
/* `bench steps`: a wide-mlp training step per policy against batch size (steps.c). */
int clb_bench_steps(int argc, char **argv);
/* `clbound bench whole-step`: bench/whole-step.c */
int clb_bench_whole_step(int argc, char **argv);
/* `clbound bench build-floor`: the OpenCL driver's own start-up, first build and
 * first launch of a one-line kernel (build-floor.c). */
int clb_bench_build_floor(int argc, char **argv);

#endif /* CLB_BENCH_INTERNAL_H */
