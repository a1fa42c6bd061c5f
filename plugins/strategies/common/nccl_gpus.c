/* nccl_gpus.c — a strategy's NCCL over its replicas' GPUs, every wait bounded
 * (nccl_gpus.h). Everything NCCL or CUDA goes through the nccl_api table, so this file
 * is the same code against the real library and against the tests' recording stub. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include "nccl_gpus.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_load.h"

enum { MAX_SPANS = 4, TYPES = 3 };

struct nccl_comms {
  nccl_gpus *g;
  nccl_span span;
  int32_t size;       /* GPUs in the communicators, over every rank */
  int32_t first_rank; /* the communicator rank of local GPU 0 */
  bool member;        /* this rank's GPUs take part */
  nccl_comm **comm;   /* [n] */
  int32_t *premul;    /* [n * TYPES] the premultiplied sum per GPU and type, or NULL */
};

struct nccl_gpus {
  const nccl_api *api;
  cnnb_ctx *ctx;
  mpi_world *world;
  double timeout_s;
  char who[96];
  int32_t n;
  int32_t *ordinals;   /* [n] each local replica's GPU */
  void **streams;      /* [n] its stream */
  nccl_event **events; /* [n] recorded on it to wait for the work before */
  nccl_comms *spans[MAX_SPANS];
  int32_t num_spans;
  bool pending; /* work was enqueued since the last wait */
  bool broken;  /* a fault aborted the communicators: every call fails */
  bool closing; /* in close: a fault aborts, but meets no rank at a barrier (they may be
                   gone already, their MPI finalised) */
  char description[256];
};

int32_t nccl_type_size(int32_t type) { return type == NCCL_API_FLOAT32 ? 4 : 2; }

const char *nccl_type_name(int32_t type) {
  return type == NCCL_API_FLOAT16 ? "fp16" : type == NCCL_API_BFLOAT16 ? "bf16" : "fp32";
}

static int type_index(int32_t type) {
  return type == NCCL_API_FLOAT16 ? 1 : type == NCCL_API_BFLOAT16 ? 2 : 0;
}

static const cnnb_device_cuda_stream *stream_of(const cnnb_device_vtable *dv, void *device) {
  if (!dv->get_extension || dv->get_extension(device, CNNB_EXT_HOST_MEMORY)) return NULL;
  const cnnb_device_cuda_stream *s = dv->get_extension(device, CNNB_EXT_CUDA_STREAM);
  return s && s->struct_size >= sizeof *s ? s : NULL;
}

const char *nccl_gpus_device_name(const cnnb_strategy_config *cfg) {
  bool passed = cfg->struct_size >=
                offsetof(cnnb_strategy_config, device_name) + sizeof cfg->device_name;
  return passed && cfg->device_name ? cfg->device_name : "of this run";
}

bool nccl_gpus_devices_qualify(const cnnb_strategy_config *cfg) {
  for (int32_t r = 0; r < cfg->local_replicas; r++)
    if (!stream_of(cfg->device, cfg->devices[r])) return false;
  return cfg->local_replicas > 0;
}

/* ---- faults ------------------------------------------------------------------------ */

static void abort_all(nccl_gpus *g) {
  for (int32_t s = 0; s < g->num_spans; s++) {
    nccl_comms *c = g->spans[s];
    for (int32_t i = 0; c->comm && i < g->n; i++)
      if (c->comm[i]) {
        g->api->comm_abort(c->comm[i]);
        c->comm[i] = NULL;
      }
  }
  g->broken = true;
}

/* A collective failed or stopped: the communicators are aborted (their kernels end, so no
 * later synchronize hangs), and under mpirun the ranks meet at a barrier of the MPI
 * layer, which names the ranks that no longer answer. `failure` says what NCCL did. */
