/* commands.h: the subcommands of the clbound tool, one file each (the
 * benchmarks are in bench/bench.h). */
#ifndef CLB_TOOL_COMMANDS_H
#define CLB_TOOL_COMMANDS_H

#include "clbound/clbound.h"

/* Each takes the arguments after its name and returns the process exit code. */
int clb_cmd_cache(int argc, char **argv);
/* `clbound shapes FILE`: the dynamicity report. */
int clb_cmd_shapes(int argc, char **argv);
/* `clbound demo`: MLP training per policy (cmd-demo.c); `--workload chain` runs
 * the bounded-chain showcase (demo-chain.c). */
int clb_cmd_demo(int argc, char **argv);
int clb_cmd_demo_chain(int argc, char **argv);
/* `clbound demo --data-parallel` under mpirun: the program clbound-dist
 * (cmd-dist.c, built with MPI only; tools/clbound.c runs it). */
int clb_cmd_dist_demo(int argc, char **argv);

/* `clbound tune`: CLBlast's GEMM tuners for one device (cmd-tune.c). */
int clb_cmd_tune(int argc, char **argv);
/* The device at flat index `flat` over clGetPlatformIDs and
 * clGetDeviceIDs(CL_DEVICE_TYPE_ALL) (the order of clb_device_info_get), with
 * its platform and in-platform indices; NULL past the last. */
cl_device_id clb_tool_device_id(int flat, int *platform_index, int *device_index);

#endif /* CLB_TOOL_COMMANDS_H */
