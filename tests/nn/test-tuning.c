/* test-tuning.c: CLBlast tuning files (clbound/tuning.h): a tuner's output
 * parsed into the best configuration, the file written and read back, a
 * damaged, cut-off or foreign file ignored and never applied, and a file for
 * this device applied by a context (CLBlastOverrideParameters succeeds for each
 * kernel) with CLBlast's GEMM still matching a double-precision reference; a
 * forged entry (COPY_DIMX 0) dropped by the checks, or, with them skipped,
 * failing CLBlast's build and put back to CLBlast's own parameters.
 * The tuner outputs are canned (tuner-xgemm.txt, tuner-copy.txt: CLBlast
 * 1.5.3's tuners on PoCL, cut short; row 9 of the Xgemm output is edited to
 * fail its check with the smallest time, row 10 is cut off mid-line). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "cache-test.h" /* log_lines, capture */
#include "clbound/nn.h"
#include "temp-dir.h"

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  REQUIRE_TRUE(f != NULL);
  static char buf[1 << 16];
  *len = fread(buf, 1, sizeof buf - 1, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

static void spit(const char *path, const char *s, size_t n) {
  FILE *f = fopen(path, "wb");
  REQUIRE_TRUE(f != NULL);
  REQUIRE_TRUE(fwrite(s, 1, n, f) == n);
  fclose(f);
}

static char data_dir[1024];

static void parse_canned(clb_tuning_entry *xg, clb_tuning_entry *cp) {
  char path[1200];
  size_t n;
  snprintf(path, sizeof path, "%s/tuner-xgemm.txt", data_dir);
  char *text = slurp(path, &n);
  REQUIRE_TRUE(clb_tuning_parse(text, n, "Xgemm", 32, xg) == CLB_OK);
  /* row 7 is the fastest that matched (43.37 ms); row 9 (10 ms) failed its check */
  static const char *const names[] = {"GEMMK", "MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB",
                                      "KWI",   "VWM", "VWN", "STRM", "STRN", "SA",   "SB",   "KREG"};
  static const long row7[] = {0, 16, 64, 16, 8, 16, 8, 32, 2, 2, 2, 1, 0, 1, 0, 1};
  EXPECT_EQ_S(xg->kernel, "Xgemm");
  EXPECT_EQ_I(xg->precision, 32);
  EXPECT_EQ_I(xg->nparams, 16);
  EXPECT_EQ_I(xg->measured, 8);
  EXPECT_NEAR(xg->time_ms, 43.37);
  EXPECT_NEAR(xg->gflops, 6.2);
  for (int k = 0; k < 16 && k < xg->nparams; k++) {
    EXPECT_EQ_S(xg->names[k], names[k]);
    EXPECT_EQ_I(xg->values[k], row7[k]);
  }
  /* the output cut off before row 7: the best of rows 1..6 (row 1, 59.47 ms) */
  clb_tuning_entry cut;
  const char *r7 = strstr(text, "|    7 |");
  REQUIRE_TRUE(r7 != NULL);
  REQUIRE_TRUE(clb_tuning_parse(text, (size_t)(r7 - text) + 20, "Xgemm", 32, &cut) == CLB_OK);
  EXPECT_NEAR(cut.time_ms, 59.47);
  EXPECT_EQ_I(cut.values[1], 128);
  EXPECT_EQ_I(cut.measured, 6);
  /* no row measured yet: an error, nothing made up */
  const char *r1 = strstr(text, "|    1 |");
  REQUIRE_TRUE(r1 != NULL);
  clb_test_checks++;
  if (clb_tuning_parse(text, (size_t)(r1 - text), "Xgemm", 32, &cut) != CLB_ERR_PARSE)
    CLB_FAIL_AT("output with no measured row parsed");
  clb_test_checks++;
  if (clb_tuning_parse(text, n, "Dgemm", 32, &cut) != CLB_ERR_INVALID_ARG) CLB_FAIL_AT("an unknown kernel name parsed");

  snprintf(path, sizeof path, "%s/tuner-copy.txt", data_dir);
  text = slurp(path, &n);
  REQUIRE_TRUE(clb_tuning_parse(text, n, "Copy", 32, cp) == CLB_OK);
  EXPECT_EQ_I(cp->nparams, 4);
  EXPECT_NEAR(cp->time_ms, 0.29);
  static const char *const cnames[] = {"COPY_DIMX", "COPY_DIMY", "COPY_WPT", "COPY_VW"};
  static const long row34[] = {32, 32, 2, 8};
  for (int k = 0; k < 4 && k < cp->nparams; k++) {
    EXPECT_EQ_S(cp->names[k], cnames[k]);
    EXPECT_EQ_I(cp->values[k], row34[k]);
  }
}

/* FNV-1a 64, as the file's checksum (written here from its definition). */
static unsigned long long fnv(const char *s, size_t n) {
  unsigned long long h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

/* The checksum of a file's text in buf[cap] recomputed, as a forger would. */
static void resum(char *buf, size_t cap) {
  char *sum = strstr(buf, "\"sum\": ");
  REQUIRE_TRUE(sum != NULL);
  snprintf(sum + 7, cap - (size_t)(sum + 7 - buf), "\"%016llx\"}\n", fnv(buf, (size_t)(sum + 7 - buf)));
}

/* good's text with "COPY_DIMX": 0 and the checksum recomputed, into buf[cap]
 * (issue 30, item 4: CLBlast's GEMM program does not build with it). */
static void forge_copy_dimx0(const char *good, char *buf, size_t cap) {
  REQUIRE_TRUE(strlen(good) < cap);
  memcpy(buf, good, strlen(good) + 1);
  char *cx = strstr(buf, "\"COPY_DIMX\": ");
  REQUIRE_TRUE(cx != NULL);
  char *digits = cx + strlen("\"COPY_DIMX\": "), *after = digits + strspn(digits, "0123456789");
  memmove(digits + 1, after, strlen(after) + 1);
  digits[0] = '0';
  resum(buf, cap);
}

/* c (n x n) read back and checked against the double product of va and vb. */
static void check_product(clb_context_t ctx, clb_tensor_t c, int64_t n, const double *va, const double *vb, double *got,
                          const char *dir) {
  size_t nn = (size_t)(n * n);
  int64_t od[2];
  clb_test_read(ctx, c, od, got, (int64_t)nn);
  EXPECT_EQ_I(od[0], n);
  EXPECT_EQ_I(od[1], n);
  /* f32 products summed over K terms of |a b| <= 1: within K * 2^-22 of the exact sum */
  double tol = (double)n * 2.4e-7 + 1e-6, worst = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double want = 0;
      for (int64_t k = 0; k < n; k++) want += va[i * n + k] * vb[k * n + j];
      double d = got[i * n + j] - want;
      if (d < 0) d = -d;
      if (d > worst) worst = d;
    }
  clb_test_checks++;
  if (worst > tol) CLB_FAIL_AT("CLBlast %lld^3 with %s: worst error %g > %g", (long long)n, dir, worst, tol);
}

/* The error of the last run_context whose matmul had to fail. */
static char gemm_error[4096];

/* A context on `dir` running one CLBlast matmul of n x n x n (static sizes,
 * clblast-bound: CLBlast exactly) checked against a double reference, or, with
 * must_fail, failing with CLB_ERR_CL (its message into gemm_error); returns how
 * many kernels its tuning set. */
static int run_context(const char *dir, int64_t n, int must_fail) {
  clb_context_t ctx = cached_context(dir);
  clb_context_set_log(ctx, CLB_LOG_GEMM, capture, NULL);
  EXPECT_EQ_I(clb_context_clblast_tuned(ctx), -1);
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_CLBLAST_BOUND));
  int64_t dims[2] = {n, n};
  clb_tensor_t a = NULL, b = NULL, c = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, dims, NULL, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, dims, NULL, &b));
  size_t nn = (size_t)(n * n);
  double *va = malloc(nn * sizeof(double)), *vb = malloc(nn * sizeof(double)), *got = malloc(nn * sizeof(double));
  REQUIRE_TRUE(va && vb && got);
  for (size_t i = 0; i < nn; i++) {
    va[i] = (double)(clb_test_next() % 2001) / 1000.0 - 1.0;
    vb[i] = (double)(clb_test_next() % 2001) / 1000.0 - 1.0;
  }
  clb_test_write(ctx, a, dims, va);
  clb_test_write(ctx, b, dims, vb);
  if (must_fail) {
    clb_test_checks++;
    if (clb_matmul(ctx, a, 0, b, 0, &c) != CLB_ERR_CL) CLB_FAIL_AT("the matmul did not fail");
    snprintf(gemm_error, sizeof gemm_error, "%s", clb_context_errmsg(ctx));
  } else {
    CL_OK(ctx, clb_matmul(ctx, a, 0, b, 0, &c));
    check_product(ctx, c, n, va, vb, got, dir);
  }
  int tuned = clb_context_clblast_tuned(ctx);
  free(va);
  free(vb);
  free(got);
  clb_context_free(ctx);
  return tuned;
}