static cnnb_status lost(nccl_gpus *g, const char *failure, const char *doing, const char *what) {
  abort_all(g);
  if (mpi_world_size(g->world) > 1 && !g->closing) {
    if (mpi_world_barrier(g->world, g->ctx, "the ranks after NCCL stopped") != CNNB_OK)
      return cnnb_error(g->ctx, CNNB_ECOMM,
                        "NCCL: %s while %s %s (--collective_timeout_s=%g); every NCCL "
                        "communicator of this rank was aborted",
                        failure, doing, what, g->timeout_s);
    return cnnb_error(g->ctx, CNNB_ECOMM,
                      "NCCL: %s while %s %s (--collective_timeout_s=%g), yet every rank still "
                      "answers (they met at a barrier after it): a GPU or its link stopped; every "
                      "NCCL communicator of this rank was aborted",
                      failure, doing, what, g->timeout_s);
  }
  return cnnb_error(g->ctx, CNNB_ECOMM,
                    "NCCL: %s while %s %s (--collective_timeout_s=%g); its communicators were "
                    "aborted",
                    failure, doing, what, g->timeout_s);
}

static cnnb_status call_failed(nccl_gpus *g, nccl_comm *comm, int result, const char *doing,
                               const char *what) {
  char failure[1024];
  snprintf(failure, sizeof failure, "%s (result %d)", g->api->last_error(comm), result);
  return lost(g, failure, doing, what);
}

static cnnb_status check_usable(nccl_gpus *g, const char *doing, const char *what) {
  if (!g->broken) return CNNB_OK;
  return cnnb_error(g->ctx, CNNB_ECOMM, "not %s %s: NCCL already failed in this run", doing, what);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Between polls: a few hundred back to back (a small collective finishes within them),
 * then sleeps growing to 50 us, so waiting costs little of the core the step thread's
 * next kernels need launching from. */
static void pause_between_polls(int *polls, long *sleep_ns) {
  if (++*polls < 256) return;
  *sleep_ns = *sleep_ns ? (*sleep_ns < 50000 ? *sleep_ns * 2 : 50000) : 1000;
  struct timespec ts = {0, *sleep_ns};
  nanosleep(&ts, NULL);
}

/* Polls until no communicator is still enqueuing (or initialising) and, with `events`,
 * every GPU reached its event; past the deadline, or on an error, the fault path. */
static cnnb_status poll(nccl_gpus *g, bool events, const char *doing, const char *what) {
  double deadline = now_s() + g->timeout_s;
  int polls = 0;
  long sleep_ns = 0;
  for (;;) {
    bool busy = false;
    for (int32_t s = 0; s < g->num_spans; s++) {
      nccl_comms *c = g->spans[s];
      for (int32_t i = 0; c->member && i < g->n; i++) {
        if (!c->comm[i]) continue;
        int r = g->api->comm_status(c->comm[i]);
        if (r == NCCL_API_IN_PROGRESS) busy = true;
        else if (r != NCCL_API_OK) return call_failed(g, c->comm[i], r, doing, what);
      }
    }
    char stuck[128] = "";
    size_t used = 0;
    int32_t stuck_count = 0;
    for (int32_t i = 0; events && i < g->n; i++) {
      int r = g->api->event_query(g->events[i]);
      if (r == NCCL_API_IN_PROGRESS) {
        busy = true;
        stuck_count++;
        if (used < sizeof stuck)
          used += (size_t)snprintf(stuck + used, sizeof stuck - used, "%s%d", used ? ", " : "",
                                   (int)g->ordinals[i]);
      } else if (r != NCCL_API_OK) {
        char failure[1024];
        snprintf(failure, sizeof failure, "GPU %d: %s", (int)g->ordinals[i],
                 g->api->last_error(NULL));
        return lost(g, failure, doing, what);
      }
    }
    if (!busy) return CNNB_OK;
    if (now_s() >= deadline) {
      char failure[256];
      if (stuck[0])
        snprintf(failure, sizeof failure,
                 "no progress within %g s (the work of GPU%s %s did not end)", g->timeout_s,
                 stuck_count > 1 ? "s" : "", stuck);
      else snprintf(failure, sizeof failure, "a communicator stayed busy for %g s", g->timeout_s);
      return lost(g, failure, doing, what);
    }
    pause_between_polls(&polls, &sleep_ns);
  }
}

/* ---- the GPUs ---------------------------------------------------------------------- */

cnnb_status nccl_gpus_open(cnnb_ctx *ctx, const char *who, const cnnb_strategy_config *cfg,
                           mpi_world *world, double timeout_s, nccl_gpus **out) {
  *out = NULL;
  const char *device = nccl_gpus_device_name(cfg);
  for (int32_t r = 0; r < cfg->local_replicas; r++) {
    const cnnb_device_vtable *dv = cfg->device;
    if (dv->get_extension && dv->get_extension(cfg->devices[r], CNNB_EXT_HOST_MEMORY))
      return cnnb_error(ctx, CNNB_EUNSUPPORTED, "%s: NCCL reduces on GPUs; device %s has none", who,
                        device);
    if (!stream_of(dv, cfg->devices[r]))
      return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                        "%s: NCCL works on CUDA devices, and replica %d's device (%s) gives no "
                        "CUDA stream (%s)",
                        who, (int)r, device, CNNB_EXT_CUDA_STREAM);
  }
  const nccl_api *api;
  cnnb_status st = nccl_load(ctx, who, &api);
  if (st != CNNB_OK) return st;
  nccl_gpus *g = calloc(1, sizeof *g);
  if (!g) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", who);
  g->api = api;
  g->ctx = ctx;
  g->world = world;
  g->timeout_s = timeout_s > 0 ? timeout_s : 60;
  snprintf(g->who, sizeof g->who, "%s", who);
  g->n = cfg->local_replicas;
  g->ordinals = calloc((size_t)g->n, sizeof *g->ordinals);
  g->streams = calloc((size_t)g->n, sizeof *g->streams);
  g->events = calloc((size_t)g->n, sizeof *g->events);
  if (!g->ordinals || !g->streams || !g->events) {
    nccl_gpus_close(g);
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", who);
  }
  size_t used = (size_t)snprintf(g->description, sizeof g->description, "%s on GPU%s ",
                                 api->describe(), g->n > 1 ? "s" : "");
  for (int32_t i = 0; i < g->n; i++) {
    const cnnb_device_cuda_stream *s = stream_of(cfg->device, cfg->devices[i]);
    g->ordinals[i] = s->ordinal;
    g->streams[i] = s->stream;
    if (used < sizeof g->description)
      used += (size_t)snprintf(g->description + used, sizeof g->description - used, "%s%d",
                               i ? ", " : "", (int)s->ordinal);
    int r = api->event_create(s->ordinal, &g->events[i]);
    if (r != NCCL_API_OK) {
      st = cnnb_error(ctx, CNNB_EIO, "%s: cannot make a CUDA event on GPU %d: %s", who,
                      (int)s->ordinal, api->last_error(NULL));
      nccl_gpus_close(g);
      return st;
    }
  }
  *out = g;
  return CNNB_OK;
}

