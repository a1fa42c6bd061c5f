/* clock.c — the host's clock (clock.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "base/clock.h"

#include <time.h>

double cnnb_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cnnb_unix_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
