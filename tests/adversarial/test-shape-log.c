/* test-shape-log.c: a CLBOUND_SHAPE_LOG that cannot be opened (a missing
 * folder) or written (/dev/full: the disk is full) warns once on stderr naming
 * the path and the real error; the graph still runs and gives the right result. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cl-test.h"

/* Runs y = relu(x) three times with CLBOUND_SHAPE_LOG=path; returns stderr. */
static void run_with_log(clb_context_t ctx, const char *path, char *err, size_t cap) {
  char errfile[] = "/tmp/clbound-shape-log-XXXXXX";
  int fd = mkstemp(errfile);
  REQUIRE_TRUE(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  close(fd);
  setenv("CLBOUND_SHAPE_LOG", path, 1);
  clb_graph_t g = NULL;
  CL_OK(ctx, clb_graph_new(ctx, NULL, &g));
  int64_t b[1] = {16};
  uint8_t dyn[1] = {1};
  clb_node x, y;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 1, b, dyn, &x));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, x, &y));
  for (int r = 0; r < 3; r++) {
    int64_t d[1] = {5 + r};
    float v[8], got[16];
    for (int i = 0; i < 8; i++) v[i] = (float)(i - 3);
    CL_OK(ctx, clb_graph_feed(g, x, d, v, (size_t)d[0] * sizeof(float)));
    CL_OK(ctx, clb_graph_run(g));
    size_t bytes = 0;
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, y), NULL, got, sizeof got, &bytes));
    EXPECT_EQ_I(bytes, (size_t)d[0] * sizeof(float));
    for (int i = 0; i < d[0]; i++) EXPECT_EQ_I(got[i], v[i] > 0 ? v[i] : 0);
  }
  clb_graph_free(g);
  unsetenv("CLBOUND_SHAPE_LOG");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(errfile, "r");
  REQUIRE_TRUE(f != NULL);
  size_t n = fread(err, 1, cap - 1, f);
  err[n] = 0;
  fclose(f);
  unlink(errfile);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

int main(int argc, char **argv) {
  clb_context_t ctx = clb_test_context(NULL);
  char err[4096];
  if (argc == 2 && strcmp(argv[1], "--full") == 0) {
    run_with_log(ctx, "/dev/full", err, sizeof err);
    EXPECT_TRUE(strstr(err, "cannot write") != NULL);
    EXPECT_TRUE(strstr(err, "No space left on device") != NULL);
    EXPECT_EQ_I(count(err, "CLBOUND_SHAPE_LOG"), 1);
    if (clb_test_failures) fprintf(stderr, "stderr was:\n%s", err);
    clb_context_free(ctx);
    return clb_test_finish("adversarial/shape-log --full");
  }
  run_with_log(ctx, "/nonexistent-clbound-folder/shapes.log", err, sizeof err);
  EXPECT_TRUE(strstr(err, "/nonexistent-clbound-folder/shapes.log") != NULL);
  EXPECT_TRUE(strstr(err, "No such file or directory") != NULL);
  EXPECT_EQ_I(count(err, "CLBOUND_SHAPE_LOG"), 1); /* once, not once per run */
  if (access("/dev/full", W_OK) == 0) {
    /* a second process would warn again: the warning is once per process, so
     * check the write failure in a fresh child */
    fflush(NULL);
    pid_t kid = fork();
    REQUIRE_TRUE(kid >= 0);
    if (kid == 0) {
      execl("/proc/self/exe", "test-adversarial-shape-log", "--full", (char *)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(kid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  clb_context_free(ctx);
  return clb_test_finish("adversarial/shape-log");
}
