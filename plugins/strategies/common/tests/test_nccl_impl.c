/* test_nccl_impl.c — the strategies' NCCL implementation (plugins/strategies/nccl_impl,
 * <plugins>/nccl/libcnnb_nccl_impl.so) on any machine, GPU or not: a strategy plugin
 * loads without mapping NCCL; the implementation loads with every symbol resolved (it is
 * the one that links NCCL), exports its entry alone, gives the table of the plugins'
 * version with every slot filled, names the NCCL and CUDA runtime it was built with, and
 * says in one line why it cannot run where it cannot. Skips (77) where it is not built
 * (no NCCL at configure time, sanitizer builds). The collectives themselves are checked
 * against the recording stub (cli_strategy_nccl) and on a GPU (cli_gpu_nccl).
 *
 * In the test-only tree against the fake CUDA (CNNB_CUDA_FAKE=1 from ctest), the same
 * implementation links the fake (plugins/devices/cuda/fake) instead of NCCL, runs, and
 * the table is driven here over the fake's two GPUs: the collectives' numbers (fp32, fp16,
 * bf16 sums rounded once, averages, premultiplied sums, reduce, broadcast, the 16-bit
 * copies), communicators driven by two threads, NCCL's own refusals (two ranks on one GPU,
 * a clique across processes), and every misuse the fake is there to catch, each in a child
 * process that must die naming it. */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compact16.h"
#include "nccl_api.h"

static char impl_path[4096], plugin_path[4096];
static int fake; /* CNNB_CUDA_FAKE=1: the implementation runs on the fake CUDA */
#define FAKE_LIBRARY "libcnnb_fake_cuda.so"

START_TEST(strategy_plugin_maps_no_nccl) {
  /* Its SDK symbols come from this executable (ENABLE_EXPORTS). */
  void *plugin = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(plugin != NULL, "%s", dlerror());
  ck_assert_ptr_nonnull(dlsym(plugin, "cnnb_plugin_entry"));
  ck_assert_msg(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD) == NULL,
                "loading the replicated plugin mapped libnccl.so.2");
  dlclose(plugin);
}
END_TEST

START_TEST(implementation_fills_the_table) {
  void *lib = dlopen(impl_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(lib != NULL, "%s", dlerror());
  if (fake) { /* it links the fake's NCCL instead of NVIDIA's */
    ck_assert_msg(dlopen(FAKE_LIBRARY, RTLD_NOW | RTLD_NOLOAD) != NULL, "%s is not mapped",
                  FAKE_LIBRARY);
    ck_assert_msg(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD) == NULL,
                  "the fake tree's implementation mapped libnccl.so.2");
  } else { /* it links NCCL itself, so NCCL is mapped now */
    ck_assert_msg(dlopen(FAKE_LIBRARY, RTLD_NOW | RTLD_NOLOAD) == NULL,
                  "%s links the fake CUDA: run this test with CNNB_CUDA_FAKE=1 (ctest sets it "
                  "in a -DCNNB_CUDA_FAKE=ON tree)",
                  impl_path);
    ck_assert_ptr_nonnull(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD));
  }
  void *sym = dlsym(lib, NCCL_API_ENTRY);
  ck_assert_msg(sym != NULL, "%s exports no %s", impl_path, NCCL_API_ENTRY);
  /* Its own functions stay hidden (impl.map). */
  ck_assert_ptr_null(dlsym(lib, "nccl_convert_launch"));
  ck_assert_ptr_null(dlsym(lib, "all_reduce"));
  nccl_api_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  const nccl_api *api = entry();
  ck_assert_ptr_nonnull(api);
  ck_assert_uint_ge(api->struct_size, sizeof(nccl_api));
  ck_assert_str_eq(api->version, NCCL_API_VERSION);
  const void *slots[] = {api->unavailable,   api->describe,       api->last_error,
                         api->get_unique_id, api->comm_init_rank, api->group_start,
                         api->group_end,     api->all_reduce,     api->reduce,
                         api->broadcast,     api->premul_sum,     api->op_destroy,
                         api->comm_status,   api->comm_finalize,  api->comm_destroy,
                         api->comm_abort,    api->event_create,   api->event_record,
                         api->event_query,   api->event_destroy,  api->convert};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    ck_assert_msg(slots[i] != NULL, "slot %zu is NULL", i);
  /* ncclGetVersion and cudaRuntimeGetVersion need no GPU. */
  const char *what = api->describe();
  ck_assert_msg(strncmp(what, "NCCL 2.", 7) == 0 && strstr(what, "(CUDA runtime ") != NULL,
                "describe: %s", what);
  printf("test_nccl_impl: %s\n", what);
  const char *why = api->unavailable();
  /* The fake's driver loads and shows its GPUs: nothing is missing. */
  if (fake) ck_assert_msg(why == NULL, "the fake cannot run: %s", why);
  if (why) { /* no GPU here: one line, the same every time */
    printf("test_nccl_impl: cannot run here: %s\n", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    ck_assert_uint_gt(strlen(why), 10);
    ck_assert_str_eq(api->unavailable(), why);
    if (access("/dev/nvidiactl", F_OK) != 0 && !dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD))
      ck_assert_msg(strstr(why, "libcuda.so.1") || strstr(why, "GPU") || strstr(why, "CUDA"),
                    "the reason names neither the driver nor a GPU: %s", why);
  }
  dlclose(lib);
}
END_TEST

