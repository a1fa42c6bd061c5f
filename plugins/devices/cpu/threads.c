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
#include <string.h>

#include <sys/mman.h>
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cpu_device.h"

/* Each device finds the runtime's entry points itself, at creation: dlsym on a library
 * already loaded is cheap, and no state outlives the device. */
void cpu_threads_look_up(cpu_device *d) {
  cpu_omp *omp = &d->omp;
  memset(omp, 0, sizeof *omp);
  if (dnnl_version()->cpu_runtime != DNNL_RUNTIME_OMP) return; /* another runtime: leave it be */
  void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return;
  omp->set_num_threads = (void (*)(int))(uintptr_t)dlsym(h, "omp_set_num_threads");
  omp->get_max_threads = (int (*)(void))(uintptr_t)dlsym(h, "omp_get_max_threads");
  omp->get_thread_num = (int (*)(void))(uintptr_t)dlsym(h, "omp_get_thread_num");
  omp->get_num_threads = (int (*)(void))(uintptr_t)dlsym(h, "omp_get_num_threads");
  omp->parallel = (void (*)(void (*)(void *), void *, unsigned,
                            unsigned))(uintptr_t)dlsym(h, "GOMP_parallel");
  dlclose(h); /* RTLD_NOLOAD took a reference; libdnnl holds its own */
  if (!omp->set_num_threads || !omp->get_max_threads || !omp->get_thread_num ||
      !omp->get_num_threads || !omp->parallel)
    memset(omp, 0, sizeof *omp);
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
  if (d->omp.parallel)
    d->omp.parallel(set_ftz_daz, NULL, (unsigned)(d->threads > 0 ? d->threads : 0), 0);
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
      case 'b':
        unit = 1;
        end++;
        break;
      case 'k': end++; break;
      case 'm':
        unit = 1ull << 20;
        end++;
        break;
      case 'g':
        unit = 1ull << 30;
        end++;
        break;
      default: break;
    }
    while (isspace((unsigned char)*end)) end++;
    if (*end == '\0' && n <= SIZE_MAX / unit) return (size_t)(n * unit);
  }
  return 0;
}

/* Under an address-space limit glibc's malloc is costly in threads: a thread's first
 * malloc reserves a 64 MiB arena of its own, taken from what the buffers and oneDNN's
 * kernels need, and a thread that cannot get one (less than 64-128 MiB left) is not sent
 * to an existing arena but maps every allocation separately, a page or more each: the
 * GEMM kernels oneDNN generates in a worker on a first run then took ~90 MiB of 4 KiB
 * mmaps instead of ~6 MiB, and the failing operator new aborted the process (resnet20
 * --forward_only --batch_size=128 under prlimit --as=131M). So when RLIMIT_AS is set, the
 * process's threads share the main arena (M_ARENA_MAX 1), before the pool's threads make
 * theirs; its lock costs little next to the kernels. Without a limit nothing changes. */
static void share_malloc_arena_under_limit(const cpu_device *d) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
  struct rlimit as;
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return;
  if (mallopt(M_ARENA_MAX, 1)) /* the same setting again for a second device: harmless */
    cnnb_log(d->ctx, CNNB_LOG_DEBUG,
             "cpu: address space limited to %llu bytes: threads share one malloc arena",
             (unsigned long long)as.rlim_cur);
#else
  (void)d;
#endif
}

/* When libgomp cannot create a pool thread (under RLIMIT_AS: no address space for its
 * stack) it prints "libgomp: Thread creation failed" and exits the process, so the pool
 * is started only after checking that the stacks of all but the calling thread fit. (A
 * pool another device already started needs nothing more; the check cannot know, and its
 * mmap and munmap cost nothing next to creating a device.) */
cnnb_status cpu_threads_start(cpu_device *d) {
  share_malloc_arena_under_limit(d);
  if (d->omp.parallel && d->threads > 1) {
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
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return cnnb_error(d->ctx, CNNB_ENOMEM,
                        "cpu: out of memory: cannot allocate %zu bytes (%.1f MiB) for the stacks "
                        "of %zu OpenMP thread%s (%.1f MiB each; OMP_STACKSIZE sets it); fewer "
                        "--num_intra_threads need less",
                        bytes, (double)bytes / 1048576.0, workers, workers == 1 ? "" : "s",
                        (double)each / 1048576.0);
    munmap(p, bytes);
  }
  cpu_threads_apply(d);
  cpu_flush_denormals(d);
  return CNNB_OK;
}

void cpu_threads_apply(const cpu_device *d) {
  const cpu_omp *omp = &d->omp;
  if (omp->set_num_threads && d->threads > 0 && omp->get_max_threads() != d->threads) {
    omp->set_num_threads(d->threads);
    cpu_flush_denormals(d); /* the pool may have grown new threads */
  }
}

typedef struct range_job {
  int64_t n, grain;
  cpu_range_fn fn;
  void *ctx;
  const cpu_omp *omp;
} range_job;

static void run_share(void *data) {
  const range_job *job = data;
  int64_t t = job->omp->get_thread_num(), nt = job->omp->get_num_threads();
  int64_t per = (job->n + nt - 1) / nt;
  per = (per + job->grain - 1) / job->grain * job->grain; /* whole grains: vector-friendly */
  int64_t begin = t * per, end = begin + per < job->n ? begin + per : job->n;
  if (begin < end) job->fn(job->ctx, begin, end);
}

void cpu_parallel_for(const cpu_device *d, int64_t n, cpu_range_fn fn, void *ctx) {
  if (n <= 0) return;
  /* Below ~64k elements the fork-join costs more than the loop. */
  if (!d->omp.parallel || d->threads <= 1 || n < 65536) {
    fn(ctx, 0, n);
    return;
  }
  range_job job = {n, 64, fn, ctx, &d->omp};
  d->omp.parallel(run_share, &job, (unsigned)d->threads, 0);
}
