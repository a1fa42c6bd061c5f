/* fused_relu.c — the ReLU a producer (conv2d, add) runs fused with its own op, shared by
 * those ops so the two halves stay one implementation: forward, the producer's
 * attributes plus a ReLU post-op; backward, dx = dy * (y > 0) as a oneDNN eltwise on the
 * output's layout, reading the output (the planner keeps it alive for this). */
#include <stdio.h>

#include "cpu_device.h"

cnnb_status cpu_fused_relu_attr(cpu_device *d, const cnnb_node *n, dnnl_primitive_attr_t *attr) {
  dnnl_post_ops_t po = NULL;
  *attr = NULL;
  cnnb_status st = cpu_room_open(d, n, "fused relu attributes");
  if (st) return st;
  CPU_TRY(st, d, dnnl_primitive_attr_clone(attr, d->attr), n, "attributes");
  CPU_TRY(st, d, dnnl_post_ops_create(&po), n, "post-ops");
  CPU_TRY(st, d, dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.f, 0.f), n,
          "relu post-op");
  CPU_TRY(st, d, dnnl_primitive_attr_set_post_ops(*attr, po), n, "post-ops");
done:
  if (po) dnnl_post_ops_destroy(po);
  cpu_room_close(d);
  if (st && *attr) {
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
  }
  return st;
}

cnnb_status cpu_fused_relu_prepare(cpu_device *d, cpu_fused_relu *r, const dnnl_memory_desc_t *md,
                                   const cnnb_node *node, const char *what) {
  char name[2][96];
  snprintf(name[0], sizeof name[0], "%s descriptor", what);
  snprintf(name[1], sizeof name[1], "%s backward descriptor", what);
  snprintf(r->name, sizeof r->name, "%s backward", what);
  dnnl_eltwise_desc_t desc;
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  cnnb_status st;
  CPU_TRY(st, d,
          dnnl_eltwise_forward_desc_init(&desc, dnnl_forward_training,
                                         dnnl_eltwise_relu_use_dst_for_bwd, md, 0.f, 0.f),
          node, name[0]);
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, what))) goto done;
  CPU_TRY(st, d,
          dnnl_eltwise_backward_desc_init(&desc, dnnl_eltwise_relu_use_dst_for_bwd, md, md, 0.f,
                                          0.f),
          node, name[1]);
  if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, r->name))) goto done;
  if ((st = cpu_prim_create(d, &r->bwd, bpd, node, r->name))) goto done;
  if ((st = cpu_mem(d, &r->dst, md, node)) || (st = cpu_mem(d, &r->diff_dst, md, node)) ||
      (st = cpu_mem(d, &r->diff_src, md, node)))
    goto done;
  /* Transient slot 0 holds the masked dy for ops that cannot write it in place. */
  st = cpu_transient_reserve(d, 0, dnnl_memory_desc_get_size(md), node);
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  return st;
}

cnnb_status cpu_fused_relu_backward(cpu_device *d, cpu_fused_relu *r, const void *y, const void *dy,
                                    void *dx, const cnnb_node *node) {
  cpu_bind(r->dst, y);
  cpu_bind(r->diff_dst, dy);
  cpu_bind(r->diff_src, dx);
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_DST, r->dst}, {DNNL_ARG_DIFF_DST, r->diff_dst}, {DNNL_ARG_DIFF_SRC, r->diff_src}};
  return cpu_exec(d, r->bwd, 3, args, node, r->name);
}

void cpu_fused_relu_fini(cpu_fused_relu *r) {
  if (r->bwd) dnnl_primitive_destroy(r->bwd);
  dnnl_memory_t mems[] = {r->dst, r->diff_dst, r->diff_src};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  memset(r, 0, sizeof *r);
}