void nccl_gpus_abandon(nccl_gpus *g) {
  if (g && !g->broken) abort_all(g);
}

const char *nccl_gpus_describe(const nccl_gpus *g) { return g->description; }
int32_t nccl_gpus_count(const nccl_gpus *g) { return g->n; }

/* Frees one span's communicators: finalised and polled when all is well (bounded),
 * aborted otherwise. */
static void close_comms(nccl_gpus *g, nccl_comms *c) {
  for (int32_t i = 0; c->comm && i < g->n; i++) {
    if (!c->comm[i]) continue;
    for (int t = 0; c->premul && t < TYPES; t++)
      if (c->premul[i * TYPES + t] >= 0) g->api->op_destroy(c->comm[i], c->premul[i * TYPES + t]);
    int r = g->api->comm_finalize(c->comm[i]);
    if (r != NCCL_API_OK && r != NCCL_API_IN_PROGRESS) g->broken = true;
  }
  if (!g->broken && poll(g, false, "closing", "the communicators") != CNNB_OK)
    cnnb_clear_error(g->ctx); /* aborted by the fault path; nothing to report at teardown */
  for (int32_t i = 0; c->comm && i < g->n; i++) {
    if (!c->comm[i]) continue;
    if (g->broken) g->api->comm_abort(c->comm[i]);
    else g->api->comm_destroy(c->comm[i]);
    c->comm[i] = NULL;
  }
  free(c->comm);
  free(c->premul);
  free(c);
}

