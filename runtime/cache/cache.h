/* cache.h: runtime/cache, the program cache of a context (each (source, options)
 * built once) and the persistent cache of program binaries on disk. The ops and
 * the graph get their kernels here. */
#ifndef CLB_CACHE_INTERNAL_H
#define CLB_CACHE_INTERNAL_H

#include "runtime/core/core.h"

/* An embedded kernel source (cmake/embed.cmake output). */
typedef struct clb_kernel_src {
  const char *name; /* file name without .cl */
  const char *text;
  size_t len;
} clb_kernel_src;

/* kernels-embedded.c, generated: common.cl and every other kernel file. */
extern const clb_kernel_src clb__kernel_sources[];
extern const size_t clb__kernel_source_count;
const clb_kernel_src *clb__kernel_src_find(const char *name);

/* ---- program-cache.c ------------------------------------------------------ */

/* An embedded kernel file, or a source generated in this context, by name. */
const clb_kernel_src *clb__kernel_src_get(clb_context_t ctx, const char *name);
/* Registers a generated kernel source (common.cl is prepended, as for a kernel
 * file) under a name that clb__kernel_get then takes as `src`; the name must
 * determine the text (e.g. carry its hash). A name already there is kept. */
clb_status clb__kernel_source_add(clb_context_t ctx, const char *name, const char *text);

/* The kernel `kernel` of the program made of common.cl + kernels/<src>.cl built
 * with `options`, building it (counted) the first time. Borrowed: the cache owns
 * it. `op` names the caller in error messages. The context's first call makes its
 * program cache and opens its disk cache. */
clb_status clb__kernel_get(clb_context_t ctx, const char *op, const char *src,
                           const char *options, const char *kernel, cl_kernel *out);
/* clb__kernel_get, and in *wg the most work-items a group of the kernel may have:
 * its CL_KERNEL_WORK_GROUP_SIZE (register pressure can put it below the device's
 * maximum), queried once when the kernel is made and kept with it, lowered to
 * CLBOUND_TEST_KERNEL_WG_LIMIT when that is set. A kernel made allowing fewer
 * than `want` (0: no check) logs the fallback (CLBOUND_LOG=builds). While a
 * plan's walk only collects kernels, *wg is `want` (or the local size). */
clb_status clb__kernel_get_wg(clb_context_t ctx, const char *op, const char *src, const char *options,
                              const char *kernel, size_t want, cl_kernel *out, size_t *wg);
/* A kernel that takes any local size (grid-stride loops): *local is the
 * context's local size, or the largest power of two the kernel allows if lower. */
clb_status clb__kernel_get_local(clb_context_t ctx, const char *op, const char *src, const char *options,
                                 const char *kernel, cl_kernel *out, size_t *local);
/* Kernels whose work-group size is fixed at build time (they declare
 * reqd_work_group_size(LOCAL, 1, 1)): the n kernels `names` of src built with
 * `options` + " -D LOCAL=<size>", the size starting at the context's local size
 * and lowered to a power of two every kernel allows (the program rebuilt, logged)
 * until all of them allow it. *local is the size to launch them with. */
clb_status clb__kernels_get_fixed(clb_context_t ctx, const char *op, const char *src, const char *options, int n,
                                  const char *const names[], cl_kernel out[], size_t *local);

/* ---- disk-cache.c --------------------------------------------------------- */

/* Picks and prepares the cache folder: the option, else the environment, else the
 * default. An unusable folder turns the cache off with one logged warning. */
void clb__disk_cache_init(clb_context_t ctx, const char *option);
/* Tries to load a program for `key` from disk; *out NULL on a miss (a bad entry
 * is logged, removed and counts as a miss). */
void clb__disk_cache_load(clb_context_t ctx, const char *key, cl_program *out);
/* Removes the entry of `key` (its program failed after loading), logging why. */
void clb__disk_cache_drop(clb_context_t ctx, const char *key, const char *why);
/* The name of the empty kernel that every program built for `key` carries, so
 * that a program loaded from disk proves which key it was built for. */