/* ---- on the fake CUDA (CNNB_CUDA_FAKE) ------------------------------------------------- */

/* The fake's runtime calls the tests need, from the library the implementation mapped. */
static struct {
  const nccl_api *api;
  int (*set_device)(int device);
  int (*malloc)(void **p, size_t bytes);
  int (*free)(void *p);
  int (*stream_create)(void **stream);
  int (*stream_destroy)(void *stream);
} cuda;

static void find(void *lib, const char *name, void *fn, size_t size) {
  void *p = dlsym(lib, name);
  ck_assert_msg(p != NULL, "%s has no %s", FAKE_LIBRARY, name);
  memcpy(fn, &p, size);
}

static const nccl_api *load_fake(void) {
  if (cuda.api) return cuda.api;
  void *lib = dlopen(impl_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(lib != NULL, "%s", dlerror());
  void *sym = dlsym(lib, NCCL_API_ENTRY);
  ck_assert_ptr_nonnull(sym);
  nccl_api_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  void *f = dlopen(FAKE_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  ck_assert_msg(f != NULL, "%s is not mapped by %s", FAKE_LIBRARY, impl_path);
  find(f, "cudaSetDevice", &cuda.set_device, sizeof cuda.set_device);
  find(f, "cudaMalloc", &cuda.malloc, sizeof cuda.malloc);
  find(f, "cudaFree", &cuda.free, sizeof cuda.free);
  find(f, "cudaStreamCreate", &cuda.stream_create, sizeof cuda.stream_create);
  find(f, "cudaStreamDestroy", &cuda.stream_destroy, sizeof cuda.stream_destroy);
  cuda.api = entry();
  ck_assert_ptr_null(cuda.api->unavailable());
  return cuda.api;
}

/* "Device" memory of the fake is host memory: the tests write and read it directly. */
static void *device_buffer(int ordinal, size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(cuda.set_device(ordinal), 0);
  ck_assert_int_eq(cuda.malloc(&p, bytes), 0);
  return p;
}

static void *device_stream(int ordinal) {
  void *s = NULL;
  ck_assert_int_eq(cuda.set_device(ordinal), 0);
  ck_assert_int_eq(cuda.stream_create(&s), 0);
  return s;
}

/* Polls every communicator until none is in progress; returns the first other answer. */
static int settle(nccl_comm **comm, int n) {
  for (int polls = 0; polls < 1000; polls++) {
    int busy = 0;
    for (int i = 0; i < n; i++) {
      int r = cuda.api->comm_status(comm[i]);
      if (r == NCCL_API_IN_PROGRESS) busy = 1;
      else if (r != NCCL_API_OK) return r;
    }
    if (!busy) return NCCL_API_OK;
  }
  return NCCL_API_IN_PROGRESS;
}

/* n communicators of one clique, rank i on GPU ordinals[i], made in one group and polled,
 * as nccl_gpus.c makes them. */
static void make_comms(nccl_comm **comm, int n, const int *ordinals) {
  const nccl_api *api = cuda.api;
  nccl_unique_id id;
  ck_assert_int_eq(api->get_unique_id(&id), NCCL_API_OK);
  ck_assert_int_eq(api->group_start(), NCCL_API_OK);
  for (int i = 0; i < n; i++) {
    int r = api->comm_init_rank(&comm[i], n, &id, i, ordinals[i]);
    ck_assert_msg(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS, "init: %d", r);
  }
  int r = api->group_end();
  ck_assert_msg(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS, "group end: %d", r);
  ck_assert_int_eq(settle(comm, n), NCCL_API_OK);
}

static void end_comms(nccl_comm **comm, int n) {
  for (int i = 0; i < n; i++) {
    int r = cuda.api->comm_finalize(comm[i]);
    ck_assert_msg(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS, "finalize: %d", r);
  }
  ck_assert_int_eq(settle(comm, n), NCCL_API_OK);
  for (int i = 0; i < n; i++) ck_assert_int_eq(cuda.api->comm_destroy(comm[i]), NCCL_API_OK);
}

/* One group of every rank's call, polled: how the strategies issue a collective. */
typedef enum { ALL_REDUCE, REDUCE, BROADCAST } kind;
static void grouped(kind k, nccl_comm **comm, int n, void **buf, int64_t count, int32_t type,
                    const int32_t *ops, int32_t root, void **streams) {
  const nccl_api *api = cuda.api;
  ck_assert_int_eq(api->group_start(), NCCL_API_OK);
  for (int i = 0; i < n; i++) {
    int r = k == ALL_REDUCE
                ? api->all_reduce(comm[i], buf[i], buf[i], count, type, ops[i], streams[i])
            : k == REDUCE
                ? api->reduce(comm[i], buf[i], buf[i], count, type, ops[i], root, streams[i])
                : api->broadcast(comm[i], buf[i], buf[i], count, type, root, streams[i]);
    ck_assert_msg(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS, "call %d: %d", i, r);
  }
  int r = api->group_end();
  ck_assert_msg(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS, "group end: %d (%s)", r,
                api->last_error(comm[0]));
  ck_assert_int_eq(settle(comm, n), NCCL_API_OK);
}

static const int two_gpus[2] = {0, 1};

START_TEST(fake_collectives_compute) {
  const nccl_api *api = load_fake();
  nccl_comm *comm[2];
  make_comms(comm, 2, two_gpus);
  void *streams[2] = {device_stream(0), device_stream(1)};
  enum { N = 6 };
  float *f[2] = {device_buffer(0, N * 4), device_buffer(1, N * 4)};
  void *fb[2] = {f[0], f[1]};
  const float a[N] = {1, -2, 0.5f, 1e8f, 3, 7}, b[N] = {2, 5, 0.25f, 1, -3, 9};
  memcpy(f[0], a, sizeof a);
  memcpy(f[1], b, sizeof b);
  const int32_t sum[2] = {NCCL_API_SUM, NCCL_API_SUM}, avg[2] = {NCCL_API_AVG, NCCL_API_AVG};
  grouped(ALL_REDUCE, comm, 2, fb, N, NCCL_API_FLOAT32, sum, 0, streams);
  for (int i = 0; i < N; i++)
    for (int r = 0; r < 2; r++) ck_assert_float_eq(f[r][i], a[i] + b[i]);
  memcpy(f[0], a, sizeof a);
  memcpy(f[1], b, sizeof b);
  grouped(ALL_REDUCE, comm, 2, fb, N, NCCL_API_FLOAT32, avg, 0, streams);
  for (int i = 0; i < N; i++)
    for (int r = 0; r < 2; r++) ck_assert_float_eq(f[r][i], (a[i] + b[i]) / 2);

  /* Premultiplied sums, each rank its own scale: 0.5 * a + 0.25 * b. */
  int32_t premul[2];
  ck_assert_int_eq(api->premul_sum(comm[0], 0.5f, NCCL_API_FLOAT32, &premul[0]), NCCL_API_OK);
  ck_assert_int_eq(api->premul_sum(comm[1], 0.25f, NCCL_API_FLOAT32, &premul[1]), NCCL_API_OK);
  memcpy(f[0], a, sizeof a);
  memcpy(f[1], b, sizeof b);
  grouped(ALL_REDUCE, comm, 2, fb, N, NCCL_API_FLOAT32, premul, 0, streams);
  for (int i = 0; i < N; i++)
    for (int r = 0; r < 2; r++) ck_assert_float_eq(f[r][i], 0.5f * a[i] + 0.25f * b[i]);
  for (int r = 0; r < 2; r++) ck_assert_int_eq(api->op_destroy(comm[r], premul[r]), NCCL_API_OK);

  /* Reduce into root 1: rank 0's buffer is left alone. Broadcast from root 0. */
  memcpy(f[0], a, sizeof a);
  memcpy(f[1], b, sizeof b);
  grouped(REDUCE, comm, 2, fb, N, NCCL_API_FLOAT32, sum, 1, streams);
  for (int i = 0; i < N; i++) {
    ck_assert_float_eq(f[0][i], a[i]);
    ck_assert_float_eq(f[1][i], a[i] + b[i]);
  }
  grouped(BROADCAST, comm, 2, fb, N, NCCL_API_FLOAT32, sum, 0, streams);
  for (int i = 0; i < N; i++) ck_assert_float_eq(f[1][i], a[i]);

  /* 16-bit sums: accumulated in fp32, rounded once to nearest even. 1 + 2^-11 is a tie in
   * fp16 (to 1), 1 + 3 * 2^-12 rounds up to 1 + 2^-10; in bf16 1 + 2^-8 is a tie, 1 +
   * 3 * 2^-9 rounds up to 1 + 2^-7. */
  uint16_t *h[2] = {device_buffer(0, 4 * 2), device_buffer(1, 4 * 2)};
  void *hb[2] = {h[0], h[1]};
  const float ha[4] = {1, 1, 1, 1}, hbv[4] = {0x1p-11f, 0x3p-12f, 0x1p-8f, 0x3p-9f};
  for (int i = 0; i < 2; i++) {
    h[0][i] = compact16_fp16_from_f32(ha[i]);
    h[1][i] = compact16_fp16_from_f32(hbv[i]);
  }
  grouped(ALL_REDUCE, comm, 2, hb, 2, NCCL_API_FLOAT16, sum, 0, streams);
  for (int r = 0; r < 2; r++) {
    ck_assert_float_eq(compact16_fp16_to_f32(h[r][0]), 1.0f);
    ck_assert_float_eq(compact16_fp16_to_f32(h[r][1]), 1.0f + 0x1p-10f);
  }
  for (int i = 0; i < 2; i++) {
    h[0][i] = compact16_bf16_from_f32(ha[2 + i]);
    h[1][i] = compact16_bf16_from_f32(hbv[2 + i]);
  }
  grouped(ALL_REDUCE, comm, 2, hb, 2, NCCL_API_BFLOAT16, sum, 0, streams);
  for (int r = 0; r < 2; r++) {
    ck_assert_float_eq(compact16_bf16_to_f32(h[r][0]), 1.0f);
    ck_assert_float_eq(compact16_bf16_to_f32(h[r][1]), 1.0f + 0x1p-7f);
  }

  /* The 16-bit copies of --compact_gradient_transfer, with a scale, and back. */
  memcpy(f[0], a, sizeof a);
  uint16_t *c16 = device_buffer(0, N * 2);
  ck_assert_int_eq(api->convert(0, streams[0], f[0], NCCL_API_FLOAT32, c16, NCCL_API_BFLOAT16, N,
                                2.0f),
                   NCCL_API_OK);
  for (int i = 0; i < N; i++) ck_assert_uint_eq(c16[i], compact16_bf16_from_f32(2 * a[i]));
  ck_assert_int_eq(api->convert(0, streams[0], c16, NCCL_API_BFLOAT16, f[0], NCCL_API_FLOAT32, N,
                                0.5f),
                   NCCL_API_OK);
  for (int i = 0; i < N; i++)
    ck_assert_float_eq(f[0][i], compact16_bf16_to_f32(compact16_bf16_from_f32(2 * a[i])) * 0.5f);

  /* Events: the fake's work is done when enqueued. */
  nccl_event *e;
  ck_assert_int_eq(api->event_create(1, &e), NCCL_API_OK);
  ck_assert_int_eq(api->event_record(e, streams[1]), NCCL_API_OK);
  ck_assert_int_eq(api->event_query(e), NCCL_API_OK);
  api->event_destroy(e);

  end_comms(comm, 2);
  for (int r = 0; r < 2; r++) {
    cuda.free(f[r]);
    cuda.free(h[r]);
    cuda.stream_destroy(streams[r]);
  }
  cuda.free(c16);
}
END_TEST

/* A communicator of one rank completes at once (horovod's single process). */
START_TEST(fake_single_rank) {
  const nccl_api *api = load_fake();
  nccl_comm *comm;
  nccl_unique_id id;
  ck_assert_int_eq(api->get_unique_id(&id), NCCL_API_OK);
  int r = api->comm_init_rank(&comm, 1, &id, 0, 1);
  ck_assert(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS);
  ck_assert_int_eq(settle(&comm, 1), NCCL_API_OK);
  void *stream = device_stream(1);
  float *x = device_buffer(1, 3 * 4);
  x[0] = 1, x[1] = 2, x[2] = 3;
  void *xb[1] = {x};
  const int32_t avg[1] = {NCCL_API_AVG};
  grouped(ALL_REDUCE, &comm, 1, xb, 3, NCCL_API_FLOAT32, avg, 0, &stream);
  ck_assert_float_eq(x[2], 3);
  end_comms(&comm, 1);
  cuda.free(x);
  cuda.stream_destroy(stream);
}
END_TEST

/* Two threads, each driving one rank outside any group: each call waits for the other. */
typedef struct driver {
  nccl_comm *comm;
  float *buf;
  void *stream;
  int result;
} driver;

static void *drive(void *arg) {
  driver *d = arg;
  d->result = cuda.api->all_reduce(d->comm, d->buf, d->buf, 4, NCCL_API_FLOAT32, NCCL_API_SUM,
                                   d->stream);
  if (d->result == NCCL_API_IN_PROGRESS) d->result = settle(&d->comm, 1);
  return NULL;
}

START_TEST(fake_two_threads) {
  load_fake();
  nccl_comm *comm[2];
  make_comms(comm, 2, two_gpus);
  driver d[2];
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    d[r] = (driver){comm[r], device_buffer(r, 16), device_stream(r), -1};
    for (int i = 0; i < 4; i++) d[r].buf[i] = (float)(i + 10 * r);
  }
  for (int r = 0; r < 2; r++) ck_assert_int_eq(pthread_create(&t[r], NULL, drive, &d[r]), 0);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < 2; r++) {
    ck_assert_int_eq(d[r].result, NCCL_API_OK);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(d[r].buf[i], (float)(2 * i + 10));
  }
  end_comms(comm, 2);
  for (int r = 0; r < 2; r++) {
    cuda.free(d[r].buf);
    cuda.stream_destroy(d[r].stream);
  }
}
END_TEST

