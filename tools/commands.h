/* commands.h: the subcommands of the clbound tool, one file each (the
 * benchmarks are in bench/bench.h). */
#ifndef CLB_TOOL_COMMANDS_H
#define CLB_TOOL_COMMANDS_H

/* Each takes the arguments after its name and returns the process exit code. */
int clb_cmd_cache(int argc, char **argv);
/* `clbound shapes FILE`: the dynamicity report. */
int clb_cmd_shapes(int argc, char **argv);
/* `clbound demo`: MLP training per policy (cmd-demo.c); `--workload chain` runs
 * the bounded-chain showcase (demo-chain.c). */
int clb_cmd_demo(int argc, char **argv);
int clb_cmd_demo_chain(int argc, char **argv);
/* `clbound demo --data-parallel` under mpirun (cmd-dist.c; built with MPI only). */
int clb_cmd_dist_demo(int argc, char **argv);

#endif /* CLB_TOOL_COMMANDS_H */
