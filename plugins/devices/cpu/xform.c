/* xform.c — layout conversions (cpu_xform: a oneDNN reorder, or a plain copy when the
 * layouts agree, counted for the report of reorders) and prepared weights (cpu_weights:
 * the arena's plain kernel in the kernel's preferred layout, and its gradient back). */
#include <string.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_device.h"

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
