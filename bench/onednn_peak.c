/* onednn_peak.c — the machine's measured convolution peak, to compare cnnbench's achieved
 * GFLOP/s against.
 *
 * Times one large 3x3 convolution (stride 1, pad 1, no bias) through oneDNN's C API in
 * fp32 and in bf16, with oneDNN free to pick its preferred blocked layouts (format_tag
 * any) and the data reordered into them once, outside the timed loop. A convolution this
 * size is about as close to the FMA units' limit as real work gets, so its GFLOP/s is the
 * "peak" the issue means: a ceiling for a training step, which also spends time in
 * batch norm, ReLU, pooling and reorders.
 *
 * Directions: fwd (forward training), bwd_d (backward data), bwd_w (backward weights);
 * training runs all three, so all three are printed by default. FLOPs count a
 * multiply-add as 2: 2 * N * K * C * R * S * OH * OW per direction.
 *
 * Build (the Debian oneDNN uses the OpenMP runtime, so -fopenmp and omp_set_num_threads
 * are how the thread count is set):
 *   cc -O2 -std=c11 -Wall -Wextra -fopenmp bench/onednn_peak.c -ldnnl -o build-bench/onednn_peak
 * Run: onednn_peak [--threads=2] [--mb=32] [--ic=256] [--oc=256] [--hw=28] [--iters=10]
 *                  [--warmup=3] [--dt=f32|bf16|both] [--dir=fwd|bwd_d|bwd_w|all]
 * Output, one line per (type, direction), e.g.
 *   peak f32 fwd: 140.2 GFLOP/s best, 138.9 median (29.6 GFLOP/iter, impl brgconv:avx512_core)
 */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

typedef struct {
  int threads, mb, ic, oc, hw, iters, warmup;
  int f32, bf16;
  int fwd, bwd_d, bwd_w;
} options;

