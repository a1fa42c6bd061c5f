/* cpu_harness.h — drives the `cpu` device plugin from tests: loads
 * $CNNB_PLUGIN_DIR/libcnnb_device_cpu.so with dlopen + cnnb_plugin_entry, creates a
 * device, and runs a small graph on it with its own simple executor (one buffer per
 * activation, per gradient and per backward input slot; no reuse), so op tests and
 * gradient checks depend only on device.h's contract.
 *
 * Host-side tensors are logical NCHW fp32 (labels int32), as tensor_from/to_host see
 * them. Functions return 0 on success, otherwise -1 with a message in the harness. */
#ifndef CNNB_TEST_CPU_HARNESS_H
#define CNNB_TEST_CPU_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

typedef struct cpu_harness {
  void *dl;
  const cnnb_plugin *plugin;
  const cnnb_device_vtable *dv;
  cnnb_ctx *ctx;
  void *dev;
  char error[1024];
} cpu_harness;

/* 1: the plugin is not built (no oneDNN) — `why` says so and the test should skip;
 * 2: this CPU cannot do `precision` (bf16 without avx512_bf16) — h->error has the
 *    device's refusal and the test should skip; 0: loaded and a device created;
 * -1: failed (message in h->error). */
int cpu_harness_open(cpu_harness *h, uint32_t precision, int training, uint32_t seed);
void cpu_harness_close(cpu_harness *h);

/* Loads the plugin only (no device), for create-time checks. Same return values. */
int cpu_harness_load(cpu_harness *h);

/* The main() of a Check test that needs the plugin: loads it into *h (printing why and
 * returning 0 when it is not built, 1 when it fails to load), then runs make_suite()'s
 * suite (which may read h->dv) with info logs quietened, closes *h, and returns 1 when a
 * check failed. */
struct Suite;
int cpu_harness_main(const char *test, cpu_harness *h, struct Suite *(*make_suite)(void));

typedef struct cpu_run cpu_run;

/* Sizes, allocates and prepares every node of g. NULL on failure (message in h->error). */
cpu_run *cpu_run_create(cpu_harness *h, const cnnb_graph *g);
void cpu_run_destroy(cpu_run *r);

/* Host copies of the arenas (fp32), uploaded; either may be NULL. */
int cpu_run_set_params(cpu_run *r, const float *params, const float *stats);
int cpu_run_get_params(cpu_run *r, float *params, float *stats);
/* d loss / d params after a backward (the whole gradient arena). */
int cpu_run_get_param_grads(cpu_run *r, float *grads);

/* Uploads the images (every INPUT node gets `images`) and labels (may be NULL), runs
 * forward over every node. */
int cpu_run_forward(cpu_run *r, const float *images, const int32_t *labels, uint64_t step);
/* Backward over every node in reverse order. `seed` >= 0: d loss / d seed is given
 * (`seed_grad`, logical NCHW) and nodes after it are skipped; seed < 0: the graph ends
 * in its loss, whose backward starts from loss_scale. */
int cpu_run_backward(cpu_run *r, cnnb_tensor seed, const float *seed_grad, float loss_scale,
                     uint64_t step);

/* 0: backward gets NULL for gradients of INPUT nodes (as the executor does when nothing
 * needs them); 1 (default): they are computed, so tests can read them. */
void cpu_run_want_image_grads(cpu_run *r, int wanted);

/* A tensor's activation, or its accumulated gradient, as logical NCHW fp32. */
int cpu_run_activation(cpu_run *r, cnnb_tensor t, float *host);
int cpu_run_gradient(cpu_run *r, cnnb_tensor t, float *host);
/* Device bytes of tensor t (the layout the device chose). */
size_t cpu_run_tensor_bytes(const cpu_run *r, cnnb_tensor t);

#endif
