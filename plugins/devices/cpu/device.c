/* device.c — the `cpu` device plugin: its descriptor and vtable, creation (engine,
 * stream, threads, precision), memory, tensor sizes and host conversions, and the
 * dispatch of prepare / forward / backward to the op families (ops_*.c) through the op
 * table (ops.c), which supports_op answers from.
 *
 * Device memory is host memory (64-byte aligned so oneDNN's vector loads are aligned);
 * every kernel runs synchronously on the device's oneDNN stream, so synchronize() has
 * nothing left to wait for. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cpu_device.h"

static const char *precision_name(uint32_t p) {
  return p == CNNB_PRECISION_FP32   ? "fp32"
         : p == CNNB_PRECISION_BF16 ? "bf16"
         : p == CNNB_PRECISION_FP16 ? "fp16"
                                    : "unknown";
}

static int isa_has(dnnl_cpu_isa_t have, dnnl_cpu_isa_t want) {
  return ((unsigned)have & (unsigned)want) == (unsigned)want;
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
  if (isa_has(isa, dnnl_cpu_isa_avx512_core_amx)) return "avx512_core_amx";
  if (isa_has(isa, dnnl_cpu_isa_avx512_core_bf16)) return "avx512_core_bf16";
  if (isa_has(isa, dnnl_cpu_isa_avx512_core_vnni)) return "avx512_core_vnni";
  if (isa_has(isa, dnnl_cpu_isa_avx512_core)) return "avx512_core";
  if (isa_has(isa, dnnl_cpu_isa_avx2)) return "avx2";
  if (isa_has(isa, dnnl_cpu_isa_avx)) return "avx";
  if (isa_has(isa, dnnl_cpu_isa_sse41)) return "sse4.1";
  return "baseline";
}

/* "AMD EPYC 9654 96-Core Processor" from /proc/cpuinfo, or "unknown CPU". */
static void cpu_model(char *buf, size_t size) {
  snprintf(buf, size, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *colon = strchr(line, ':');
    if (!colon) continue;
    colon++;
    while (*colon == ' ' || *colon == '\t') colon++;
    snprintf(buf, size, "%s", colon);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
    break;
  }
  fclose(f);
}

static void device_destroy(void *device);

