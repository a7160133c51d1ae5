/* shapes-scale.c: `clbound shapes` on a generated log of 1e6 runs with 1e5
 * unique shapes (issue 16, class 3). Writes the file, runs the tool as a child,
 * and prints its wall time and peak memory (getrusage of the child). Checks the
 * report's totals and its most frequent shape against what the generator wrote,
 * and the peak memory loosely (under 100 MB); the time is printed, not checked
 * (the target, 3 s, is recorded in docs/benchmarks-scale.md).
 * Usage: shapes-scale TOOL SCRATCH_FILE */
#define _DEFAULT_SOURCE /* wait4 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define ROWS 1000000
#define UNIQUE 100000

static uint32_t counts[UNIQUE];

int main(int argc, char **argv) {
  REQUIRE_TRUE(argc == 3);
  const char *tool = argv[1], *path = argv[2];
  FILE *f = fopen(path, "w");
  REQUIRE_TRUE(f != NULL);
  /* shape u: x = (u % 1000 + 1) x 64, y = u / 1000 + 1; the first UNIQUE rows
   * give every shape once, then shape 7 every 10th row and a scattered one
   * otherwise */
  uint64_t r = 0x2545F4914F6CDD1Dull;
  fprintf(f, "# data-dependent: count of nonzero 'nz'\n");
  for (long i = 0; i < ROWS; i++) {
    long u;
    if (i < UNIQUE) u = i;
    else if (i % 10 == 0) u = 7;
    else {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      u = (long)(r % UNIQUE);
    }
    counts[u]++;
    fprintf(f, "x=%ldx64;y=%ld\n", u % 1000 + 1, u / 1000 + 1);
  }
  REQUIRE_TRUE(fclose(f) == 0);
  long top = 0;
  for (long u = 1; u < UNIQUE; u++)
    if (counts[u] > counts[top]) top = u;
  int pipefd[2];
  REQUIRE_TRUE(pipe(pipefd) == 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  REQUIRE_TRUE(pid >= 0);
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    execl(tool, tool, "shapes", path, (char *)NULL);
    _exit(127);
  }
  close(pipefd[1]);
  static char out[1 << 16];
  size_t len = 0;
  ssize_t got;
  while ((got = read(pipefd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)got;
  out[len] = 0;
  close(pipefd[0]);
  int status = 0;
  struct rusage ru;
  REQUIRE_TRUE(wait4(pid, &status, 0, &ru) == pid);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  remove(path);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  double peak_mb = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
  printf("clbound shapes on %d runs, %d unique shapes: %.2f s (target <= 3 s), peak memory %.1f MB (limit 100 MB)\n", ROWS,
         UNIQUE, secs, peak_mb);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char want[256];
  snprintf(want, sizeof want, "%d runs, %d unique shapes: a lot of dynamicity\n", ROWS, UNIQUE);
  EXPECT_TRUE(strncmp(out, want, strlen(want)) == 0);
  snprintf(want, sizeof want, "\n  %6u x  x=[%ld, 64] y=[%ld]\n", counts[top], top % 1000 + 1, top / 1000 + 1);
  EXPECT_TRUE(strstr(out, "most frequent shapes:") != NULL && strstr(out, want) != NULL);
  EXPECT_TRUE(strstr(out, "ops whose output sizes depend on data: count of nonzero 'nz'") != NULL);
  EXPECT_TRUE(strstr(out, "dim 0 of x") != NULL && strstr(out, "dim 0 of y") != NULL);
  EXPECT_TRUE(peak_mb < 100.0);
  if (clb_test_failures) fprintf(stderr, "output:\n%s\n", out);
  return clb_test_finish("tools/shapes-scale");
}
