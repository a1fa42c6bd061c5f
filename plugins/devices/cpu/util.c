/* util.c — the cpu device's small oneDNN helpers: errors that name the node, the
 * address-space room kept for oneDNN, primitive creation with the shared user scratchpad,
 * execution, memory descriptors, layout conversions (cpu_xform) and prepared weights
 * (cpu_weights).
 *
 * Every primitive runs with a user-provided scratchpad: one buffer for the whole device,
 * grown at prepare time to the largest need, so a step allocates nothing. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_device.h"

#define OOM_HINT "a smaller --batch_size needs less"

cnnb_status cpu_check(cpu_device *d, dnnl_status_t s, const cnnb_node *node, const char *what) {
  if (s == dnnl_success) return CNNB_OK;
  cnnb_status st = s == dnnl_unimplemented   ? CNNB_EUNSUPPORTED
                   : s == dnnl_out_of_memory ? CNNB_ENOMEM
                                             : CNNB_EINTERNAL;
  const char *hint = st == CNNB_ENOMEM ? " (out of memory; " OOM_HINT ")" : "";
  if (node)
    return cnnb_error(d->ctx, st, "cpu: %s '%s' [%d,%d,%d,%d]: %s failed: oneDNN %s%s", "node",
                      node->name ? node->name : "?", node->shape.n, node->shape.c, node->shape.h,
                      node->shape.w, what, dnnl_status2str(s), hint);
  return cnnb_error(d->ctx, st, "cpu: %s failed: oneDNN %s%s", what, dnnl_status2str(s), hint);
}

cnnb_status cpu_oom(cpu_device *d, const cnnb_node *node, size_t bytes, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  char where[160] = "";
  if (node)
    snprintf(where, sizeof where, "node '%s' [%d,%d,%d,%d]: ", node->name ? node->name : "?",
             node->shape.n, node->shape.c, node->shape.h, node->shape.w);
  if (bytes)
    return cnnb_error(
        d->ctx, CNNB_ENOMEM,
        "cpu: %sout of memory: cannot allocate %zu bytes (%.1f MiB) for %s; " OOM_HINT, where,
        bytes, (double)bytes / 1048576.0, what);
  return cnnb_error(d->ctx, CNNB_ENOMEM, "cpu: %sout of memory: %s; " OOM_HINT, where, what);
}

/* ---- room for oneDNN --------------------------------------------------------------
 * oneDNN cannot report every failure to get memory. Its JIT assembler (Xbyak, built
 * without exceptions) maps a 256 KiB code buffer for each kernel it generates; when that
 * mmap fails it records an error and goes on writing machine code through the NULL
 * buffer, so dnnl_primitive_create dies with SIGSEGV (in Xbyak's CodeArray::db, top_ ==
 * NULL) instead of returning dnnl_out_of_memory; and a C++ allocation failing inside it
 * throws through code that cannot unwind (SIGABRT, seen from a GEMM kernel's std::call_once
 * in an OpenMP worker). Near an address-space limit (RLIMIT_AS, prlimit --as) the big
 * buffers the device allocates itself fail cleanly, but the last one that fits can leave
 * too little for the next primitive's code. So the device keeps CPU_ROOM_BYTES mapped
 * while its own allocations run, the way the JIT maps its code (private, writable, so
 * that RLIMIT_DATA and strict overcommit count it too; never touched: no memory), and
 * unmaps it for the duration of each oneDNN call that may allocate;
 * when it is not held (taken meanwhile), the call first checks that that much can be had,
 * and fails with CNNB_ENOMEM when not. One primitive's creation measured at most ~4 MiB
 * (resnet20/50, inception3, googlenet, mobilenet, vgg11, alexnet, densenet; fp32 and bf16;
 * training and inference). Some kernels are generated on a primitive's first execution
 * (the GEMM kernels behind gemm-based convolutions and bf16 inner products, in whichever
 * thread gets there first), so each primitive's first run gets the room too (cpu_exec);
 * later runs leave it held. */
#define CPU_ROOM_BYTES ((size_t)16 << 20)