static cnnb_status device_create(cnnb_ctx *ctx, const char *name, const cnnb_device_config *cfg,
                                 void **out) {
  *out = NULL;
  if (!cfg) return cnnb_error(ctx, CNNB_EINVAL, "cpu: no device configuration");
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  uint32_t precision = cfg->precision ? cfg->precision : CNNB_PRECISION_FP32;
  int bf16_ok = isa_has(isa, dnnl_cpu_isa_avx512_core_bf16);
  const char *can = bf16_ok ? "fp32, bf16" : "fp32";
  if (precision == CNNB_PRECISION_FP16)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "cpu: fp16 is not supported on this CPU device; it supports %s", can);
  if (precision == CNNB_PRECISION_BF16 && !bf16_ok)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "cpu: bf16 needs avx512_bf16 (oneDNN ISA avx512_core_bf16), this CPU "
                      "offers %s; it supports fp32",
                      isa_name(isa));
  if (precision != CNNB_PRECISION_FP32 && precision != CNNB_PRECISION_BF16)
    return cnnb_error(ctx, CNNB_EINVAL, "cpu: unknown precision %u; it supports %s", precision,
                      can);
  /* Several replicas (--num_gpus=N on the cpu device) are several instances sharing the
   * cores; the run loop steps them one after another, which is what lets a strategy be
   * tested on a machine without accelerators. */
  if (cfg->device_index < 0)
    return cnnb_error(ctx, CNNB_EINVAL, "cpu: device index %d is negative", cfg->device_index);
  if (cfg->num_threads < 0)
    return cnnb_error(ctx, CNNB_EINVAL, "cpu: %d threads", cfg->num_threads);

  cpu_device *d = calloc(1, sizeof *d);
  if (!d) return cnnb_error(ctx, CNNB_ENOMEM, "cpu: out of memory for the device");
  d->ctx = ctx;
  memset(&d->cfg, 0, sizeof d->cfg);
  memcpy(&d->cfg, cfg, cfg->struct_size < sizeof d->cfg ? cfg->struct_size : sizeof d->cfg);
  d->cfg.precision = precision;
  d->act_dt = precision == CNNB_PRECISION_BF16 ? dnnl_bf16 : dnnl_f32;
  d->threads = cfg->num_threads > 0 ? cfg->num_threads : (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
  if (d->threads < 1) d->threads = 1;
  cpu_threads_look_up(d);
  if (!d->omp.parallel)
    cnnb_log(ctx, CNNB_LOG_WARN,
             "cpu: cannot set oneDNN's OpenMP threads; OMP_NUM_THREADS applies");

  /* The room kept for oneDNN (room.c) first, so that nothing after takes it: open checks
   * that it can be had (none is held yet), close takes it. */
  cnnb_status st = cpu_room_open(d, NULL, "engine");
  if (st) goto done;
  cpu_room_close(d);
  if ((st = cpu_threads_start(d))) goto done;
  d->scratch = cpu_alloc(64);
  if (!d->scratch) {
    st = cpu_oom(d, NULL, 64, "the oneDNN scratchpad");
    goto done;
  }
  d->scratch_bytes = 64;
  if ((st = cpu_room_open(d, NULL, "engine"))) goto done;
  CPU_TRY(st, d, dnnl_engine_create(&d->engine, dnnl_cpu, 0), NULL, "engine");
  CPU_TRY(st, d, dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags), NULL,
          "stream");
  CPU_TRY(st, d, dnnl_primitive_attr_create(&d->attr), NULL, "attributes");
  CPU_TRY(st, d, dnnl_primitive_attr_set_scratchpad_mode(d->attr, dnnl_scratchpad_mode_user), NULL,
          "scratchpad mode");
  {
    /* A minimal scratchpad memory, so every primitive has one to be given. */
    dnnl_dim_t one = 64;
    dnnl_memory_desc_t md = cpu_md_tag(1, &one, dnnl_u8, dnnl_a);
    CPU_TRY(st, d, dnnl_memory_create(&d->scratch_mem, &md, d->engine, d->scratch), NULL,
            "scratchpad memory");
  }
  cpu_room_close(d);
  {
    char model[160];
    cpu_model(model, sizeof model);
    const dnnl_version_t *v = dnnl_version();
    const char *runtime = v->cpu_runtime == DNNL_RUNTIME_OMP          ? "OpenMP"
                          : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                          : v->cpu_runtime == DNNL_RUNTIME_SEQ        ? "sequential"
                                                                      : "other runtime";
    snprintf(d->description, sizeof d->description,
             "CPU: %s (%d threads, oneDNN %d.%d.%d %s, %s, %s)", model, d->threads, v->major,
             v->minor, v->patch, runtime, isa_name(isa), precision_name(precision));
  }
  cnnb_log(ctx, CNNB_LOG_DEBUG, "created %s device: %s", name ? name : "cpu", d->description);
  *out = d;
  return CNNB_OK;
done:
  device_destroy(d);
  return st;
}

static void device_destroy(void *device) {
  cpu_device *d = device;
  if (!d) return;
  if (d->reorders_planned)
    cnnb_log(d->ctx, CNNB_LOG_DEBUG, "%llu layout conversions prepared, %llu run",
             (unsigned long long)d->reorders_planned, (unsigned long long)d->reorders_run);
  cpu_plans_free(d);
  cpu_free(d->transient[0]);
  cpu_free(d->transient[1]);
  if (d->scratch_mem) dnnl_memory_destroy(d->scratch_mem);
  cpu_free(d->scratch);
  if (d->attr) dnnl_primitive_attr_destroy(d->attr);
  if (d->stream) dnnl_stream_destroy(d->stream);
  if (d->engine) dnnl_engine_destroy(d->engine);
  cpu_room_free(d);
  free(d);
}

