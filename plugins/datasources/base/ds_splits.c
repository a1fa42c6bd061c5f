/* ds_splits.c — splits loaded once per process, counted by reference (ds_splits.h). */
#define _POSIX_C_SOURCE 200809L
#include "ds_splits.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ds_split {
  ds_split *next;
  char *key;
  int refs;
  void *set;
  ds_split_free_fn free_set;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ds_split *list;

static ds_split *load_new(const char *key, ds_split_load_fn load, ds_split_free_fn free_set,
                          const void *arg, cnnb_status *status, char *err, size_t err_size) {
  ds_split *s = calloc(1, sizeof *s);
  if (!s || !(s->key = strdup(key))) {
    free(s);
    snprintf(err, err_size, "out of memory");
    *status = CNNB_ENOMEM;
    return NULL;
  }
  cnnb_status st = load(arg, &s->set, err, err_size);
  if (st != CNNB_OK) {
    free(s->key);
    free(s);
    *status = st;
    return NULL;
  }
  s->refs = 1;
  s->free_set = free_set;
  s->next = list;
  list = s;
  return s;
}

ds_split *ds_split_acquire(const char *key, ds_split_load_fn load, ds_split_free_fn free_set,
                           const void *arg, cnnb_status *status, char *err, size_t err_size) {
  pthread_mutex_lock(&lock);
  ds_split *s = list;
  while (s && strcmp(s->key, key) != 0) s = s->next;
  if (s) s->refs++;
  else s = load_new(key, load, free_set, arg, status, err, err_size);
  pthread_mutex_unlock(&lock);
  return s;
}

const void *ds_split_set(const ds_split *split) { return split->set; }

void ds_split_release(ds_split *split) {
  if (!split) return;
  pthread_mutex_lock(&lock);
  if (--split->refs == 0) {
    ds_split **p = &list;
    while (*p != split) p = &(*p)->next;
    *p = split->next;
    split->free_set(split->set);
    free(split->key);
    free(split);
  }
  pthread_mutex_unlock(&lock);
}