static void *room_map(void) {
  void *p = mmap(NULL, CPU_ROOM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

cnnb_status cpu_room_open(cpu_device *d, const cnnb_node *node, const char *what) {
  if (d->room) {
    munmap(d->room, CPU_ROOM_BYTES);
    d->room = NULL;
    return CNNB_OK;
  }
  void *probe = room_map();
  if (!probe) {
    int err = errno;
    return cpu_oom(d, node, 0,
                   "no room left for oneDNN's %s (it needs up to %zu MiB free for the code of "
                   "the kernels it generates; mmap: %s)",
                   what, CPU_ROOM_BYTES >> 20, strerror(err));
  }
  munmap(probe, CPU_ROOM_BYTES);
  return CNNB_OK;
}

void cpu_room_close(cpu_device *d) {
  if (!d->room) d->room = room_map(); /* when it cannot be had, the next open says so */
}

void cpu_room_free(cpu_device *d) {
  if (d->room) munmap(d->room, CPU_ROOM_BYTES);
  d->room = NULL;
  free(d->unrun);
  d->unrun = NULL;
  d->unrun_cap = d->unrun_count = 0;
}

/* The primitives not yet executed: an open-addressing set (linear probing, deletion by
 * backward shift). A primitive destroyed before it ran stays listed; if another takes its
 * address, that one has not run either. */
static size_t unrun_home(const cpu_device *d, dnnl_primitive_t prim) {
  uint64_t h = (uint64_t)(uintptr_t)prim * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 32) & (d->unrun_cap - 1);
}

static int unrun_add(cpu_device *d, dnnl_primitive_t prim) {
  if ((d->unrun_count + 1) * 2 > d->unrun_cap) {
    size_t cap = d->unrun_cap ? d->unrun_cap * 2 : 256;
    dnnl_primitive_t *old = d->unrun, *grown = calloc(cap, sizeof *grown);
    if (!grown) return 0;
    size_t old_cap = d->unrun_cap;
    d->unrun = grown;
    d->unrun_cap = cap;
    d->unrun_count = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i]) unrun_add(d, old[i]);
    free(old);
  }
  size_t i = unrun_home(d, prim);
  while (d->unrun[i] && d->unrun[i] != prim) i = (i + 1) & (d->unrun_cap - 1);
  if (!d->unrun[i]) d->unrun_count++;
  d->unrun[i] = prim;
  return 1;
}

/* 1 (and forgets it) when prim had not run yet. */
static int unrun_take(cpu_device *d, dnnl_primitive_t prim) {
  if (!d->unrun_count) return 0;
  size_t mask = d->unrun_cap - 1, i = unrun_home(d, prim);
  while (d->unrun[i] != prim) {
    if (!d->unrun[i]) return 0;
    i = (i + 1) & mask;
  }
  d->unrun[i] = NULL;
  d->unrun_count--;
  for (size_t j = (i + 1) & mask; d->unrun[j]; j = (j + 1) & mask) {
    size_t home = unrun_home(d, d->unrun[j]);
    /* move j's entry into the hole unless its home lies cyclically in (i, j] */
    if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
      d->unrun[i] = d->unrun[j];
      d->unrun[j] = NULL;
      i = j;
    }
  }
  return 1;
}

const dnnl_memory_desc_t *cpu_pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index) {
  return dnnl_primitive_desc_query_md(pd, what, index);
}

cnnb_status cpu_scratch_reserve(cpu_device *d, const_dnnl_primitive_desc_t pd,
                                const cnnb_node *node) {
  const dnnl_memory_desc_t *md = cpu_pd_md(pd, dnnl_query_scratchpad_md, 0);
  size_t need = md ? dnnl_memory_desc_get_size(md) : 0;
  if (need <= d->scratch_bytes && d->scratch_mem) return CNNB_OK;
  if (need < d->scratch_bytes) need = d->scratch_bytes;
  void *buf = cpu_alloc(need);
  if (!buf) return cpu_oom(d, node, need, "the oneDNN scratchpad");
  dnnl_dim_t dims[1] = {(dnnl_dim_t)(need ? need : 1)};
  dnnl_memory_desc_t smd = cpu_md_tag(1, dims, dnnl_u8, dnnl_a);
  dnnl_memory_t mem = NULL;
  cnnb_status st = cpu_room_open(d, node, "scratchpad memory");
  if (st == CNNB_OK) {
    st = cpu_check(d, dnnl_memory_create(&mem, &smd, d->engine, buf), node, "scratchpad memory");
    cpu_room_close(d);
  }
  if (st) {
    cpu_free(buf);
    return st;
  }
  if (d->scratch_mem) dnnl_memory_destroy(d->scratch_mem);
  cpu_free(d->scratch);
  d->scratch = buf;
  d->scratch_bytes = need;
  d->scratch_mem = mem;
  return CNNB_OK;
}