void nccl_gpus_close(nccl_gpus *g) {
  if (!g) return;
  g->closing = true;
  if (!g->broken && g->pending && nccl_gpus_wait(g, "the last collectives") != CNNB_OK)
    cnnb_log(g->ctx, CNNB_LOG_WARN, "%s: %s", g->who, cnnb_error_message(g->ctx));
  /* Last made, first freed: the leaders' before the node's. */
  for (int32_t s = g->num_spans - 1; s >= 0; s--) {
    close_comms(g, g->spans[s]); /* its polls see the spans not yet closed, itself included */
    g->num_spans = s;
  }
  for (int32_t i = 0; g->events && i < g->n; i++)
    if (g->events[i]) g->api->event_destroy(g->events[i]);
  free(g->ordinals);
  free(g->streams);
  free(g->events);
  free(g);
}

/* ---- communicators ------------------------------------------------------------------- */

/* What one rank tells the others when the span needs every rank's word. */
typedef struct id_offer {
  int32_t leader; /* 1 on a node's leader */
  int32_t reserved;
  nccl_unique_id id; /* a leader's node id (NODE), rank 0's leaders id (LEADERS) */
} id_offer;

static cnnb_status fresh_id(nccl_gpus *g, nccl_unique_id *id) {
  int r = g->api->get_unique_id(id);
  if (r != NCCL_API_OK)
    return cnnb_error(g->ctx, CNNB_EIO, "%s: ncclGetUniqueId failed: %s", g->who,
                      g->api->last_error(NULL));
  return CNNB_OK;
}

/* The span's unique id on this rank, its size in ranks, this rank's place in it. */
static cnnb_status agree(nccl_gpus *g, nccl_span span, nccl_unique_id *id, int32_t *ranks,
                         int32_t *place, bool *member) {
  mpi_world *w = g->world;
  int32_t size = mpi_world_size(w), rank = mpi_world_rank(w);
  *member = true;
  memset(id, 0, sizeof *id);
  if (size == 1 || span == NCCL_SPAN_PROCESS) {
    *ranks = 1, *place = 0;
    return fresh_id(g, id);
  }
  if (span == NCCL_SPAN_WORLD) {
    *ranks = size, *place = rank;
    cnnb_status st = rank == 0 ? fresh_id(g, id) : CNNB_OK;
    return st != CNNB_OK ? st : mpi_world_bcast(w, g->ctx, id, sizeof *id, 0, "NCCL's unique id");
  }
  bool leader = mpi_world_local_rank(w) == 0;
  id_offer mine = {.leader = leader};
  cnnb_status st = CNNB_OK;
  if (span == NCCL_SPAN_NODE ? leader : rank == 0) st = fresh_id(g, &mine.id);
  id_offer *all = st == CNNB_OK ? calloc((size_t)size, sizeof *all) : NULL;
  if (st == CNNB_OK && !all) st = cnnb_error(g->ctx, CNNB_ENOMEM, "%s: out of memory", g->who);
  if (st == CNNB_OK)
    st = mpi_world_allgather(w, g->ctx, &mine, all, sizeof mine, "NCCL's unique ids");
  if (st == CNNB_OK && span == NCCL_SPAN_NODE) {
    *ranks = mpi_world_local_size(w), *place = mpi_world_local_rank(w);
    *id = all[mpi_world_node_leader(w)].id;
  } else if (st == CNNB_OK) { /* LEADERS: nodes numbered by their leaders' world ranks */
    int32_t leaders = 0, before = 0;
    for (int32_t r = 0; r < size; r++) {
      leaders += all[r].leader != 0;
      before += all[r].leader != 0 && r < rank;
    }
    *ranks = leaders, *place = before, *member = leader;
    *id = all[0].id;
  }
  free(all);
  return st;
}

