/* progress.h: progress of long runs (`clbound demo`, `clbound bench`) on
 * stderr, so that it never mixes with a table or JSON on stdout. On a terminal
 * one live line is redrawn in place; otherwise (a pipe, a log file, CI) a plain
 * line is printed when a task starts and then every few seconds while it runs,
 * so that a log never goes quiet for long. --quiet turns both off. A heartbeat
 * thread does the printing, so a single long step (a program build) still shows
 * the clock moving. */
#ifndef CLB_BENCH_PROGRESS_H
#define CLB_BENCH_PROGRESS_H

typedef enum clb_progress_mode { CLB_PROGRESS_OFF = 0, CLB_PROGRESS_LINES = 1, CLB_PROGRESS_LIVE = 2 } clb_progress_mode;

/* Seconds between two plain lines of one task. */
#define CLB_PROGRESS_LINE_INTERVAL_S 5.0

/* OFF when quiet, LIVE when stderr is a terminal, else LINES. */
clb_progress_mode clb_progress_mode_for(int quiet);

typedef struct clb_progress clb_progress;

/* Starts a task of `total` steps (0: no step count) named `label`; prints its
 * start line. Returns NULL when mode is OFF (every function takes NULL). */
clb_progress *clb_progress_begin(clb_progress_mode mode, const char *label, int total);
/* `done` steps finished; builds < 0 leaves the program count out of the line. */
void clb_progress_update(clb_progress *p, int done, long long builds);
/* What the task is doing before or between steps ("building the graph"). */
void clb_progress_phase(clb_progress *p, const char *phase);
/* Around a line printed to stdout while the task runs: hold erases the live
 * line and keeps the heartbeat from drawing until release. */
void clb_progress_hold(clb_progress *p);
void clb_progress_release(clb_progress *p);
/* Stops the heartbeat, clears the live line, frees p. */
void clb_progress_end(clb_progress *p);

#endif /* CLB_BENCH_PROGRESS_H */