cnnb_status cpu_pd_try(cpu_device *d, dnnl_primitive_desc_t *pd, const void *op_desc,
                       const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint,
                       const cnnb_node *node, const char *what) {
  *pd = NULL;
  cnnb_status st = cpu_room_open(d, node, what);
  if (st) return st;
  dnnl_status_t s = dnnl_primitive_desc_create(pd, op_desc, attr ? attr : d->attr, d->engine, hint);
  cpu_room_close(d);
  if (s == dnnl_out_of_memory) return cpu_check(d, s, node, what);
  if (s != dnnl_success) {
    *pd = NULL;
    return CNNB_EUNSUPPORTED;
  }
  st = cpu_scratch_reserve(d, *pd, node);
  if (st) {
    dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
  }
  return st;
}

cnnb_status cpu_pd_create(cpu_device *d, dnnl_primitive_desc_t *pd, const void *op_desc,
                          const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint,
                          const cnnb_node *node, const char *what) {
  *pd = NULL;
  cnnb_status st = cpu_room_open(d, node, what);
  if (st) return st;
  dnnl_status_t s = dnnl_primitive_desc_create(pd, op_desc, attr ? attr : d->attr, d->engine, hint);
  cpu_room_close(d);
  st = cpu_check(d, s, node, what);
  if (st) {
    *pd = NULL;
    return st;
  }
  st = cpu_scratch_reserve(d, *pd, node);
  if (st) {
    dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
  }
  return st;
}

cnnb_status cpu_prim_create(cpu_device *d, dnnl_primitive_t *prim, const_dnnl_primitive_desc_t pd,
                            const cnnb_node *node, const char *what) {
  *prim = NULL;
  cnnb_status st = cpu_room_open(d, node, what);
  if (st) return st;
  dnnl_status_t s = dnnl_primitive_create(prim, pd);
  cpu_room_close(d);
  st = cpu_check(d, s, node, what);
  if (st) {
    *prim = NULL;
    return st;
  }
  if (!unrun_add(d, *prim)) {
    dnnl_primitive_destroy(*prim);
    *prim = NULL;
    return cpu_oom(d, node, 0, "the list of primitives not yet run");
  }
  return CNNB_OK;
}

cnnb_status cpu_exec(cpu_device *d, dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args,
                     const cnnb_node *node, const char *what) {
  dnnl_exec_arg_t all[40];
  if (nargs > 39) return cnnb_error(d->ctx, CNNB_EINTERNAL, "cpu: %s: %d arguments", what, nargs);
  /* oneDNN generates some kernels on a primitive's first run (the GEMM kernels behind
   * gemm-based convolutions and bf16 inner products, in an OpenMP worker) */
  int first = unrun_take(d, prim);
  cnnb_status st;
  if (first && (st = cpu_room_open(d, node, what))) return st;
  memcpy(all, args, (size_t)nargs * sizeof *args);
  all[nargs].arg = DNNL_ARG_SCRATCHPAD;
  all[nargs].memory = d->scratch_mem;
  st = cpu_check(d, dnnl_primitive_execute(prim, d->stream, nargs + 1, all), node, what);
  if (st == CNNB_OK) st = cpu_check(d, dnnl_stream_wait(d->stream), node, what);
  if (first) cpu_room_close(d);
  return st;
}