/* A rank waiting for its peer's call, and the peer aborted (the strategies' fault path):
 * the waiting call ends with a remote error, and the communicator reports it. */
START_TEST(fake_abort_ends_a_wait) {
  const nccl_api *api = load_fake();
  nccl_comm *comm[2];
  make_comms(comm, 2, two_gpus);
  driver d = {comm[0], device_buffer(0, 16), device_stream(0), -1};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, drive, &d), 0);
  usleep(100 * 1000); /* it waits for rank 1, which this thread drives and never calls */
  ck_assert_int_eq(api->comm_abort(comm[1]), NCCL_API_OK);
  pthread_join(t, NULL);
  ck_assert_int_eq(d.result, NCCL_API_REMOTE_ERROR);
  ck_assert_int_eq(api->comm_status(comm[0]), NCCL_API_REMOTE_ERROR);
  ck_assert_msg(strstr(api->last_error(comm[0]), "rank 1 of clique") != NULL, "%s",
                api->last_error(comm[0]));
  ck_assert_int_eq(api->comm_abort(comm[0]), NCCL_API_OK);
  cuda.free(d.buf);
  cuda.stream_destroy(d.stream);
}
END_TEST

/* NCCL's own refusal, reported rather than fatal: two ranks of a clique on one GPU. */
START_TEST(fake_duplicate_gpu_refused) {
  const nccl_api *api = load_fake();
  nccl_comm *comm[2];
  const int same[2] = {1, 1};
  nccl_unique_id id;
  ck_assert_int_eq(api->get_unique_id(&id), NCCL_API_OK);
  ck_assert_int_eq(api->group_start(), NCCL_API_OK);
  for (int i = 0; i < 2; i++) api->comm_init_rank(&comm[i], 2, &id, i, same[i]);
  api->group_end();
  ck_assert_int_eq(settle(comm, 2), NCCL_API_INVALID_USAGE);
  ck_assert_msg(strstr(api->last_error(comm[0]), "Duplicate GPU detected") != NULL, "%s",
                api->last_error(comm[0]));
  for (int i = 0; i < 2; i++) ck_assert_int_eq(api->comm_abort(comm[i]), NCCL_API_OK);
}
END_TEST

