/* cmd-tune.c: `clbound tune`: runs CLBlast's GEMM tuners (Debian's
 * clblast-utils) on one device within a time budget and stores the best
 * parameters in the device's tuning file next to the program cache
 * (clbound/tuning.h, docs/gemm.md). Also the device lookup `clbound info` uses
 * to say whether a device is tuned. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/args.h"
#include "bench/timing.h"
#include "clbound/clbound.h"
#include "commands.h"

/* The tuners of the kernels CLBlast's GEMM runs: the indirect Xgemm with the
 * copy, pad and transpose kernels that prepare its operands, and XgemmDirect
 * (small sizes). `configs` is how many configurations CLBlast 1.5.3's tuner
 * lists in all its phases (for Xgemm mostly its random phase of 120800): it
 * only sets -fraction so that the random sample is about what the time share
 * can measure; the share's deadline is what bounds the time. */
typedef struct tuner {
  const char *program, *kernel;
  double weight;        /* share of a precision's budget */
  double configs;       /* configurations the tuner lists */
  double seconds_each;  /* about one configuration at the tuning size (compile + runs) on PoCL */
} tuner;

static const tuner tuners[] = {
    {"clblast_tuner_xgemm", "Xgemm", 0.56, 122000, 0.8},
    {"clblast_tuner_xgemm_direct", "XgemmDirect", 0.24, 8466, 0.6},
    {"clblast_tuner_copy_fast", "Copy", 0.05, 144, 0.3},
    {"clblast_tuner_copy_pad", "Pad", 0.05, 144, 0.3},
    {"clblast_tuner_transpose_fast", "Transpose", 0.05, 144, 0.3},
    {"clblast_tuner_transpose_pad", "Padtranspose", 0.05, 144, 0.3},
};
#define NTUNERS (int)(sizeof tuners / sizeof tuners[0])

cl_device_id clb_tool_device_id(int flat, int *platform_index, int *device_index) {
  cl_platform_id plats[16];
  cl_uint np = 0;
  if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return NULL;
  for (cl_uint i = 0; i < np && i < 16; i++) {
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS) nd = 0;
    for (cl_uint j = 0; j < nd && j < 64; j++, flat--)
      if (flat == 0) {
        if (platform_index) *platform_index = (int)i;
        if (device_index) *device_index = (int)j;
        return devs[j];
      }
  }
  return NULL;
}

/* The tuners' -platform and -device of dev: indices in clGetPlatformIDs and
 * clGetDeviceIDs(CL_DEVICE_TYPE_ALL) order. */
static int tuner_indices(cl_device_id dev, int *pi, int *di) {
  for (int flat = 0;; flat++) {
    cl_device_id d = clb_tool_device_id(flat, pi, di);
    if (!d) return -1;
    if (d == dev) return 0;
  }
}

typedef struct outbuf {
  char *p;
  size_t n, cap;
} outbuf;

static int append(outbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t nc = (b->cap ? b->cap * 2 : 1 << 16) + n;
    char *np = realloc(b->p, nc);
    if (!np) return -1;
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
  return 0;
}

/* Runs one tuner until it ends or `seconds` pass (then it is stopped: what it
 * printed so far still counts). Its output goes to out; it runs in `dir`,
 * where it leaves its JSON files. 0, or -1 when it could not be started. */