cnnb_status cpu_mem(cpu_device *d, dnnl_memory_t *mem, const dnnl_memory_desc_t *md,
                    const cnnb_node *node) {
  *mem = NULL;
  cnnb_status st = cpu_room_open(d, node, "memory object");
  if (st) return st;
  dnnl_status_t s = dnnl_memory_create(mem, md, d->engine, DNNL_MEMORY_NONE);
  cpu_room_close(d);
  st = cpu_check(d, s, node, "memory object");
  if (st) *mem = NULL;
  return st;
}

dnnl_memory_desc_t cpu_md_tag(int ndims, const dnnl_dim_t *dims, dnnl_data_type_t dt,
                              dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  memset(&md, 0, sizeof md);
  dnnl_dims_t full = {0}; /* oneDNN reads a whole dnnl_dims_t */
  for (int i = 0; i < ndims && i < DNNL_MAX_NDIMS; i++) full[i] = dims[i];
  dnnl_memory_desc_init_by_tag(&md, ndims, full, dt, tag);
  return md;
}

dnnl_memory_desc_t cpu_md_any(int ndims, const dnnl_dim_t *dims, dnnl_data_type_t dt) {
  return cpu_md_tag(ndims, dims, dt, dnnl_format_tag_any);
}

dnnl_memory_desc_t cpu_md_nchw(cnnb_shape s, dnnl_data_type_t dt) {
  dnnl_dim_t dims[4] = {s.n, s.c, s.h, s.w};
  return cpu_md_tag(4, dims, dt, dnnl_nchw);
}

const char *cpu_md_name(const dnnl_memory_desc_t *md, char *buf, size_t size) {
  if (md->format_kind != dnnl_blocked) {
    snprintf(buf, size, "%s", dnnl_fmt_kind2str(md->format_kind));
    return buf;
  }
  /* Outer dimensions by decreasing stride (letters a, b, ...), then inner blocks:
   * "abcd" is plain nchw, "aBcd16b" is nChw16c. */
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  int order[DNNL_MAX_NDIMS], blocked[DNNL_MAX_NDIMS] = {0};
  for (int i = 0; i < md->ndims; i++) order[i] = i;
  for (int i = 0; i < md->ndims; i++)
    for (int j = i + 1; j < md->ndims; j++)
      if (b->strides[order[j]] > b->strides[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  for (int k = 0; k < b->inner_nblks; k++) blocked[b->inner_idxs[k]] = 1;
  size_t n = 0;
  for (int i = 0; i < md->ndims && n + 1 < size; i++)
    buf[n++] = (char)((blocked[order[i]] ? 'A' : 'a') + order[i]);
  for (int k = 0; k < b->inner_nblks && n + 8 < size; k++)
    n += (size_t)snprintf(buf + n, size - n, "%d%c", (int)b->inner_blks[k],
                          'a' + (int)b->inner_idxs[k]);
  buf[n < size ? n : size - 1] = '\0';
  return buf;
}

cnnb_status cpu_transient_reserve(cpu_device *d, int slot, size_t bytes, const cnnb_node *node) {
  if (bytes <= d->transient_bytes[slot]) return CNNB_OK;
  void *p = cpu_alloc(bytes);
  if (!p) return cpu_oom(d, node, bytes, "a scratch buffer");
  cpu_free(d->transient[slot]);
  d->transient[slot] = p;
  d->transient_bytes[slot] = bytes;
  return CNNB_OK;
}

void *cpu_alloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void *p = aligned_alloc(64, rounded);
  if (p) memset(p, 0, rounded);
  return p;
}

void cpu_free(void *p) { free(p); }

cnnb_status cpu_xform_init(cpu_device *d, cpu_xform *x, const dnnl_memory_desc_t *src,
                           const dnnl_memory_desc_t *dst, const cnnb_node *node, const char *what) {
  memset(x, 0, sizeof *x);
  x->bytes = dnnl_memory_desc_get_size(dst);
  if (cpu_md_same(src, dst)) return CNNB_OK;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t s;
  cnnb_status st;
  if ((st = cpu_room_open(d, node, what))) goto done;
  s = dnnl_reorder_primitive_desc_create(&pd, src, d->engine, dst, d->engine, d->attr);
  cpu_room_close(d);
  CPU_TRY(st, d, s, node, what);
  if ((st = cpu_scratch_reserve(d, pd, node))) goto done;
  if ((st = cpu_prim_create(d, &x->prim, pd, node, what))) goto done;
  if ((st = cpu_mem(d, &x->src, src, node))) goto done;
  if ((st = cpu_mem(d, &x->dst, dst, node))) goto done;
  d->reorders_planned++;
  {
    char a[64], b[64];
    cnnb_log(d->ctx, CNNB_LOG_DEBUG, "reorder %s: %s %s -> %s %s (%s)",
             node && node->name ? node->name : "-", cpu_md_name(src, a, sizeof a),
             dnnl_dt2str(src->data_type), cpu_md_name(dst, b, sizeof b),
             dnnl_dt2str(dst->data_type), what);
  }
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (st) cpu_xform_fini(x);
  return st;
}

cnnb_status cpu_xform_run(cpu_device *d, cpu_xform *x, const void *src, void *dst,
                          const cnnb_node *node) {
  if (!x->prim) {
    if (src != dst) memcpy(dst, src, x->bytes);
    return CNNB_OK;
  }
  cpu_bind(x->src, src);
  cpu_bind(x->dst, dst);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, x->src}, {DNNL_ARG_TO, x->dst}};
  d->reorders_run++;
  return cpu_exec(d, x->prim, 2, args, node, "reorder");
}