cnnb_status nccl_gpus_comms(nccl_gpus *g, nccl_span span, nccl_comms **out) {
  *out = NULL;
  cnnb_status st = check_usable(g, "making", "NCCL communicators");
  if (st != CNNB_OK) return st;
  if (g->num_spans == MAX_SPANS)
    return cnnb_error(g->ctx, CNNB_EINTERNAL, "%s: more than %d sets of communicators", g->who,
                      MAX_SPANS);
  nccl_comms *c = calloc(1, sizeof *c);
  if (!c || !(c->comm = calloc((size_t)g->n, sizeof *c->comm))) {
    free(c);
    return cnnb_error(g->ctx, CNNB_ENOMEM, "%s: out of memory", g->who);
  }
  c->g = g;
  c->span = span;
  g->spans[g->num_spans++] = c; /* from here close frees it */
  nccl_unique_id id;
  int32_t ranks = 1, place = 0;
  if ((st = agree(g, span, &id, &ranks, &place, &c->member)) != CNNB_OK) return st;
  c->size = ranks * g->n;
  c->first_rank = place * g->n;
  if (!c->member) { /* LEADERS on a rank that leads no node */
    *out = c;
    return CNNB_OK;
  }
  /* One thread making several GPUs' communicators: one group (NCCL's rule). */
  int r = g->api->group_start();
  for (int32_t i = 0; r == NCCL_API_OK && i < g->n; i++) {
    r = g->api->comm_init_rank(&c->comm[i], c->size, &id, c->first_rank + i, g->ordinals[i]);
    if (r == NCCL_API_IN_PROGRESS) r = NCCL_API_OK;
  }
  int end = g->api->group_end();
  if (r == NCCL_API_OK && end != NCCL_API_IN_PROGRESS) r = end;
  char what[96];
  snprintf(what, sizeof what, "the communicators of %d GPUs (GPU %d of this rank is rank %d)",
           (int)c->size, (int)g->ordinals[0], (int)c->first_rank);
  if (r != NCCL_API_OK) return call_failed(g, c->comm[0], r, "making", what);
  if ((st = poll(g, false, "making", what)) != CNNB_OK) return st;
  *out = c;
  return CNNB_OK;
}

int32_t nccl_comms_size(const nccl_comms *c) { return c->size; }
bool nccl_comms_member(const nccl_comms *c) { return c->member; }

cnnb_status nccl_comms_premul(nccl_comms *c, float scale) {
  nccl_gpus *g = c->g;
  if (!c->member) return CNNB_OK;
  if (c->premul)
    return cnnb_error(g->ctx, CNNB_EINTERNAL, "%s: a second premultiplied sum", g->who);
  c->premul = malloc((size_t)g->n * TYPES * sizeof *c->premul);
  if (!c->premul) return cnnb_error(g->ctx, CNNB_ENOMEM, "%s: out of memory", g->who);
  for (int32_t k = 0; k < g->n * TYPES; k++) c->premul[k] = -1;
  static const int32_t types[TYPES] = {NCCL_API_FLOAT32, NCCL_API_FLOAT16, NCCL_API_BFLOAT16};
  for (int32_t i = 0; i < g->n; i++)
    for (int t = 0; t < TYPES; t++) {
      int r = g->api->premul_sum(c->comm[i], scale, types[t], &c->premul[i * TYPES + t]);
      if (r != NCCL_API_OK) return call_failed(g, c->comm[i], r, "making", "a premultiplied sum");
    }
  return CNNB_OK;
}

/* ---- collectives ----------------------------------------------------------------------- */

typedef enum kind { ALL_REDUCE, REDUCE, BROADCAST } kind;

static const char *doing_of(kind k) {
  return k == ALL_REDUCE ? "all-reducing" : k == REDUCE ? "reducing" : "broadcasting";
}