#define CLB_PROGRAM_ID_MAX 48
void clb__program_identity(const char *key, char *buf, size_t cap);
/* Stores a built program's binary under `key` (write to a temporary, rename). */
void clb__disk_cache_store(clb_context_t ctx, const char *key, cl_program prog);
/* The same into the folder `dir`, logging to `lg`: needs no context (the
 * background store calls it after the context is gone). 0 when written. */
int clb__disk_cache_write(const char *dir, const char *key, cl_program prog, const clb__logger *lg);
/* The file of `key` in dir: "<dir>/<32 hex digits of the key's hashes><suffix>",
 * its entry (CLB_ENTRY_SUFFIX) or its store manifest (CLB_MANIFEST_SUFFIX). */
#define CLB_ENTRY_SUFFIX ".clbin"
#define CLB_MANIFEST_SUFFIX ".pending"
void clb__cache_entry_path(const char *dir, const char *key, const char *suffix, char *buf, size_t cap);

/* Counts (remove_entries 0) or removes (1: with stale temporaries) the entries
 * of a cache folder (NULL: the default); clb_cache_info/clear in store-worker.c
 * call it after waiting for the background store. */
clb_status clb__cache_walk(const char *dir, int remove_entries, uint64_t *entries, uint64_t *bytes);

/* ---- store-worker.c: the background store --------------------------------- */

/* Hands a program built from source to the process's store thread, which
 * writes its entry under `key` into `dir` later; the program is retained until
 * then (it keeps its OpenCL context alive, not the clbound context). Takes
 * `key`. Falls back to storing at once when the thread cannot be started. */
void clb__store_enqueue(clb_context_t ctx, char *key, cl_program prog);
/* Waits until no store of `key` into `dir` is queued or under way (a context
 * about to build what another context is still storing waits and loads it). */
void clb__store_wait_key(const char *dir, const char *key);
/* A context's program cache opened / closed (after its programs were handed
 * over): closing the last one waits for the queue, so no store runs at exit. */
void clb__store_cache_opened(void);
void clb__store_cache_closed(void);
/* CLBOUND_CACHE_STORE: where a freed context's programs are stored. */
typedef enum clb__store_mode {
  CLB_STORE_BACKGROUND = 0, /* the store thread; the last context's release waits for it */
  CLB_STORE_RELEASE = 1,    /* in clb_context_free (also `sync`, 2) */
  CLB_STORE_PROCESS = 3     /* as BACKGROUND, but the last context hands the queue to the helper */
} clb__store_mode;
clb__store_mode clb__store_mode_get(void);
/* Whether the context being released is the last with an open program cache. */
int clb__store_cache_last(void);
/* Hands the store thread's queued programs for dir (not the one being written)
 * to the store helper: their manifests written; one that cannot be written goes
 * back to the queue. Returns how many were handed over. */
long clb__store_queue_handoff(const char *dir, const clb__logger *lg);

/* ---- store-helper.c: the store helper process ------------------------------ */

/* A program built from source and not stored yet: its key, then in the same
 * allocation the build options it was built with and its whole source, so that
 * the key reads as a plain string. Freed with free(). */
char *clb__store_record_new(const char *key, const char *options, int ntexts, const char *const *texts,
                            const size_t *lens);
void clb__store_record_parts(const char *rec, const char **options, const char **source);
/* The end of every program key (program-cache.c): the device's name, vendor,
 * versions and platform ("\ndevice ...\nplatform ..."); the store helper finds
 * a manifest's device by it. */
void clb__key_device_part(const clb_device_info *d, char *buf, size_t cap);
/* Writes the record's store manifest into dir (atomically); 0 when written. */
int clb__store_manifest_write(const char *dir, const char *rec, const clb__logger *lg);
/* The store helper to start: CLBOUND_STORE_HELPER, else ../bin/clbound beside
 * the library; 0 when it can be run (buf holds its path either way). */
