/* env.h: every CLBOUND_* environment variable, in one table that drives the
 * parser (env.c) and the table in docs/api.md and README.md (generated from it:
 * tests/core/env-doc.c). Adding a variable is one line here. */
#ifndef CLB_CORE_ENV_H
#define CLB_CORE_ENV_H

#include <stdint.h>

/* Kinds, and what `values` holds for each:
 *   BOOL  on/off, 1/0, true/false, yes/no in any case; `values` names extra
 *         words and their value ("auto=-1", "pool=0"), or "";
 *   INT   a decimal integer, the whole string, within "min..max";
 *   POW2  the same, and a power of two;
 *   ENUM  one of the comma-separated names (any case): its position;
 *   LIST  names separated by commas (or ; or spaces) among `values`, each a
 *         bit by position; "all" sets every bit;
 *   TEXT  any text; `values` describes it (only `clb__env_text` reads it).
 * X(ID, KIND, values, default value, default in words, meaning) */
#define CLB_ENV_TABLE(X) \
  X(PLATFORM, TEXT, "a decimal index or a name substring (any case)", 0, "the first platform with a device", "the OpenCL platform of contexts whose options name none (an API argument overrides it)") \
  X(DEVICE, TEXT, "a decimal index or a name substring (any case)", 0, "the first device", "the device of contexts whose options name none (an API argument overrides it)") \
  X(CACHE_DIR, TEXT, "a folder, or `off` (also `0`, `none`)", 0, "`$XDG_CACHE_HOME/clbound`, else `~/.cache/clbound`", "the persistent program cache (`off` turns it off)") \
  X(CACHE_STORE, ENUM, "background,release,sync,process", 3, "process", "when built programs are written to the cache: `process` (freeing the process's last context hands them to a store helper process that outlives it; other contexts' are written by a thread meanwhile), `background` (a thread of the process; freeing the last context waits for it), `release` or `sync` (in `clb_context_free`)") \
  X(COLD_BUILD, ENUM, "optimized,fast", 1, "fast", "how a program is built from source on a CPU device when the store helper will store it (`CLBOUND_CACHE_STORE=process`): `fast` compiles without LLVM's optimizations (`-cl-opt-disable`: a cold xla-mlp process 1.4x shorter) and the store helper builds the optimized program for the next process; a process that has run 0.3 s since such a build (not counting the driver's compiles at first launches) hands it to the helper then and swaps in the optimized program once written (tiered builds; `programs_upgraded`); `optimized` builds optimized at once; elsewhere programs are always optimized") \
  X(KEEP_DRIVER, BOOL, "auto=-1", -1, "auto", "on: the first context on each OpenCL platform also makes a small context of its own there, never released, so the driver stays loaded for the process; auto: on PoCL only, which otherwise frees its compiler when the process's last context is freed (about 0.1 s) and parses it again at the next context's first build (about 0.45 s; `docs/observability.md`, \"The driver kept loaded\"); off: never") \
  X(STORE_HELPER, TEXT, "a path to the `clbound` command", 0, "`../bin/clbound` beside the library's folder", "the store helper of `CLBOUND_CACHE_STORE=process` (`clbound cache store-pending`); where it is missing, programs are stored in the process as with `background`") \
  X(CACHE_MAX_SIZE, TEXT, "bytes as a whole number, optionally followed by K, M or G; 0: no limit", 0, "256M", "the persistent program cache's size limit: past it, the least recently used entries are removed after each store (`clbound cache info` shows it)") \
  X(METRICS_FILE, TEXT, "a file", 0, "none", "the counters of every context the process frees, summed, written as JSON at each context free (`scope`: `process`)") \
  X(LOG, LIST, "recompiles,syncs,builds,cache,gemm,record,device", 0, "none", "one line per event of these categories, with its reason (`all`: every category)") \
  X(GEMM, ENUM, "auto,host-blas,kernel,device,clblast-bound,clblast,sync-exact", 0, "auto", "forces the GEMM strategy of contexts left at AUTO (`device` is `kernel`, `clblast` is `clblast-bound`; `docs/gemm.md`)") \
  X(BLAS_THREADS, INT, "1..64", 0, "by size and load", "host BLAS in the queue: every product cut into n blocks for n threads (default: 12 MFLOP or more is cut into one block per core, run by one thread per block at 32 MFLOP and more, between 12 and 32 by one plus one per core idle over the last 0.1 s; `docs/gemm.md`, Threads)") \
  X(HOST_PTRS, BOOL, "", 1, "on", "off: host BLAS's native kernels map their buffers every call instead of keeping each buffer's host pointer (`docs/gemm.md`), and reads of tensors enqueue their copies and wait for them instead of copying from the buffers after the sync") \
  X(SYNC_SPIN_US, INT, "0..1000000", -1, "auto: 200 on CPU devices while the context's recent syncs waited less, else 0", "a host sync polls the device for up to this many microseconds before the calling thread blocks in the driver; 0: it blocks at once (`docs/design.md`, \"Host syncs\")") \
  X(SYNC_YIELD_MS, INT, "0..60000", -1, "auto: 20 on CPU devices where `CLBOUND_SYNC_SPIN_US` is unset, else 0", "past its polling budget, a host sync goes on checking the device for up to this many milliseconds, yielding the CPU between checks (`sched_yield`), before the calling thread blocks in the driver; 0: it blocks (`docs/design.md`, \"Host syncs\")") \
  X(CLBLAST_TUNING, BOOL, "", 1, "on", "off: CLBlast runs its own parameters, not the device's tuning file written by `clbound tune` (`docs/gemm.md`)") \
  X(SHAPE_LOG, TEXT, "a file", 0, "none", "every shape a graph is fed, appended, for `clbound shapes`") \
  X(PLAN_PROGRAMS, BOOL, "", 1, "on", "off: a program per kernel file and options instead of one per graph plan (for comparisons)") \
  X(FUSE, BOOL, "", 1, "on", "off: graphs run op by op, without generated (fused) kernels (for comparisons)") \
  X(RECORD, BOOL, "auto=-1", -1, "auto", "on: a graph's steps are recorded once into a `cl_khr_command_buffer` and replayed where they can be; auto: the device's default, off on every device so far (read when a graph is made; `docs/design.md`, \"Recorded steps\")") \
  X(MEMORY_PLAN, BOOL, "pool=0", 1, "on", "off (or `pool`): every graph's buffers come from the pool, as eager ops' do, whatever its options say (`docs/graph.md`, \"Memory plan\")") \
  X(MEM_BASE_ALIGN_BITS, POW2, "8..524288", 0, "1024 (128 bytes)", "the memory plan's offsets in its arena aligned to at least this many bits (to test a wider alignment; `docs/graph.md`, \"Memory plan\")") \
  X(GEOMETRY, TEXT, "`gpu` or `cpu`, then `local=N`, `per_cu=N`, `cu=N` (comma-separated, N from 1 to 1048576)", 0, "the device's", "forces a launch geometry on any device, e.g. `gpu,cu=132` (`docs/portability.md`)") \
  X(SELECT_SINGLE, BOOL, "auto=-1", -1, "auto", "on / off: nonzero, masked_select and masked_scatter always / never in one launch (auto: one launch for small masks; `docs/dataops.md`)") \
  X(SELECT_LOOKBACK, BOOL, "auto=-1", -1, "auto", "on / off: nonzero, masked_select and masked_scatter in one pass with decoupled look-back / never (auto: where the device gives forward progress across work-groups and 64-bit atomics, in the GPU kernel style; `docs/dataops.md`)") \
  X(FIRST_LAUNCH_TIMING, BOOL, "auto=-1", -1, "auto", "on: each kernel's first launch at a local size is timed by OpenCL event callbacks (`first_launch_ms`, which the tiered builds of `CLBOUND_COLD_BUILD=fast` subtract); auto: on CPU devices only, where the driver compiles at first launch (PoCL); off: never, and `first_launch_ms` stays 0 (`docs/observability.md`; on an NVIDIA H200 processes with these callbacks hung in the driver, `docs/portability.md`)") \
  X(TEST_SELECT_LOOKBACK, TEXT, "reverse, interleave, agg-only, unstaged, items=4, items=8, items=16, window=1, window=2, window=32, spin=N (0 to 1000000), epochs=N (1 to 4194303), progress, comma-separated", 0, "ticket order", "testing only: the one-pass select's tiles in adversarial orders; `unstaged`: element-by-element loads and stores instead of vectors and staged tiles; `items=N`: N elements per work-item in a tile (default 8); `window=N`: status words a look-back reads at once (default 32); `progress` gives the device the trait forward progress, as on NVIDIA (`docs/portability.md`)") \
  X(TEST_KERNEL_WG_LIMIT, INT, "1..1048576", 0, "none", "testing only: every kernel allows at most N work-items per group, as a GPU driver's `CL_KERNEL_WORK_GROUP_SIZE` can (`docs/portability.md`)") \
  X(TEST_TUNING_UNCHECKED, BOOL, "", 0, "off", "testing only: on applies a CLBlast tuning file's entries without checking them against CLBlast's constraints, so that an entry which fails to build reaches CLBlast (`docs/failure-behaviour.md`)") \
  X(TEST_RECORD, BOOL, "", 1, "on", "testing only: off makes tests/graph/test-record.c run as on a device without `cl_khr_command_buffer`") \
  X(TEST_SMALL, BOOL, "", 0, "off", "testing only: the tests' reduced sizes (the `oclgrind` label sets it)") \
  X(REQUIRE_DEVICE, BOOL, "", 0, "off", "testing only: a missing OpenCL device fails the tests instead of skipping them (as `CI` does)") \
  X(TEST_TORCH, BOOL, "", 0, "off (on where `CI` is set)", "testing only: `make test` installs PyTorch (PyPI's `torch`, about 5 GB) into the Python tests' venv, so that the tests against PyTorch run instead of skipping (`python/README.md`, Tests)") \
  X(LIBRARY, TEXT, "a path", 0, "the package's library, else the build tree's", "Python only: the `libclbound.so` that `import clbound` loads")

typedef enum clb_env_id {
#define CLB_ENV_ID(id, kind, values, def, deftext, meaning) CLB_ENV_##id,
  CLB_ENV_TABLE(CLB_ENV_ID)
#undef CLB_ENV_ID
  CLB_ENV_COUNT
} clb_env_id;

/* The variable's value as its kind reads it (see above), or its default when
 * unset or empty; a value that does not parse warns once per process on stderr,
 * naming the variable, the value and the accepted values, and gives the
 * default. Read again at every call (tests and benchmarks change them). */
int64_t clb__env_int(clb_env_id id);
/* The variable's text when set and not empty, else NULL (no checks). */
const char *clb__env_text(clb_env_id id);
/* The warning of clb__env_int for a value a caller's own parser refused
 * (CLBOUND_GEOMETRY), once per process per variable. */
void clb__env_warn(clb_env_id id, const char *value, const char *fallback);

#endif /* CLB_CORE_ENV_H */