static const char *device_describe(void *device) { return ((cpu_device *)device)->description; }

static cnnb_status device_alloc(void *device, size_t bytes, void **ptr) {
  cpu_device *d = device;
  *ptr = cpu_alloc(bytes);
  if (!*ptr) return cpu_oom(d, NULL, bytes, "device memory");
  return CNNB_OK;
}

static void device_free(void *device, void *ptr) { cpu_free(ptr); }

static cnnb_status device_copy(void *device, void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
  return CNNB_OK;
}

static cnnb_status device_fill_zero(void *device, void *ptr, size_t bytes) {
  if (bytes) memset(ptr, 0, bytes);
  return CNNB_OK;
}

static cnnb_status device_synchronize(void *device) {
  cpu_device *d = device;
  return cpu_check(d, dnnl_stream_wait(d->stream), NULL, "stream wait");
}

static cnnb_status device_tensor_bytes(void *device, const cnnb_graph *g, cnnb_tensor t,
                                       size_t *bytes) {
  cpu_device *d = device;
  cpu_plan *p;
  cnnb_status st = cpu_plan_get(d, g, &p);
  if (st) return st;
  if (t < 0 || t >= p->num_nodes)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: tensor %d is not in the graph (%d nodes)", t,
                      p->num_nodes);
  *bytes = dnnl_memory_desc_get_size(&p->md[t]);
  return CNNB_OK;
}

static cnnb_status device_tensor_from_host(void *device, const cnnb_graph *g, cnnb_tensor t,
                                           void *buffer, const void *host) {
  cpu_device *d = device;
  cpu_plan *p;
  cnnb_status st = cpu_plan_get(d, g, &p);
  if (st) return st;
  cpu_threads_apply(d);
  return cpu_tensor_from_host(d, p, t, buffer, host);
}

static cnnb_status device_tensor_to_host(void *device, const cnnb_graph *g, cnnb_tensor t,
                                         const void *buffer, void *host) {
  cpu_device *d = device;
  cpu_plan *p;
  cnnb_status st = cpu_plan_get(d, g, &p);
  if (st) return st;
  cpu_threads_apply(d);
  return cpu_tensor_to_host(d, p, t, buffer, host);
}

static cnnb_status device_prepare(void *device, const cnnb_graph *g, int32_t index,
                                  void **node_state) {
  cpu_device *d = device;
  *node_state = NULL;
  cpu_plan *p;
  cnnb_status st = cpu_plan_get(d, g, &p);
  if (st) return st;
  if (index < 0 || index >= p->num_nodes)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: node %d is not in the graph (%d nodes)", index,
                      p->num_nodes);
  const cnnb_node *node = cnnb_graph_node(g, index);
  const cpu_op *op = cpu_op_find(node->op);
  if (!op)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED, "cpu: node '%s': op %u is not supported",
                      node->name, node->op);
  cpu_threads_apply(d);
  cpu_node *n = NULL;
  st = op->prepare(d, g, p, index, &n);
  if (st) return st;
  *node_state = n;
  return CNNB_OK;
}

/* Every op of its table, in either precision, training or not. */
static int32_t device_supports_op(void *device, uint32_t op) { return cpu_op_find(op) != NULL; }

static void device_release(void *device, void *node_state) {
  cpu_node *n = node_state;
  if (n) n->ops->release(device, n);
}

static cnnb_status device_forward(void *device, void *node_state, const cnnb_node_io *io) {
  cpu_device *d = device;
  cpu_node *n = node_state;
  if (!n || !io) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: forward without node state or io");
  if (io->num_inputs != n->node->num_inputs)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: node '%s' has %d inputs, io gives %d",
                      n->node->name, n->node->num_inputs, io->num_inputs);
  cpu_threads_apply(d);
  return n->ops->forward(d, n, io);
}