static void expect_log(const char *needle) {
  clb_test_checks++;
  if (!strstr(log_lines, needle)) CLB_FAIL_AT("log lacks \"%s\":\n%s", needle, log_lines);
}

int main(void) {
  const char *d = getenv("CLB_TUNER_DATA");
  REQUIRE_TRUE(d && *d);
  snprintf(data_dir, sizeof data_dir, "%s", d);
  clb_tuning_entry e[2];
  parse_canned(&e[0], &e[1]);

  char dir[1024];
  clb_test_temp_dir(dir, sizeof dir, "tuning-test");
  clb_context_t probe = clb_test_context(NULL);
  cl_device_id dev = clb_context_cl_device(probe);
  char path[1200], why[400];
  CL_OK(probe, clb_tuning_path(dev, dir, path, sizeof path));
  clb_test_checks++;
  if (strncmp(path, dir, strlen(dir)) != 0 || !strstr(path, "/tuning-") || !strstr(path, ".json"))
    CLB_FAIL_AT("path %s", path);
  clb_test_checks++;
  if (clb_tuning_path(dev, "off", path + 0, sizeof path) != CLB_ERR_INVALID_ARG) CLB_FAIL_AT("a path with the cache off");
  CL_OK(probe, clb_tuning_path(dev, dir, path, sizeof path));

  /* absent */
  clb_tuning_entry back[CLB_TUNING_MAX_ENTRIES];
  int n = -1;
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_ABSENT);
  EXPECT_EQ_I(run_context(dir, 96, 0), 0);
  expect_log("no file");

  /* written and read back whole */
  CL_OK(probe, clb_tuning_save(dev, path, e, 2));
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OK);
  EXPECT_EQ_I(n, 2);
  for (int i = 0; i < 2 && i < n; i++) {
    EXPECT_EQ_S(back[i].kernel, e[i].kernel);
    EXPECT_EQ_I(back[i].precision, e[i].precision);
    EXPECT_EQ_I(back[i].measured, e[i].measured);
    EXPECT_EQ_I(back[i].nparams, e[i].nparams);
    for (int k = 0; k < e[i].nparams; k++) {
      EXPECT_EQ_S(back[i].names[k], e[i].names[k]);
      EXPECT_EQ_I(back[i].values[k], e[i].values[k]);
    }
  }
  /* a bad entry is refused, and the file stays as it was */
  clb_tuning_entry badent = e[0];
  badent.values[1] = -5;
  clb_test_checks++;
  if (clb_tuning_save(dev, path, &badent, 1) != CLB_ERR_INVALID_ARG) CLB_FAIL_AT("a negative parameter saved");
  size_t len;
  char good[1 << 16];
  char *s = slurp(path, &len);
  REQUIRE_TRUE(len < sizeof good);
  memcpy(good, s, len + 1);

  /* damaged: one byte changed, cut off, empty, garbage: each ignored */
  char bad[1 << 16];
  memcpy(bad, good, len + 1);
  char *v = strstr(bad, "\"MWG\": ");
  REQUIRE_TRUE(v != NULL);
  v[7] = v[7] == '9' ? '8' : '9';
  const struct { const char *label; size_t n; } cases[] = {{"a changed value", len}, {"cut off", len / 2}, {"empty", 0}};
  for (int c = 0; c < 3; c++) {
    spit(path, bad, cases[c].n);
    clb_test_checks++;
    if (clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why) != CLB_TUNING_DAMAGED)
      CLB_FAIL_AT("%s: not found damaged", cases[c].label);
    if (c == 0) { /* a context too (each compiles CLBlast's kernels: seconds) */
      EXPECT_EQ_I(run_context(dir, 96, 0), 0);
      expect_log("ignored, never applied");
    }
  }

  /* a whole file (checksum right) for another device and driver: ignored */
  memcpy(bad, good, len + 1);
  char *dv = strstr(bad, "\"device\": \"");
  REQUIRE_TRUE(dv != NULL);
  dv[11] = dv[11] == 'X' ? 'Y' : 'X';
  resum(bad, sizeof bad);
  spit(path, bad, strlen(bad));
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OTHER_DEVICE);
  clb_test_checks++;
  if (!strstr(why, "written for device")) CLB_FAIL_AT("why: %s", why);
  EXPECT_EQ_I(run_context(dir, 96, 0), 0);
  expect_log("ignored, never applied");

  /* the whole file again: applied (Xgemm and Copy), and CLBlast's GEMM (the
   * indirect Xgemm with its copy kernels at 512, the direct one at 96) matches */
  spit(path, good, len);
  EXPECT_EQ_I(run_context(dir, 512, 0), 2);
  expect_log("applied 2 of 2 kernels");
  EXPECT_EQ_I(run_context(dir, 96, 0), 2);

  /* forged: COPY_DIMX 0 with the checksum recomputed (issue 30, item 4; before:
   * applied, then every CLBlast GEMM failed to build). The Copy entry breaks
   * CLBlast's constraints: dropped with a line naming the file and the kernel,
   * never applied, and the file rewritten without it; GEMMs stay right. */
  forge_copy_dimx0(good, bad, sizeof bad);
  spit(path, bad, strlen(bad));
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OK);
  EXPECT_EQ_I(run_context(dir, 512, 0), 1); /* Xgemm only */
  expect_log(path);
  expect_log("kernel Copy (precision 32) dropped");
  expect_log("COPY_DIMX = 0");
  EXPECT_EQ_I(run_context(dir, 96, 0), 1);
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OK);
  EXPECT_EQ_I(n, 1);
  EXPECT_EQ_S(back[0].kernel, "Xgemm");
  /* a kernel named twice: refused when saved, and a file with it is never applied */
  clb_tuning_entry twice[2] = {e[0], e[0]};
  clb_test_checks++;
  if (clb_tuning_save(dev, path, twice, 2) != CLB_ERR_INVALID_ARG) CLB_FAIL_AT("a kernel saved twice");
  memcpy(bad, good, len + 1);
  char *k2 = strstr(bad, "\"Copy\"");
  REQUIRE_TRUE(k2 != NULL);
  memmove(k2 + 7, k2 + 6, strlen(k2 + 6) + 1); /* "Copy" -> "Xgemm": one byte longer */
  memcpy(k2, "\"Xgemm\"", 7);
  resum(bad, sizeof bad);
  spit(path, bad, strlen(bad));
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_DAMAGED);
  clb_test_checks++;
  if (!strstr(why, "appears twice")) CLB_FAIL_AT("why: %s", why);

  /* forged the same way with the checks skipped, so the entry reaches CLBlast
   * and its GEMM program fails to build (CL_BUILD_PROGRAM_FAILURE; before: every
   * CLBlast GEMM failed for good). CLBlast's own parameters are put back for the
   * file's entries in force (Xgemm and Copy: one program holds all of GEMM's
   * kernels), each is dropped with a line naming the file and the kernel, the
   * file loses them, and the product, tried once more, is right. */
  forge_copy_dimx0(good, bad, sizeof bad);
  spit(path, bad, strlen(bad));
  setenv("CLBOUND_TEST_TUNING_UNCHECKED", "1", 1);
  EXPECT_EQ_I(run_context(dir, 96, 0), 0); /* 2 applied, both put back */
  expect_log("applied 2 of 2 kernels");
  expect_log("kernel Copy (precision 32) dropped, CLBlast's own parameters put back");
  expect_log("kernel Xgemm (precision 32) dropped, CLBlast's own parameters put back");
  expect_log("CL_BUILD_PROGRAM_FAILURE");
  expect_log(path);
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OK);
  EXPECT_EQ_I(n, 0);
  /* the same entries again (say the rewrite had failed): this process does not
   * apply them again, nor build with them */
  spit(path, bad, strlen(bad));
  EXPECT_EQ_I(run_context(dir, 96, 0), 0);
  expect_log("earlier in this process, CLBlast's GEMM failed with these parameters in force");
  expect_log("applied 0 of 0 kernels");
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OK);
  EXPECT_EQ_I(n, 0);
  unsetenv("CLBOUND_TEST_TUNING_UNCHECKED");
  /* every CLBlast build broken (CLBLAST_BUILD_OPTIONS makes its `real` type
   * invalid): with the file's Copy in force the GEMM fails, Copy is put back and
   * dropped, the retry fails too, and the error names both failures, the
   * kernel and the file (Xgemm, which failed before, is not applied) */
  spit(path, good, len);
  setenv("CLBLAST_BUILD_OPTIONS", "-D real=int", 1);
  EXPECT_EQ_I(run_context(dir, 96, 1), 0);
  unsetenv("CLBLAST_BUILD_OPTIONS");
  const char *const err_parts[] = {"CLBlastSgemm(m=96, n=96, k=96", "(CL_BUILD_PROGRAM_FAILURE, -11) with the tuning file's",
                                   "then again (CL_BUILD_PROGRAM_FAILURE, -11) with CLBlast's own", "dropped: Copy of tuning file",
                                   path};
  for (size_t i = 0; i < sizeof err_parts / sizeof err_parts[0]; i++) {
    clb_test_checks++;
    if (!strstr(gemm_error, err_parts[i])) CLB_FAIL_AT("the error lacks \"%s\": %s", err_parts[i], gemm_error);
  }
  EXPECT_EQ_I(clb_tuning_load(dev, path, back, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why), CLB_TUNING_OK);
  EXPECT_EQ_I(n, 0);
  spit(path, good, len);

  /* CLBOUND_CLBLAST_TUNING=off: nothing applied */
  setenv("CLBOUND_CLBLAST_TUNING", "off", 1);
  EXPECT_EQ_I(run_context(dir, 96, 0), 0);
  expect_log("CLBOUND_CLBLAST_TUNING=off");
  unsetenv("CLBOUND_CLBLAST_TUNING");

  clb_context_free(probe);
  unlink(path);
  clb_test_temp_dir_remove(dir);
  return clb_test_finish("nn/tuning");
}