int clb__store_helper_path(char *buf, size_t cap);
/* Starts the helper for dir and notes dir as handed to; 0 when it started. */
int clb__store_spawn(const char *helper, const char *dir, const clb__logger *lg);
/* The store manifests in dir (a helper removes each after writing its entry, so
 * none means none pending and no helper at work there); drains dir when any. */
uint64_t clb__store_manifests(const char *dir);
void clb__store_drain_pending(const char *dir);
/* The manifests pending in the folders this process handed to; drains them. */
uint64_t clb__store_handed_pending(void);
void clb__store_handed_drain(void);
/* The folder's store lock (flock of <dir>/.store.lock), waited for a bounded
 * time: a descriptor for clb__store_unlock, or -1. */
int clb__store_lock(const char *dir, const clb__logger *lg);
void clb__store_unlock(int fd);
/* 1 while another process (a store helper at work) holds the folder's lock. */
int clb__store_busy(const char *dir);

/* ---- files.c: files in folders others may write ---------------------------- */

/* Reads a whole regular file of at most max_bytes (NUL-terminated past *len):
 * no symbolic link is followed and a FIFO or device never blocks; a name that
 * is not a regular file is refused (and removed when remove_odd and it can
 * be). NULL with *why NULL: simply absent; else *why says what was wrong
 * ("too large" for a file over max_bytes). */
unsigned char *clb__cache_read_file(const char *path, size_t max_bytes, int remove_odd, size_t *len, const char **why);
/* Writes the pieces to path atomically: a temporary file (mode 0600, never
 * through a link) written, synced and renamed over path. 0, or the errno of
 * the failure with *step naming it; the temporary is removed on failure. */
int clb__cache_write_atomic(const char *path, const void *const *parts, const size_t *lens, int nparts,
                            const char **step);

/* Loads or builds one program from a single source text (label names it in the
 * key and messages); a build from source hands back its key in *store_key for
 * a later store. */
clb_status clb__program_from_text(clb_context_t ctx, const char *op, const char *label, const char *text, size_t len,
                                  const char *options, cl_program *out, char **store_key);
/* Adds an entry for (src, options) whose kernels are `kernel` + suffix in p
 * (retained); takes store_key. */
clb_status clb__progcache_insert(clb_context_t ctx, const char *op, const char *src, const char *options, cl_program p,
                                 const char *suffix, char *store_key);

/* The kernels a plan's walk asked for: one section per (kernel file, options). */
#define MAX_SECTION_KERNELS 8

typedef struct collect_section {
  char *src, *options;
  int nk;
  char *kernels[MAX_SECTION_KERNELS];
} collect_section;

struct clb_plan_collect {
  collect_section *s;
  int n, cap;
  int failed; /* out of host memory while noting: merge nothing */
};

/* program-cache.c: notes a request during a walk; frees a collection. */
void clb__plan_collect_note(clb_context_t ctx, const char *src, const char *options, const char *kernel);
void clb__plan_collect_free(struct clb_plan_collect *c);

/* ---- plan-program.c ------------------------------------------------------- */

/* Starts noting the kernels asked for: until clb__plan_collect_end, a kernel
 * the context has no program for comes back NULL and clb__launch launches
 * nothing (a plan's first step is walked once this way). */
clb_status clb__plan_collect_begin(clb_context_t ctx);
/* Stops noting; with build, makes one program of everything noted (`what`
 * names the plan in logs and errors) and points the cache entries at it. */
clb_status clb__plan_collect_end(clb_context_t ctx, const char *what, int build);

/* Makes the context's program cache and opens its disk cache, once; registers
 * their release with the context. */
clb_status clb__cache_open(clb_context_t ctx);

#endif /* CLB_CACHE_INTERNAL_H */
