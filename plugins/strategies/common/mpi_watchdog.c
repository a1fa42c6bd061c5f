/* mpi_watchdog.c — a deadline for the MPI calls that take no timeout (mpi_watchdog.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_condattr_setclock */
#include "mpi_watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct mpi_watchdog {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t returned; /* signalled by stop */
  bool done;
  struct timespec deadline; /* CLOCK_MONOTONIC: a clock set back does not delay it */
  char message[1024];
};

/* write(2) alone: the guarded thread is inside MPI and may hold any lock, stdio's too. */
static void write_all(int fd, const char *text, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, text, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    len -= (size_t)n;
  }
}

static void *watch(void *arg) {
  mpi_watchdog *dog = arg;
  pthread_mutex_lock(&dog->lock);
  int rc = 0;
  while (!dog->done && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&dog->returned, &dog->lock, &dog->deadline);
  bool done = dog->done;
  pthread_mutex_unlock(&dog->lock);
  if (done) return NULL;
  write_all(2, dog->message, strlen(dog->message));
  _exit(1);
}

mpi_watchdog *mpi_watchdog_start(double seconds, const char *message) {
  mpi_watchdog *dog = calloc(1, sizeof *dog);
  if (!dog) return NULL;
  size_t len = strlen(message);
  if (len > sizeof dog->message - 2) len = sizeof dog->message - 2;
  memcpy(dog->message, message, len);
  dog->message[len] = '\n';
  clock_gettime(CLOCK_MONOTONIC, &dog->deadline);
  time_t whole = (time_t)seconds;
  long nanos = dog->deadline.tv_nsec + (long)((seconds - (double)whole) * 1e9);
  dog->deadline.tv_sec += whole + nanos / 1000000000L;
  dog->deadline.tv_nsec = nanos % 1000000000L;
  dog->lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) {
    free(dog);
    return NULL;
  }
  bool ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&dog->returned, &attr) == 0;
  pthread_condattr_destroy(&attr);
  if (!ok) {
    free(dog);
    return NULL;
  }
  if (pthread_create(&dog->thread, NULL, watch, dog) != 0) {
    pthread_cond_destroy(&dog->returned);
    free(dog);
    return NULL;
  }
  return dog;
}

void mpi_watchdog_stop(mpi_watchdog *dog) {
  if (!dog) return;
  pthread_mutex_lock(&dog->lock);
  dog->done = true;
  pthread_cond_signal(&dog->returned);
  pthread_mutex_unlock(&dog->lock);
  pthread_join(dog->thread, NULL);
  pthread_cond_destroy(&dog->returned);
  free(dog);
}