static cnnb_status device_backward(void *device, void *node_state, const cnnb_node_io *io) {
  cpu_device *d = device;
  cpu_node *n = node_state;
  if (!n || !io) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: backward without node state or io");
  if (!d->cfg.training)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cpu: node '%s': backward on a device created for inference (forward_only)",
                      n->node->name);
  if (io->num_inputs != n->node->num_inputs)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: node '%s' has %d inputs, io gives %d",
                      n->node->name, n->node->num_inputs, io->num_inputs);
  cpu_threads_apply(d);
  return n->ops->backward(d, n, io);
}

static cnnb_status device_accumulate(void *device, const cnnb_graph *g, cnnb_tensor t, void *dst,
                                     const void *src) {
  cpu_device *d = device;
  cpu_plan *p;
  cnnb_status st = cpu_plan_get(d, g, &p);
  if (st) return st;
  if (t < 0 || t >= p->num_nodes)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: accumulate: tensor %d is not in the graph", t);
  cpu_threads_apply(d);
  cpu_accumulate_buffer(d, &p->md[t], dst, src);
  return CNNB_OK;
}

static cnnb_status device_update(void *device, const cnnb_update *update) {
  cpu_device *d = device;
  cpu_threads_apply(d);
  return cpu_update(d, update);
}

static cnnb_status device_all_finite(void *device, const float *grads, int64_t count,
                                     int32_t *finite) {
  cpu_device *d = device;
  cpu_threads_apply(d);
  return cpu_all_finite(d, grads, count, finite);
}

static const cnnb_device_uint8_input uint8_input = {
    .struct_size = sizeof(cnnb_device_uint8_input),
    .input_from_host_uint8 = cpu_input_from_host_uint8,
};

static const void *device_get_extension(const char *id) {
  static const int32_t yes = 1;
  if (strcmp(id, CNNB_EXT_DEVICE_UINT8_INPUT) == 0) return &uint8_input; /* input_uint8.c */
  if (strcmp(id, CNNB_EXT_FUSED_RELU_ADD) == 0) return &yes;             /* ops_eltwise.c's add */
  /* alloc() is aligned host memory and the arenas are plain fp32 (memory.c). */
  if (strcmp(id, CNNB_EXT_HOST_MEMORY) == 0) return &yes;
  return NULL;
}

/* Every instance can do what the plugin can: a strategy, which sees only the vtable,
 * asks here. */
static const void *device_instance_extension(void *device, const char *id) {
  (void)device;
  return device_get_extension(id);
}

static const cnnb_device_vtable vtable = {
    .struct_size = sizeof(cnnb_device_vtable),
    .create = device_create,
    .destroy = device_destroy,
    .describe = device_describe,
    .alloc = device_alloc,
    .free = device_free,
    .copy_to_device = device_copy,
    .copy_to_host = device_copy,
    .fill_zero = device_fill_zero,
    .synchronize = device_synchronize,
    .tensor_bytes = device_tensor_bytes,
    .tensor_from_host = device_tensor_from_host,
    .tensor_to_host = device_tensor_to_host,
    .prepare = device_prepare,
    .release = device_release,
    .forward = device_forward,
    .backward = device_backward,
    .accumulate = device_accumulate,
    .update = device_update,
    .all_finite = device_all_finite,
    .supports_op = device_supports_op,
    .get_extension = device_instance_extension,
};

static const char *const offers[] = {"cpu", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DEVICE, "cpu", "0.1.0",
                     "CPU device on oneDNN: every graph op forward and backward, fp32 and bf16"),
    .offers = offers,
    .vtable = &vtable,
    .get_extension = device_get_extension,
};

/* The host checks the ABI version in the descriptor; nothing here depends on `host`. */
CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}
