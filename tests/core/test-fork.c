/* test-fork.c: fork (issue 30, item 3). In a child forked after the parent had
 * used OpenCL, making a context and using or freeing an inherited one return at
 * once: CLB_ERR_UNSUPPORTED with "OpenCL cannot be used in a forked child"
 * (before: clb_context_new waited forever in the driver). Children that call
 * exit() while the parent's host-BLAS products run all end (before: about 1 in
 * 10 hung in OpenBLAS's exit handler). Each child's verdict is its exit
 * status, checked by the parent, which kills a child that has not ended in
 * time and counts it as hung. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cl-test.h"

/* The child's exit status, or -1 when it had not ended after `seconds` (then
 * killed). */
static int wait_child(pid_t pid, double seconds) {
  struct timespec nap = {0, 2000000};
  for (double waited = 0; waited < seconds; waited += 0.002) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    nanosleep(&nap, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

static const char *const needle = "OpenCL cannot be used in a forked child";

/* In the child: one bit per check that failed. */
static int child_checks(clb_context_t ctx, clb_tensor_t t) {
  int bad = 0;
  clb_context_t c2 = NULL;
  if (clb_context_new(NULL, &c2) != CLB_ERR_UNSUPPORTED || c2 || !strstr(clb_last_errmsg(), needle)) bad |= 1;
  clb_tensor_t u = NULL;
  const int64_t n = 4;
  if (clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &u) != CLB_ERR_UNSUPPORTED || !strstr(clb_context_errmsg(ctx), needle))
    bad |= 2;
  if (clb_fill(ctx, t, 1.0) != CLB_ERR_UNSUPPORTED || !strstr(clb_context_errmsg(ctx), "spawn")) bad |= 4;
  float h[4];
  if (clb_tensor_read(ctx, t, NULL, h, sizeof h, NULL) != CLB_ERR_UNSUPPORTED) bad |= 8;
  if (clb_context_sync(ctx) != CLB_ERR_UNSUPPORTED) bad |= 16;
  clb_tensor_free(t); /* return at once: nothing of the parent's driver is touched */
  clb_context_free(ctx);
  return bad;
}

static void test_inherited(void) {
  CLB_TEST_CASE("a context in a forked child");
  clb_context_t ctx = clb_test_context(NULL);
  const int64_t n = 4;
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &t));
  CL_OK(ctx, clb_fill(ctx, t, 2.0));
  CL_OK(ctx, clb_context_sync(ctx));
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE_TRUE(pid >= 0);
  if (pid == 0) exit(child_checks(ctx, t));
  int rc = wait_child(pid, 60);
  EXPECT_EQ_I(rc, 0);
  if (rc < 0) fprintf(stderr, "the child hung (killed after 60 s)\n");
  else if (rc) fprintf(stderr, "child checks failed: mask 0x%x\n", rc);
  /* the parent goes on */
  float h[4] = {0};
  CL_OK(ctx, clb_tensor_read(ctx, t, NULL, h, sizeof h, NULL));
  EXPECT_EQ_I(h[3], 2);
  clb_tensor_free(t);
  clb_context_free(ctx);
}

static void sleep_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

static atomic_int stop;
static atomic_long products;

static void *multiply(void *p) {
  clb_context_t ctx = p;
  const int64_t d[2] = {16, 16}; /* small: OpenBLAS's thread count changes twice a product */
  clb_tensor_t a = NULL, c = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, d, NULL, &a));
  CL_OK(ctx, clb_fill(ctx, a, 0.5));
  while (!atomic_load(&stop)) {
    for (int i = 0; i < 20; i++) CL_OK(ctx, clb_matmul(ctx, a, 0, a, 0, &c));
    CL_OK(ctx, clb_context_sync(ctx));
    atomic_fetch_add(&products, 20);
  }
  clb_tensor_free(c);
  clb_tensor_free(a);
  return NULL;
}

static void test_exit_during_products(void) {
  CLB_TEST_CASE("children exit while host-BLAS products run");
  clb_context_t ctx = clb_test_context(NULL);
  if (clb_context_set_gemm_strategy(ctx, CLB_GEMM_HOST_BLAS) != CLB_OK) {
    printf("no host BLAS on this device (%s): skipped\n", clb_context_errmsg(ctx));
    clb_context_free(ctx);
    return;
  }
  pthread_t th;
  REQUIRE_TRUE(pthread_create(&th, NULL, multiply, ctx) == 0);
  while (atomic_load(&products) < 3) sleep_us(1000);
  int hung = 0, failed = 0;
  const int forks = 100;
  for (int i = 0; i < forks; i++) {
    sleep_us(200 + (i % 7) * 150); /* land at different points of a product */
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE_TRUE(pid >= 0);
    if (pid == 0) exit(0); /* the exit handlers: OpenBLAS's, PoCL's, clbound's */
    int rc = wait_child(pid, 20);
    hung += rc < 0;
    failed += rc > 0;
  }
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  printf("%d forks during %ld products: %d hung, %d failed\n", forks, atomic_load(&products), hung, failed);
  EXPECT_EQ_I(hung, 0);
  EXPECT_EQ_I(failed, 0);
  clb_context_free(ctx);
}

int main(void) {
  test_inherited();
  test_exit_during_products();
  return clb_test_finish("core/fork");
}
