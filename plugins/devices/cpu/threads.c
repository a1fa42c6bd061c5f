/* threads.c — the cpu device's use of the OpenMP pool oneDNN computes on: the thread
 * count, flushing denormals, and a parallel-for for the device's own loops (optimizer
 * update, gradient accumulation, dropout, finiteness).
 *
 * Debian's oneDNN runs on GNU OpenMP. The plugin reaches libgomp through the copy libdnnl
 * already loaded (dlopen RTLD_NOLOAD) instead of compiling with -fopenmp: under clang
 * that would link LLVM's libomp, a second OpenMP runtime with its own threads in the same
 * process. If libgomp cannot be found, everything still works on the calling thread and
 * OMP_NUM_THREADS sets oneDNN's threads. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <sys/mman.h>

#include "cpu_device.h"

typedef void (*set_threads_fn)(int);
typedef int (*get_int_fn)(void);
typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);

static struct {
  int looked;
  set_threads_fn set_num_threads;
  get_int_fn get_max_threads, get_thread_num, get_num_threads;
  gomp_parallel_fn parallel;
} omp;

static void look_up(void) {
  if (omp.looked) return;
  omp.looked = 1;
  if (dnnl_version()->cpu_runtime != DNNL_RUNTIME_OMP) return; /* another runtime: leave it be */
  void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return;
  omp.set_num_threads = (set_threads_fn)(uintptr_t)dlsym(h, "omp_set_num_threads");
  omp.get_max_threads = (get_int_fn)(uintptr_t)dlsym(h, "omp_get_max_threads");
  omp.get_thread_num = (get_int_fn)(uintptr_t)dlsym(h, "omp_get_thread_num");
  omp.get_num_threads = (get_int_fn)(uintptr_t)dlsym(h, "omp_get_num_threads");
  omp.parallel = (gomp_parallel_fn)(uintptr_t)dlsym(h, "GOMP_parallel");
  if (!omp.set_num_threads || !omp.get_max_threads || !omp.get_thread_num ||
      !omp.get_num_threads || !omp.parallel)
    omp.parallel = NULL, omp.set_num_threads = NULL;
}

int cpu_threads_runtime_ok(void) {
  look_up();
  return omp.parallel != NULL;
}

/* Denormal fp32 values (deep nets' tiny gradients) are very slow in x86 vector units;
 * like TF and PyTorch, flush them to zero (FTZ) and read denormal inputs as zero (DAZ).
 * MXCSR is per thread, so it is set on every thread of the pool. */
static void set_ftz_daz(void *unused) {
  (void)unused;
#if defined(__x86_64__) || defined(__i386__)
  unsigned csr;
  __asm__ volatile("stmxcsr %0" : "=m"(csr));
  csr |= 0x8040u; /* FTZ (bit 15) | DAZ (bit 6) */
  __asm__ volatile("ldmxcsr %0" : : "m"(csr));
#endif
}

/* A pool thread's first malloc makes glibc give it an arena of its own, reserving 64 MiB
 * of address space; left to the first step (oneDNN's GEMM mallocs in the workers) that
 * reservation can take the room kept for oneDNN's kernels (util.c) under RLIMIT_AS, so
 * each thread makes it when the pool starts. If glibc cannot, the thread shares another
 * arena: nothing fails. */
static void pool_thread_init(void *unused) {
  set_ftz_daz(unused);
  void *volatile p = malloc(64);
  free(p);
}

void cpu_flush_denormals(const cpu_device *d) {
  set_ftz_daz(NULL);
  look_up();
  if (omp.parallel)
    omp.parallel(pool_thread_init, NULL, (unsigned)(d->threads > 0 ? d->threads : 0), 0);
}

/* libgomp's stack size for its threads: OMP_STACKSIZE, else GOMP_STACKSIZE ("<n>[BKMG]",
 * kilobytes without a suffix), else 0 (the pthread default). */
static size_t env_stacksize(void) {
  const char *names[2] = {"OMP_STACKSIZE", "GOMP_STACKSIZE"};
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(names[i]);
    if (!v) continue;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (end == v || errno) continue;
    while (isspace((unsigned char)*end)) end++;
    unsigned long long unit = 1024;
    switch (tolower((unsigned char)*end)) {
    case 'b': unit = 1; end++; break;
    case 'k': end++; break;
    case 'm': unit = 1ull << 20; end++; break;
    case 'g': unit = 1ull << 30; end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end)) end++;
    if (*end == '\0' && n <= SIZE_MAX / unit) return (size_t)(n * unit);
  }
  return 0;
}

/* When libgomp cannot create a pool thread (under RLIMIT_AS: no address space for its
 * stack) it prints "libgomp: Thread creation failed" and exits the process, so the pool
 * is started only after checking that the stacks of all but the calling thread fit. The
 * pool is the process's: once it has started with n threads, n or fewer need nothing. */
cnnb_status cpu_threads_start(cpu_device *d) {
  static int32_t started; /* threads the pool has started with (devices share it) */
  look_up();
  if (omp.parallel && d->threads > started && d->threads > 1) {
    size_t stack = env_stacksize(), guard = 4096;
    pthread_attr_t attr;
    if (pthread_getattr_default_np(&attr) == 0) {
      size_t v;
      if (!stack && pthread_attr_getstacksize(&attr, &v) == 0) stack = v;
      if (pthread_attr_getguardsize(&attr, &v) == 0) guard = v;
      pthread_attr_destroy(&attr);
    }
    if (!stack) stack = (size_t)8 << 20;
    size_t workers = (size_t)d->threads - 1, each = stack + guard;
    size_t bytes = workers <= SIZE_MAX / each ? workers * each : SIZE_MAX;
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return cnnb_error(d->ctx, CNNB_ENOMEM,
                        "cpu: out of memory: cannot allocate %zu bytes (%.1f MiB) for the stacks "
                        "of %zu OpenMP threads (%.1f MiB each; OMP_STACKSIZE sets it); fewer "
                        "--num_intra_threads need less",
                        bytes, (double)bytes / 1048576.0, workers, (double)each / 1048576.0);
    munmap(p, bytes);
  }
  cpu_threads_apply(d);
  cpu_flush_denormals(d);
  if (omp.parallel && d->threads > started) started = d->threads;
  return CNNB_OK;
}

void cpu_threads_apply(const cpu_device *d) {
  look_up();
  if (omp.set_num_threads && d->threads > 0 && omp.get_max_threads() != d->threads) {
    omp.set_num_threads(d->threads);
    cpu_flush_denormals(d); /* the pool may have grown new threads */
  }
}

typedef struct range_job {
  int64_t n, grain;
  cpu_range_fn fn;
  void *ctx;
} range_job;

static void run_share(void *data) {
  const range_job *job = data;
  int64_t t = omp.get_thread_num(), nt = omp.get_num_threads();
  int64_t per = (job->n + nt - 1) / nt;
  per = (per + job->grain - 1) / job->grain * job->grain; /* whole grains: vector-friendly */
  int64_t begin = t * per, end = begin + per < job->n ? begin + per : job->n;
  if (begin < end) job->fn(job->ctx, begin, end);
}

void cpu_parallel_for(const cpu_device *d, int64_t n, cpu_range_fn fn, void *ctx) {
  if (n <= 0) return;
  look_up();
  /* Below ~64k elements the fork-join costs more than the loop. */
  if (!omp.parallel || d->threads <= 1 || n < 65536) {
    fn(ctx, 0, n);
    return;
  }
  range_job job = {n, 64, fn, ctx};
  omp.parallel(run_share, &job, (unsigned)d->threads, 0);
}