void cpu_xform_fini(cpu_xform *x) {
  if (x->prim) dnnl_primitive_destroy(x->prim);
  if (x->src) dnnl_memory_destroy(x->src);
  if (x->dst) dnnl_memory_destroy(x->dst);
  memset(x, 0, sizeof *x);
}

cnnb_status cpu_weights_init_fwd(cpu_device *d, cpu_weights *w, const dnnl_memory_desc_t *plain,
                                 const dnnl_memory_desc_t *compute, const cnnb_node *node) {
  cnnb_status st = cpu_xform_init(d, &w->to_compute, plain, compute, node,
                                  "weights to kernel layout");
  if (st) return st;
  if (cpu_xform_needed(&w->to_compute)) {
    w->compute_buf = cpu_alloc(dnnl_memory_desc_get_size(compute));
    if (!w->compute_buf)
      return cpu_oom(d, node, dnnl_memory_desc_get_size(compute),
                     "the weights in the kernel's layout");
  }
  return CNNB_OK;
}

cnnb_status cpu_weights_init_bwd(cpu_device *d, cpu_weights *w, const dnnl_memory_desc_t *plain,
                                 const dnnl_memory_desc_t *diff, const cnnb_node *node) {
  cnnb_status st = cpu_xform_init(d, &w->to_arena, diff, plain, node, "weight gradients to arena");
  if (st) return st;
  if (cpu_xform_needed(&w->to_arena)) {
    w->diff_buf = cpu_alloc(dnnl_memory_desc_get_size(diff));
    if (!w->diff_buf)
      return cpu_oom(d, node, dnnl_memory_desc_get_size(diff),
                     "the weight gradients in the kernel's layout");
  }
  return CNNB_OK;
}

cnnb_status cpu_weights_prepare(cpu_device *d, cpu_weights *w, const float *arena, const void **out,
                                const cnnb_node *node) {
  if (!cpu_xform_needed(&w->to_compute)) {
    *out = arena;
    return CNNB_OK;
  }
  *out = w->compute_buf;
  return cpu_xform_run(d, &w->to_compute, arena, w->compute_buf, node);
}

void cpu_weights_fini(cpu_weights *w) {
  cpu_xform_fini(&w->to_compute);
  cpu_xform_fini(&w->to_arena);
  cpu_free(w->compute_buf);
  cpu_free(w->diff_buf);
  memset(w, 0, sizeof *w);
}

void cpu_node_init(cpu_node *n, const cpu_node_ops *ops, const cnnb_graph *g, cpu_plan *p,
                   int32_t index) {
  n->ops = ops;
  n->g = g;
  n->node = cnnb_graph_node(g, index);
  n->plan = p;
  n->index = index;
}