/* A clique across processes: the joining process is refused at its init, and the maker's
 * communicator learns it from the marker, so neither waits for its timeout. */
START_TEST(fake_spans_one_process) {
  const nccl_api *api = load_fake();
  nccl_unique_id id;
  nccl_comm *mine;
  ck_assert_int_eq(api->get_unique_id(&id), NCCL_API_OK);
  int r = api->comm_init_rank(&mine, 2, &id, 0, 0);
  ck_assert(r == NCCL_API_OK || r == NCCL_API_IN_PROGRESS);
  ck_assert_int_eq(api->comm_status(mine), NCCL_API_IN_PROGRESS); /* rank 1 not there */
  fflush(NULL);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    nccl_comm *theirs = NULL;
    int refused = api->comm_init_rank(&theirs, 2, &id, 1, 1);
    const char *why = api->last_error(NULL);
    _exit(refused == NCCL_API_INVALID_USAGE && !theirs &&
                  strstr(why, "the fake NCCL spans one process") != NULL
              ? 0
              : 1);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the other process's init was not refused saying why");
  ck_assert_int_eq(api->comm_status(mine), NCCL_API_INVALID_USAGE);
  ck_assert_msg(strstr(api->last_error(mine), "the fake NCCL spans one process") != NULL, "%s",
                api->last_error(mine));
  ck_assert_int_eq(api->comm_abort(mine), NCCL_API_OK);
}
END_TEST