/* One exit path for oneDNN failures: name the call, the status, and give up. */
#define CHECK(call)                                                                           \
  do {                                                                                        \
    dnnl_status_t s_ = (call);                                                                \
    if (s_ != dnnl_success) {                                                                 \
      fprintf(stderr, "onednn_peak: %s failed (dnnl status %d) at line %d\n", #call, (int)s_, \
              __LINE__);                                                                      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Fills a buffer of `bytes` with a small non-zero constant of the given type, so no
 * zero-skipping or denormal slow path flatters or hurts the timing. */
static void fill(dnnl_memory_t m, size_t bytes, dnnl_data_type_t dt) {
  void *p = NULL;
  CHECK(dnnl_memory_get_data_handle(m, &p));
  if (dt == dnnl_bf16) {
    uint16_t *q = p;
    for (size_t i = 0; i < bytes / 2; i++) q[i] = 0x3c23; /* bf16(0.00995) */
  } else {
    float *q = p;
    for (size_t i = 0; i < bytes / 4; i++) q[i] = 0.01f;
  }
}

static dnnl_memory_t make_mem(dnnl_engine_t eng, const_dnnl_primitive_desc_t pd, dnnl_query_t what,
                              dnnl_data_type_t dt) {
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, 0);
  dnnl_memory_t m;
  CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  fill(m, dnnl_memory_desc_get_size(md), dt);
  return m;
}

/* Runs `prim` warmup + iters times; prints best and median GFLOP/s. */
static void time_prim(const options *o, dnnl_stream_t st, dnnl_primitive_t prim,
                      const_dnnl_primitive_desc_t pd, int nargs, const dnnl_exec_arg_t *args,
                      const char *dtname, const char *dirname, double flops) {
  double *t = calloc((size_t)o->iters, sizeof *t);
  if (!t) {
    fprintf(stderr, "onednn_peak: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < o->warmup; i++) CHECK(dnnl_primitive_execute(prim, st, nargs, args));
  CHECK(dnnl_stream_wait(st));
  for (int i = 0; i < o->iters; i++) {
    double t0 = now_s();
    CHECK(dnnl_primitive_execute(prim, st, nargs, args));
    CHECK(dnnl_stream_wait(st));
    t[i] = now_s() - t0;
  }
  qsort(t, (size_t)o->iters, sizeof *t, cmp_double);
  const char *impl = "?";
  CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
  printf("peak %s %s: %.1f GFLOP/s best, %.1f median (%.1f GFLOP/iter, impl %s)\n", dtname, dirname,
         flops / t[0] * 1e-9, flops / t[o->iters / 2] * 1e-9, flops * 1e-9, impl);
  fflush(stdout);
  free(t);
}

static void run_type(const options *o, dnnl_engine_t eng, dnnl_stream_t st, dnnl_data_type_t dt,
                     const char *dtname) {
  dnnl_dims_t src_dims = {o->mb, o->ic, o->hw, o->hw};
  dnnl_dims_t wei_dims = {o->oc, o->ic, 3, 3};
  dnnl_dims_t dst_dims = {o->mb, o->oc, o->hw, o->hw};
  dnnl_dims_t strides = {1, 1}, pad = {1, 1};
  double flops = 2.0 * o->mb * o->oc * o->ic * 9.0 * o->hw * o->hw;

  dnnl_memory_desc_t src_md, wei_md, dst_md;
  CHECK(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dt, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&wei_md, 4, wei_dims, dt, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dt, dnnl_format_tag_any));

  dnnl_convolution_desc_t fd;
  CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                           &src_md, &wei_md, NULL, &dst_md, strides, pad, pad));
  dnnl_primitive_desc_t fpd;
  CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
  dnnl_memory_t src = make_mem(eng, fpd, dnnl_query_src_md, dt);
  dnnl_memory_t wei = make_mem(eng, fpd, dnnl_query_weights_md, dt);
  dnnl_memory_t dst = make_mem(eng, fpd, dnnl_query_dst_md, dt);

  if (o->fwd) {
    dnnl_primitive_t p;
    CHECK(dnnl_primitive_create(&p, fpd));
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    time_prim(o, st, p, fpd, 3, a, dtname, "fwd", flops);
    dnnl_primitive_destroy(p);
  }
  if (o->bwd_d) {
    dnnl_convolution_desc_t bd;
    CHECK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_md, &wei_md,
                                                   &dst_md, strides, pad, pad));
    dnnl_primitive_desc_t bpd;
    CHECK(dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd));
    dnnl_memory_t dsrc = make_mem(eng, bpd, dnnl_query_diff_src_md, dt);
    dnnl_memory_t dwei = make_mem(eng, bpd, dnnl_query_weights_md, dt);
    dnnl_memory_t ddst = make_mem(eng, bpd, dnnl_query_diff_dst_md, dt);
    dnnl_primitive_t p;
    CHECK(dnnl_primitive_create(&p, bpd));
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_DIFF_SRC, dsrc}, {DNNL_ARG_WEIGHTS, dwei}, {DNNL_ARG_DIFF_DST, ddst}};
    time_prim(o, st, p, bpd, 3, a, dtname, "bwd_d", flops);
    dnnl_primitive_destroy(p);
    dnnl_memory_destroy(dsrc);
    dnnl_memory_destroy(dwei);
    dnnl_memory_destroy(ddst);
    dnnl_primitive_desc_destroy(bpd);
  }
  if (o->bwd_w) {
    /* Weight gradients stay fp32 under mixed precision (fp32 master weights). */
    dnnl_memory_desc_t dwei_md;
    CHECK(dnnl_memory_desc_init_by_tag(&dwei_md, 4, wei_dims, dnnl_f32, dnnl_format_tag_any));
    dnnl_convolution_desc_t wd;
    CHECK(dnnl_convolution_backward_weights_desc_init(&wd, dnnl_convolution_direct, &src_md,
                                                      &dwei_md, NULL, &dst_md, strides, pad, pad));
    dnnl_primitive_desc_t wpd;
    CHECK(dnnl_primitive_desc_create(&wpd, &wd, NULL, eng, fpd));
    dnnl_memory_t wsrc = make_mem(eng, wpd, dnnl_query_src_md, dt);
    dnnl_memory_t dw = make_mem(eng, wpd, dnnl_query_diff_weights_md, dnnl_f32);
    dnnl_memory_t ddst = make_mem(eng, wpd, dnnl_query_diff_dst_md, dt);
    dnnl_primitive_t p;
    CHECK(dnnl_primitive_create(&p, wpd));
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_SRC, wsrc}, {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_DST, ddst}};
    time_prim(o, st, p, wpd, 3, a, dtname, "bwd_w", flops);
    dnnl_primitive_destroy(p);
    dnnl_memory_destroy(wsrc);
    dnnl_memory_destroy(dw);
    dnnl_memory_destroy(ddst);
    dnnl_primitive_desc_destroy(wpd);
  }
  dnnl_memory_destroy(src);
  dnnl_memory_destroy(wei);
  dnnl_memory_destroy(dst);
  dnnl_primitive_desc_destroy(fpd);
}