static int run_tuner(const char *program, char *const args[], const char *dir, double seconds, outbuf *out,
                     const char *label, int quiet, int *stopped) {
  int fds[2];
  *stopped = 0;
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (chdir(dir) != 0) _exit(126);
    /* line-buffered, so that a tuner stopped at its deadline has printed its rows */
    char *argv[40];
    int n = 0;
    argv[n++] = "stdbuf";
    argv[n++] = "-oL";
    argv[n++] = (char *)program;
    for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
    argv[n] = NULL;
    execvp("stdbuf", argv);
    execvp(program, argv + 2);
    _exit(127);
  }
  close(fds[1]);
  double t0 = clb_tool_now_ms(), next_line = t0 + 10000.0;
  char buf[65536];
  for (;;) {
    double now = clb_tool_now_ms(), left = seconds * 1000.0 - (now - t0);
    if (left <= 0) {
      kill(pid, SIGTERM);
      *stopped = 1;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    int r = poll(&p, 1, left > 1000 ? 1000 : (int)left + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r > 0) {
      ssize_t k = read(fds[0], buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break; /* the tuner ended */
      if (append(out, buf, (size_t)k) != 0) {
        kill(pid, SIGTERM);
        *stopped = 1;
        break;
      }
    }
    if (!quiet && clb_tool_now_ms() >= next_line) {
      int matched = 0;
      for (const char *q = out->p ? strstr(out->p, "results match") : NULL; q; q = strstr(q + 1, "results match"))
        matched++;
      fprintf(stderr, "tune: %-20s %3d configurations measured, %.0f of %.0f s\n", label, matched,
              (clb_tool_now_ms() - t0) / 1000.0, seconds);
      next_line = clb_tool_now_ms() + 10000.0;
    }
  }
  close(fds[0]);
  int status = 0;
  /* a stopped tuner gets 5 s to go after SIGTERM, then SIGKILL */
  for (double until = clb_tool_now_ms() + 5000.0;;) {
    pid_t w = waitpid(pid, &status, *stopped ? WNOHANG : 0);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0 && clb_tool_now_ms() > until) {
      kill(pid, SIGKILL);
      *stopped = 2;
    }
    if (w == 0) nanosleep(&(struct timespec){0, 50000000L}, NULL);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return -1;
  return 0;
}

static int usage(FILE *f) {
  fprintf(f, "usage: clbound tune [--platform P] [--device D] [--budget SECONDS] [--size N | --shape MxNxK] [--no-f64]\n"
                  "                    [--quiet]\n"
                  "  runs CLBlast's GEMM tuners (clblast-utils) for SECONDS in all (default 300) at N x N x N\n"
                  "  (default 512), or at the GEMM shape MxNxK (each 64 to 8192), and stores the best\n"
                  "  parameters next to the program cache\n");
  return clb_arg_usage_rc(f);
}

int clb_cmd_tune(int argc, char **argv) {
  const char *cmd = "clbound tune";
  clb_context_options o;
  clb_context_options_init(&o);
  int budget = 300, size = 512, no_f64 = 0, quiet = 0;
  int dims[3] = {0, 0, 0}; /* --shape: M, N, K */
  if (clb_arg_help(argc, argv)) return usage(stdout);
  for (int i = 0; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--platform") == 0 || strcmp(argv[i], "--device") == 0) {
      if (!(v = clb_arg_value(cmd, argc, argv, &i))) return CLB_ARG_BAD;
      if (argv[i - 1][2] == 'p') o.platform = v;
      else o.device = v;
    } else if (strcmp(argv[i], "--budget") == 0) {
      if (!(v = clb_arg_value(cmd, argc, argv, &i)) || clb_arg_int(cmd, "--budget", v, 10, 86400, &budget)) return CLB_ARG_BAD;
    } else if (strcmp(argv[i], "--size") == 0) {
      if (!(v = clb_arg_value(cmd, argc, argv, &i)) || clb_arg_int(cmd, "--size", v, 64, 4096, &size)) return CLB_ARG_BAD;
    } else if (strcmp(argv[i], "--shape") == 0) {
      if (!(v = clb_arg_value(cmd, argc, argv, &i))) return CLB_ARG_BAD;
      int used = 0;
      if (sscanf(v, "%dx%dx%d%n", &dims[0], &dims[1], &dims[2], &used) != 3 || v[used] != 0 || dims[0] < 64 ||
          dims[0] > 8192 || dims[1] < 64 || dims[1] > 8192 || dims[2] < 64 || dims[2] > 8192) {
        fprintf(stderr, "%s: --shape %s: want MxNxK, each from 64 to 8192 (the wide-mlp GEMM: 4096x512x256)\n", cmd,
                v);
        return CLB_ARG_BAD;
      }
    } else if (strcmp(argv[i], "--no-f64") == 0) {
      no_f64 = 1;
    } else if (strcmp(argv[i], "--quiet") == 0) {
      quiet = 1;
    } else {
      return usage(stderr);
    }
  }
  clb_context_t ctx = NULL;
  if (clb_context_new(&o, &ctx) != CLB_OK) {
    fprintf(stderr, "%s: %s\n", cmd, clb_last_errmsg());
    return 1;
  }
  cl_device_id dev = clb_context_cl_device(ctx);
  char name[256] = "", path[1200];
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  name[sizeof name - 1] = 0;
  int pi = 0, di = 0, rc = 1;
  cl_device_fp_config fp = 0;
  int f64 = !no_f64 && clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS && fp;
  const char *dir = clb_context_cache_dir(ctx);
  char tmpl[1100];
  const char *tmp = getenv("TMPDIR");
  snprintf(tmpl, sizeof tmpl, "%s/clbound-tune.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (tuner_indices(dev, &pi, &di) != 0) {
    fprintf(stderr, "%s: the context's device is not in clGetPlatformIDs/clGetDeviceIDs order\n", cmd);
    goto done;
  }
  if (!dir || clb_tuning_path(dev, dir, path, sizeof path) != CLB_OK) {
    fprintf(stderr, "%s: the program cache is off (CLBOUND_CACHE_DIR), and the tuning file lives next to it\n", cmd);
    goto done;
  }
  if (!mkdtemp(tmpl)) {
    fprintf(stderr, "%s: cannot make a temporary folder %s: %s\n", cmd, tmpl, strerror(errno));
    goto done;
  }
  if (!dims[0]) dims[0] = dims[1] = dims[2] = size;
  printf("tuning %s (platform %d, device %d) for %d s at %d x %d x %d, %s\n", name, pi, di, budget, dims[0], dims[1],
         dims[2], f64 ? "f32 then f64" : "f32");
  fflush(stdout);
  clb_tuning_entry got[CLB_TUNING_MAX_ENTRIES];
  int ngot = 0;
  double t_start = clb_tool_now_ms();
  int precisions[2] = {32, 64}, np = f64 ? 2 : 1;
  double pweight[2] = {f64 ? 0.75 : 1.0, 0.25};
  double weight_left = 0;
  for (int p = 0; p < np; p++)
    for (int t = 0; t < NTUNERS; t++) weight_left += pweight[p] * tuners[t].weight;
  for (int p = 0; p < np; p++) {
    for (int t = 0; t < NTUNERS; t++) {
      const tuner *tu = &tuners[t];
      double w = pweight[p] * tu->weight;
      double left = budget - (clb_tool_now_ms() - t_start) / 1000.0;
      double share = left * w / weight_left;
      weight_left -= w;
      char label[48];
      snprintf(label, sizeof label, "%s f%d", tu->kernel, precisions[p]);
      if (share < 3) {
        printf("  %-18s skipped: %.1f s of the budget left for it\n", label, share);
        continue;
      }
      /* -fraction F makes the tuner measure a random 1/F of its configurations */
      double can = share / tu->seconds_each, fraction = tu->configs / (can > 1 ? can : 1);
      if (fraction < 1) fraction = 1;
      char a_pl[16], a_dev[16], a_prec[16], a_m[16], a_n[16], a_k[16], a_frac[32];
      snprintf(a_pl, sizeof a_pl, "%d", pi);
      snprintf(a_dev, sizeof a_dev, "%d", di);
      snprintf(a_prec, sizeof a_prec, "%d", precisions[p]);
      snprintf(a_m, sizeof a_m, "%d", dims[0]);
      snprintf(a_n, sizeof a_n, "%d", dims[1]);
      snprintf(a_k, sizeof a_k, "%d", dims[2]);
      snprintf(a_frac, sizeof a_frac, "%.2f", fraction);
      char *args[] = {"-platform", a_pl, "-device", a_dev, "-precision", a_prec, "-m", a_m, "-n", a_n,
                      "-k", a_k, "-fraction", a_frac, "-runs", "2", NULL};
      if (strcmp(tu->kernel, "Xgemm") != 0 && strcmp(tu->kernel, "XgemmDirect") != 0) args[10] = NULL; /* no -k */
      if (!quiet) fprintf(stderr, "tune: %-20s up to %.0f s (-fraction %s)\n", label, share, a_frac);
      outbuf out = {0};
      int stopped = 0;
      double t0 = clb_tool_now_ms();
      if (run_tuner(tu->program, args, tmpl, share, &out, label, quiet, &stopped) != 0) {
        fprintf(stderr, "%s: cannot run %s: install Debian's clblast-utils (scripts/setup.sh does)\n", cmd, tu->program);
        free(out.p);
        goto cleanup;
      }
      clb_tuning_entry e;
      if (out.p && clb_tuning_parse(out.p, out.n, tu->kernel, precisions[p], &e) == CLB_OK) {
        printf("  %-18s %4d measured in %5.1f s%s, best %8.3f ms (%.1f %s)\n", label, e.measured,
               (clb_tool_now_ms() - t0) / 1000.0, stopped ? " (stopped at its share)" : "", e.time_ms, e.gflops,
               t < 2 ? "GFLOP/s" : "GB/s");
        got[ngot++] = e;
      } else {
        printf("  %-18s nothing measured in %.1f s%s: CLBlast keeps its parameters for it\n", label,
               (clb_tool_now_ms() - t0) / 1000.0, stopped ? " (stopped at its share)" : "");
      }
      fflush(stdout);
      free(out.p);
    }
  }
  /* kernels tuned before and not now are kept from a valid file for this device */
  clb_tuning_entry old[CLB_TUNING_MAX_ENTRIES];
  int nold = 0;
  char why[400];
  if (clb_tuning_load(dev, path, old, CLB_TUNING_MAX_ENTRIES, &nold, why, sizeof why) == CLB_TUNING_OK)
    for (int i = 0; i < nold && ngot < CLB_TUNING_MAX_ENTRIES; i++) {
      int dup = 0;
      for (int j = 0; j < ngot; j++)
        dup |= strcmp(got[j].kernel, old[i].kernel) == 0 && got[j].precision == old[i].precision;
      if (!dup) got[ngot++] = old[i];
    }
  if (ngot == 0) {
    fprintf(stderr, "%s: no tuner measured anything; nothing written\n", cmd);
    goto cleanup;
  }
  if (clb_tuning_save(dev, path, got, ngot) != CLB_OK) {
    fprintf(stderr, "%s: %s\n", cmd, clb_last_errmsg());
    goto cleanup;
  }
  printf("wrote %d kernel(s) to %s in %.0f s; contexts on this device apply them before their first CLBlast call\n",
         ngot, path, (clb_tool_now_ms() - t_start) / 1000.0);
  rc = 0;
cleanup: {
  /* the tuners' own JSON files (clblast_*.json), then the folder */
  DIR *d = opendir(tmpl);
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "clblast_", 8) != 0) continue;
    char rm[1400];
    snprintf(rm, sizeof rm, "%s/%s", tmpl, de->d_name);
    unlink(rm);
  }
  if (d) closedir(d);
  if (rmdir(tmpl) != 0) fprintf(stderr, "%s: left the tuners' files in %s\n", cmd, tmpl);
}
done:
  clb_context_free(ctx);
  return rc;
}