/* ---- misuse: each in a child process, which must die by the fake's abort naming it ---- */

typedef void (*misuse_fn)(void);

static void dies(misuse_fn body, const char *needle) {
  load_fake();
  int pipe_fds[2];
  ck_assert_int_eq(pipe(pipe_fds), 0);
  fflush(NULL);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    body();
    fprintf(stderr, "(the misuse went unnoticed)\n");
    _exit(0);
  }
  close(pipe_fds[1]);
  char text[4096];
  size_t used = 0;
  ssize_t got;
  while (used < sizeof text - 1 &&
         (got = read(pipe_fds[0], text + used, sizeof text - 1 - used)) > 0)
    used += (size_t)got;
  text[used] = '\0';
  close(pipe_fds[0]);
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                "the child did not abort (status %#x): %s", status, text);
  const char *said = strstr(text, "fake CUDA: ");
  ck_assert_msg(said && strstr(text, needle), "the abort does not say \"%s\": %s", needle, text);
  printf("  %.*s\n", (int)strcspn(said, "\n"), said);
}

static nccl_comm *pair[2];
static void *pair_streams[2];
static float *pair_buf[2];

static void make_pair(void) {
  make_comms(pair, 2, two_gpus);
  for (int r = 0; r < 2; r++) {
    pair_streams[r] = device_stream(r);
    pair_buf[r] = device_buffer(r, 16 * 4);
  }
}

