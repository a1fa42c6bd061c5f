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
#include <dlfcn.h>
#include <stdint.h>

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

void cpu_flush_denormals(const cpu_device *d) {
  set_ftz_daz(NULL);
  look_up();
  if (omp.parallel) omp.parallel(set_ftz_daz, NULL, (unsigned)(d->threads > 0 ? d->threads : 0), 0);
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
