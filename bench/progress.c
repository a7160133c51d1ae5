/* progress.c: the progress line of long runs (progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "bench/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/timing.h"

struct clb_progress {
  clb_progress_mode mode;
  pthread_t thread;
  pthread_mutex_t mu;
  int stop, total, done;
  long long builds;
  double t0, last_line;
  char label[96], phase[96];
  size_t drawn; /* characters of the live line on screen */
};

clb_progress_mode clb_progress_mode_for(int quiet) {
  if (quiet) return CLB_PROGRESS_OFF;
  return isatty(2) ? CLB_PROGRESS_LIVE : CLB_PROGRESS_LINES;
}

static double now_s(void) { return 1e-3 * clb_tool_now_ms(); }

/* The status text; called with the lock held. */
static void status_text(const clb_progress *p, double now, char *buf, size_t len) {
  double el = now - p->t0;
  int n = snprintf(buf, len, "  [%s] ", p->label);
  if (p->total > 0 && p->done > 0) n += snprintf(buf + n, len - (size_t)n, "step %d/%d, ", p->done, p->total);
  if (p->phase[0]) n += snprintf(buf + n, len - (size_t)n, "%s, ", p->phase);
  n += snprintf(buf + n, len - (size_t)n, "%.1f s", el);
  if (p->builds >= 0) n += snprintf(buf + n, len - (size_t)n, ", %lld programs built", p->builds);
  if (p->total > 0 && 4 * p->done >= p->total && p->done < p->total) { /* early steps build programs */
    double eta = el / p->done * (p->total - p->done);
    snprintf(buf + n, len - (size_t)n, ", about %.0f s left", eta < 1 ? 1 : eta);
  }
}

static void draw(clb_progress *p, double now) {
  char buf[320];
  status_text(p, now, buf, sizeof buf);
  if (p->mode == CLB_PROGRESS_LIVE) {
    size_t len = strlen(buf);
    fprintf(stderr, "\r%s%*s", buf, p->drawn > len ? (int)(p->drawn - len) : 0, "");
    p->drawn = len;
  } else {
    fprintf(stderr, "%s\n", buf);
    p->last_line = now;
  }
  fflush(stderr);
}

static void *heartbeat(void *arg) {
  clb_progress *p = arg;
  const struct timespec tick = {0, 200 * 1000 * 1000};
  for (;;) {
    nanosleep(&tick, NULL);
    pthread_mutex_lock(&p->mu);
    if (p->stop) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    double now = now_s();
    if (p->mode == CLB_PROGRESS_LIVE || now - p->last_line >= CLB_PROGRESS_LINE_INTERVAL_S) draw(p, now);
    pthread_mutex_unlock(&p->mu);
  }
}

clb_progress *clb_progress_begin(clb_progress_mode mode, const char *label, int total) {
  if (mode == CLB_PROGRESS_OFF) return NULL;
  clb_progress *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->mode = mode;
  p->total = total;
  p->builds = -1;
  p->t0 = p->last_line = now_s();
  snprintf(p->label, sizeof p->label, "%s", label);
  pthread_mutex_init(&p->mu, NULL);
  if (mode == CLB_PROGRESS_LINES) {
    if (total > 0) fprintf(stderr, "  [%s] starting: %d steps\n", label, total);
    else fprintf(stderr, "  [%s] starting\n", label);
    fflush(stderr);
  }
  if (pthread_create(&p->thread, NULL, heartbeat, p) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  return p;
}

void clb_progress_update(clb_progress *p, int done, long long builds) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->done = done;
  p->builds = builds;
  pthread_mutex_unlock(&p->mu);
}

void clb_progress_phase(clb_progress *p, const char *phase) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  snprintf(p->phase, sizeof p->phase, "%s", phase ? phase : "");
  pthread_mutex_unlock(&p->mu);
}

static void erase(clb_progress *p) {
  if (p->mode == CLB_PROGRESS_LIVE && p->drawn) {
    fprintf(stderr, "\r%*s\r", (int)p->drawn, "");
    fflush(stderr);
    p->drawn = 0;
  }
}

void clb_progress_hold(clb_progress *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  erase(p);
}

void clb_progress_release(clb_progress *p) {
  if (p) pthread_mutex_unlock(&p->mu);
}

void clb_progress_end(clb_progress *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  erase(p);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