static void all_reduce_on(int r, int64_t count, int32_t op) {
  cuda.api->all_reduce(pair[r], pair_buf[r], pair_buf[r], count, NCCL_API_FLOAT32, op,
                       pair_streams[r]);
}

static void outside_group(void) {
  make_pair();
  all_reduce_on(0, 4, NCCL_API_SUM); /* rank 1 is this thread's too: it would block forever */
}

static void mismatched_counts(void) {
  make_pair();
  cuda.api->group_start();
  all_reduce_on(0, 4, NCCL_API_SUM);
  all_reduce_on(1, 5, NCCL_API_SUM);
  cuda.api->group_end();
}

static void mismatched_ops(void) {
  make_pair();
  cuda.api->group_start();
  all_reduce_on(0, 4, NCCL_API_SUM);
  all_reduce_on(1, 4, NCCL_API_AVG);
  cuda.api->group_end();
}

static void mismatched_roots(void) {
  make_pair();
  cuda.api->group_start();
  for (int r = 0; r < 2; r++)
    cuda.api->broadcast(pair[r], pair_buf[r], pair_buf[r], 4, NCCL_API_FLOAT32, r, pair_streams[r]);
  cuda.api->group_end();
}

static void one_rank_missing_from_group(void) {
  make_pair();
  cuda.api->group_start();
  all_reduce_on(0, 4, NCCL_API_SUM);
  cuda.api->group_end();
}