/* One group over the local GPUs: `pieces` collectives of consecutive elements each. */
static cnnb_status collective(nccl_comms *c, kind k, void *const *bufs, int64_t count, int32_t type,
                              int32_t op, int32_t root, int32_t pieces, const char *what) {
  nccl_gpus *g = c->g;
  const char *doing = doing_of(k);
  cnnb_status st = check_usable(g, doing, what);
  if (st != CNNB_OK || !c->member || count <= 0) return st;
  if (op == NCCL_GPUS_PREMUL && !c->premul)
    return cnnb_error(g->ctx, CNNB_EINTERNAL, "%s: %s %s with no premultiplied sum made", g->who,
                      doing, what);
  if (pieces < 1) pieces = 1;
  size_t size = (size_t)nccl_type_size(type);
  int r = g->api->group_start();
  nccl_comm *failed = NULL;
  for (int32_t p = 0; r == NCCL_API_OK && p < pieces; p++) {
    int64_t lo = count * p / pieces, hi = count * (p + 1) / pieces;
    for (int32_t i = 0; r == NCCL_API_OK && hi > lo && i < g->n; i++) {
      void *at = (char *)bufs[i] + (size_t)lo * size;
      int32_t o = op == NCCL_GPUS_PREMUL ? c->premul[i * TYPES + type_index(type)] : op;
      r = k == ALL_REDUCE ? g->api->all_reduce(c->comm[i], at, at, hi - lo, type, o, g->streams[i])
          : k == REDUCE ? g->api->reduce(c->comm[i], at, at, hi - lo, type, o, root, g->streams[i])
                        : g->api->broadcast(c->comm[i], at, at, hi - lo, type, root, g->streams[i]);
      if (r == NCCL_API_IN_PROGRESS) r = NCCL_API_OK;
      if (r != NCCL_API_OK) failed = c->comm[i];
    }
  }
  int end = g->api->group_end();
  if (r == NCCL_API_OK && end != NCCL_API_IN_PROGRESS) r = end;
  g->pending = true;
  if (r != NCCL_API_OK) return call_failed(g, failed ? failed : c->comm[0], r, doing, what);
  /* A non-blocking group may still be enqueuing: the streams are NCCL's until it is done. */
  return poll(g, false, doing, what);
}

cnnb_status nccl_all_reduce(nccl_comms *c, void *const *bufs, int64_t count, int32_t type,
                            int32_t op, int32_t pieces, const char *what) {
  return collective(c, ALL_REDUCE, bufs, count, type, op, 0, pieces, what);
}

cnnb_status nccl_reduce(nccl_comms *c, void *const *bufs, int64_t count, int32_t type, int32_t op,
                        int32_t root, const char *what) {
  return collective(c, REDUCE, bufs, count, type, op, root, 1, what);
}

cnnb_status nccl_broadcast(nccl_comms *c, void *const *bufs, int64_t count, int32_t type,
                           int32_t root, const char *what) {
  return collective(c, BROADCAST, bufs, count, type, NCCL_API_SUM, root, 1, what);
}

cnnb_status nccl_convert(nccl_gpus *g, void *const *src, int32_t from, void *const *dst, int32_t to,
                         int64_t count, float scale, const char *what) {
  cnnb_status st = check_usable(g, "converting", what);
  if (st != CNNB_OK || count <= 0) return st;
  for (int32_t i = 0; i < g->n; i++) {
    int r = g->api->convert(g->ordinals[i], g->streams[i], src[i], from, dst[i], to, count, scale);
    if (r != NCCL_API_OK) {
      st = cnnb_error(g->ctx, CNNB_EIO, "%s: converting %s from %s to %s on GPU %d: %s", g->who,
                      what, nccl_type_name(from), nccl_type_name(to), (int)g->ordinals[i],
                      g->api->last_error(NULL));
      abort_all(g); /* the other ranks' collectives then end at their deadline */
      return st;
    }
  }
  g->pending = true;
  return CNNB_OK;
}

cnnb_status nccl_gpus_wait(nccl_gpus *g, const char *what) {
  cnnb_status st = check_usable(g, "waiting for", what);
  if (st != CNNB_OK || !g->pending) return st;
  for (int32_t i = 0; i < g->n; i++) {
    int r = g->api->event_record(g->events[i], g->streams[i]);
    if (r != NCCL_API_OK) {
      st = cnnb_error(g->ctx, CNNB_EIO, "%s: cudaEventRecord on GPU %d: %s", g->who,
                      (int)g->ordinals[i], g->api->last_error(NULL));
      abort_all(g);
      return st;
    }
  }
  g->pending = false;
  return poll(g, true, "waiting for", what);
}