static int int_opt(const char *arg, const char *name, int *out) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=') return 0;
  char *end;
  long v = strtol(arg + n + 1, &end, 10);
  if (*end || v < 1 || v > 1 << 20) {
    fprintf(stderr, "onednn_peak: %s wants a positive integer, got '%s'\n", name, arg + n + 1);
    exit(2);
  }
  *out = (int)v;
  return 1;
}

int main(int argc, char **argv) {
  options o = {2, 32, 256, 256, 28, 10, 3, 1, 1, 1, 1, 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (int_opt(a, "--threads", &o.threads) || int_opt(a, "--mb", &o.mb) ||
        int_opt(a, "--ic", &o.ic) || int_opt(a, "--oc", &o.oc) || int_opt(a, "--hw", &o.hw) ||
        int_opt(a, "--iters", &o.iters) || int_opt(a, "--warmup", &o.warmup))
      continue;
    if (!strcmp(a, "--dt=f32") || !strcmp(a, "--dt=bf16") || !strcmp(a, "--dt=both")) {
      o.f32 = strcmp(a, "--dt=bf16") != 0;
      o.bf16 = strcmp(a, "--dt=f32") != 0;
    } else if (!strncmp(a, "--dir=", 6)) {
      const char *d = a + 6;
      int all = !strcmp(d, "all");
      o.fwd = all || !strcmp(d, "fwd");
      o.bwd_d = all || !strcmp(d, "bwd_d");
      o.bwd_w = all || !strcmp(d, "bwd_w");
      if (!o.fwd && !o.bwd_d && !o.bwd_w) {
        fprintf(stderr, "onednn_peak: --dir is fwd, bwd_d, bwd_w or all, got '%s'\n", d);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: onednn_peak [--threads=2] [--mb=32] [--ic=256] [--oc=256] [--hw=28]\n"
                      "                   [--iters=10] [--warmup=3] [--dt=f32|bf16|both]\n"
                      "                   [--dir=fwd|bwd_d|bwd_w|all]\n");
      return 2;
    }
  }
  omp_set_num_threads(o.threads);

  const dnnl_version_t *v = dnnl_version();
  printf("oneDNN %d.%d.%d, %d threads, conv 3x3 pad 1: N=%d C=%d K=%d %dx%d, %d iters\n", v->major,
         v->minor, v->patch, o.threads, o.mb, o.ic, o.oc, o.hw, o.hw, o.iters);
  dnnl_engine_t eng;
  dnnl_stream_t st;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  if (o.f32) run_type(&o, eng, st, dnnl_f32, "f32");
  if (o.bf16) run_type(&o, eng, st, dnnl_bf16, "bf16");
  dnnl_stream_destroy(st);
  dnnl_engine_destroy(eng);
  return 0;
}