static void group_end_alone(void) { cuda.api->group_end(); }

static void *open_group_and_leave(void *arg) {
  cuda.api->group_start();
  return arg;
}

static void thread_ends_in_group(void) {
  pthread_t t;
  pthread_create(&t, NULL, open_group_and_leave, NULL);
  pthread_join(t, NULL);
}

static void after_destroy(void) {
  make_pair();
  cuda.api->comm_destroy(pair[0]);
  cuda.api->group_start();
  all_reduce_on(0, 4, NCCL_API_SUM);
}

static void after_finalize(void) {
  make_pair();
  cuda.api->comm_finalize(pair[0]);
  settle(pair, 1);
  cuda.api->group_start();
  all_reduce_on(0, 4, NCCL_API_SUM);
}

static void destroy_before_finalize_ends(void) {
  make_pair();
  cuda.api->comm_finalize(pair[0]); /* in progress, never polled */
  cuda.api->comm_destroy(pair[0]);
}

static void before_polling(void) {
  nccl_unique_id id;
  cuda.api->get_unique_id(&id);
  cuda.api->group_start();
  for (int r = 0; r < 2; r++) cuda.api->comm_init_rank(&pair[r], 2, &id, r, r);
  cuda.api->group_end();
  pair_buf[0] = device_buffer(0, 64);
  pair_streams[0] = device_stream(0);
  cuda.api->group_start();
  all_reduce_on(0, 4, NCCL_API_SUM); /* without polling the init to success first */
}

static void past_allocation(void) {
  make_pair();
  cuda.api->group_start();
  all_reduce_on(0, 17, NCCL_API_SUM); /* 16 floats allocated */
}

static void host_buffer(void) {
  make_pair();
  static float host[16];
  cuda.api->group_start();
  cuda.api->all_reduce(pair[0], host, host, 16, NCCL_API_FLOAT32, NCCL_API_SUM, pair_streams[0]);
}

static void null_buffer(void) {
  make_pair();
  cuda.api->group_start();
  cuda.api->all_reduce(pair[0], NULL, NULL, 4, NCCL_API_FLOAT32, NCCL_API_SUM, pair_streams[0]);
}

static void partial_overlap(void) {
  make_pair();
  cuda.api->group_start();
  cuda.api->all_reduce(pair[0], pair_buf[0], pair_buf[0] + 2, 4, NCCL_API_FLOAT32, NCCL_API_SUM,
                       pair_streams[0]);
}

static void destroyed_op(void) {
  make_pair();
  int32_t op;
  cuda.api->premul_sum(pair[0], 0.5f, NCCL_API_FLOAT32, &op);
  cuda.api->op_destroy(pair[0], op);
  cuda.api->group_start();
  all_reduce_on(0, 4, op);
}

