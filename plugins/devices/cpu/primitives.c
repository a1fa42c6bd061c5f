/* primitives.c — creating and running oneDNN primitives the way the whole device does:
 * each creation inside the room kept for oneDNN (room.c), every primitive with the
 * device's one user scratchpad, grown at prepare time to the largest need so that a step
 * allocates nothing, and memory objects bound to buffers at each use. */
#include <string.h>

#include "cpu_device.h"

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
  if (!cpu_room_note_created(d, *prim)) {
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
  int first = cpu_room_first_run(d, prim);
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

cnnb_status cpu_transient_reserve(cpu_device *d, int slot, size_t bytes, const cnnb_node *node) {
  if (bytes <= d->transient_bytes[slot]) return CNNB_OK;
  void *p = cpu_alloc(bytes);
  if (!p) return cpu_oom(d, node, bytes, "a scratch buffer");
  cpu_free(d->transient[slot]);
  d->transient[slot] = p;
  d->transient_bytes[slot] = bytes;
  return CNNB_OK;
}