static void *drive_rank0(void *arg) {
  all_reduce_on(0, 4, NCCL_API_SUM); /* rank 1's driver (this process's main) never comes */
  return arg;
}

static void waits_too_long(void) {
  setenv("CNNB_FAKE_NCCL_WAIT_S", "1", 1);
  make_pair();
  pthread_t t;
  pthread_create(&t, NULL, drive_rank0, NULL);
  pthread_join(t, NULL);
}

static void convert_out_of_bounds(void) {
  make_pair();
  void *small = device_buffer(0, 8);
  cuda.api->convert(0, pair_streams[0], pair_buf[0], NCCL_API_FLOAT32, small, NCCL_API_FLOAT16, 16,
                    1.0f);
}

START_TEST(fake_misuse_fails_loudly) {
  static const struct {
    misuse_fn body;
    const char *needle;
  } cases[] = {
      {outside_group, "ncclAllReduce: illegal sequence"},
      {one_rank_missing_from_group, "ncclGroupEnd: illegal sequence"},
      {mismatched_counts, "rank 1 (GPU 1) gives 5 x ncclFloat32, rank 0 (GPU 0) gave 4"},
      {mismatched_ops, "reduces with ncclAvg"},
      {mismatched_roots, "gives root 1"},
      {group_end_alone, "ncclGroupEnd: ncclGroupEnd without ncclGroupStart"},
      {thread_ends_in_group, "the thread ended inside 1 group"},
      {after_destroy, "used after ncclCommDestroy"},
      {after_finalize, "used after ncclCommFinalize"},
      {destroy_before_finalize_ends, "ncclCommDestroy: rank 0 of 2"},
      {before_polling, "polled with ncclCommGetAsyncError"},
      {past_allocation, "runs past its allocation"},
      {host_buffer, "is not inside a live device allocation"},
      {null_buffer, "sendbuff is NULL"},
      {partial_overlap, "overlap by part"},
      {destroyed_op, "is no live premultiplied sum"},
      {waits_too_long, "waited 1 s for rank(s) 1"},
      {convert_out_of_bounds, "nccl_convert_launch: dst"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    printf("test_nccl_impl: misuse %zu: expecting \"%s\"\n", i, cases[i].needle);
    dies(cases[i].body, cases[i].needle);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nccl_impl");
  TCase *tc = tcase_create("nccl_impl");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, strategy_plugin_maps_no_nccl);
  tcase_add_test(tc, implementation_fills_the_table);
  suite_add_tcase(s, tc);
  if (fake) {
    TCase *on_fake = tcase_create("on the fake CUDA");
    tcase_set_timeout(on_fake, 300);
    tcase_add_test(on_fake, fake_collectives_compute);
    tcase_add_test(on_fake, fake_single_rank);
    tcase_add_test(on_fake, fake_two_threads);
    tcase_add_test(on_fake, fake_abort_ends_a_wait);
    tcase_add_test(on_fake, fake_duplicate_gpu_refused);
    tcase_add_test(on_fake, fake_spans_one_process);
    tcase_add_test(on_fake, fake_misuse_fails_loudly);
    suite_add_tcase(s, on_fake);
  }
  return s;
}

int main(void) {
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (!dir) {
    fprintf(stderr, "test_nccl_impl: CNNB_PLUGIN_DIR is not set (run it through ctest)\n");
    return 1;
  }
  const char *on_fake = getenv("CNNB_CUDA_FAKE");
  fake = on_fake && strcmp(on_fake, "1") == 0;
  if (fake) setenv("CNNB_FAKE_CUDA_DEVICES", "2", 1); /* the tests drive GPUs 0 and 1 */
  snprintf(impl_path, sizeof impl_path, "%s/%s", dir, NCCL_API_IMPL_FILE);
  snprintf(plugin_path, sizeof plugin_path, "%s/libcnnb_strategy_replicated.so", dir);
  if (access(impl_path, R_OK) != 0 || access(plugin_path, R_OK) != 0) {
    printf("test_nccl_impl: skipped: the NCCL implementation or the replicated plugin is not "
           "built here (%s)\n",
           impl_path);
    return 77;
  }
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
