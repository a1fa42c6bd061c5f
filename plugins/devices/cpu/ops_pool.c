/* ops_pool.c — max pool, average pool and global average pool on oneDNN pooling.
 *
 * TF semantics: padding never wins a max (oneDNN ignores the padded area) and is left
 * out of an average (dnnl_pooling_avg_exclude_padding). A global average pool is the
 * [H, W] window the graph describes it as. Max pool keeps oneDNN's workspace (where each
 * maximum came from) between forward and backward. The output keeps the input's layout
 * (oneDNN's choice with format any). */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct pool_node {
  cpu_node base;
  void *ws;
  dnnl_primitive_t fwd, bwd;
  dnnl_memory_t src, dst, ws_m, diff_dst, diff_src, b_ws;
} pool_node;

static dnnl_alg_kind_t algorithm(const cnnb_node *n) {
  return n->op == CNNB_OP_MAX_POOL ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
}

static void window(const cnnb_node *n, dnnl_dims_t strides, dnnl_dims_t kernel, dnnl_dims_t pl,
                   dnnl_dims_t pr) {
  kernel[0] = n->attr.window.kernel_h;
  kernel[1] = n->attr.window.kernel_w;
  strides[0] = n->attr.window.stride_h > 0 ? n->attr.window.stride_h : 1;
  strides[1] = n->attr.window.stride_w > 0 ? n->attr.window.stride_w : 1;
  pl[0] = n->attr.window.pad_top;
  pl[1] = n->attr.window.pad_left;
  pr[0] = n->attr.window.pad_bottom;
  pr[1] = n->attr.window.pad_right;
}

static cnnb_status forward_pd(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                              const dnnl_memory_desc_t *dst, dnnl_primitive_desc_t *pd) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  dnnl_dims_t strides, kernel, pl, pr;
  window(n, strides, kernel, pl, pr);
  dnnl_pooling_desc_t desc;
  cnnb_status st;
  CPU_TRY(st, d,
          dnnl_pooling_forward_desc_init(
              &desc, d->cfg.training ? dnnl_forward_training : dnnl_forward_inference, algorithm(n),
              &p->md[n->inputs[0]], dst, strides, kernel, pl, pr),
          n, "pool forward descriptor");
  st = cpu_pd_create(d, pd, &desc, NULL, NULL, n, "pool forward");
done:
  return st;
}

cnnb_status cpu_layout_pool(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                            dnnl_memory_desc_t *out) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  dnnl_dim_t dims[4] = {n->shape.n, n->shape.c, n->shape.h, n->shape.w};
  dnnl_memory_desc_t any = cpu_md_any(4, dims, p->md[n->inputs[0]].data_type);
  dnnl_primitive_desc_t pd;
  cnnb_status st = forward_pd(d, g, p, index, &any, &pd);
  if (st) return st;
  *out = *cpu_pd_md(pd, dnnl_query_dst_md, 0);
  dnnl_primitive_desc_destroy(pd);
  return CNNB_OK;
}

static cnnb_status pool_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  pool_node *s = (pool_node *)n;
  cpu_bind(s->src, io->inputs[0]);
  cpu_bind(s->dst, io->output);
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}, {DNNL_ARG_WORKSPACE, s->ws_m}};
  if (s->ws) cpu_bind(s->ws_m, s->ws);
  return cpu_exec(d, s->fwd, s->ws ? 3 : 2, args, n->node, "pool forward");
}

static cnnb_status pool_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  pool_node *s = (pool_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  cpu_bind(s->diff_dst, io->output_grad);
  cpu_bind(s->diff_src, io->input_grads[0]);
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, s->diff_dst},
                             {DNNL_ARG_DIFF_SRC, s->diff_src},
                             {DNNL_ARG_WORKSPACE, s->b_ws}};
  if (s->ws) cpu_bind(s->b_ws, s->ws);
  return cpu_exec(d, s->bwd, s->ws ? 3 : 2, args, n->node, "pool backward");
}

static void pool_release(cpu_device *d, cpu_node *n) {
  pool_node *s = (pool_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  if (s->bwd) dnnl_primitive_destroy(s->bwd);
  dnnl_memory_t mems[] = {s->src, s->dst, s->ws_m, s->diff_dst, s->diff_src, s->b_ws};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_free(s->ws);
  free(s);
}

static const cpu_node_ops pool_ops = {pool_forward, pool_backward, pool_release};

cnnb_status cpu_prepare_pool(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out) {
  pool_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &pool_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *in_md = &p->md[node->inputs[0]], *md = &p->md[index];
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  cnnb_status st;
  if ((st = forward_pd(d, g, p, index, md, &fpd))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, fpd, node, "pool forward"))) goto done;
  if ((st = cpu_mem(d, &s->src, in_md, node)) || (st = cpu_mem(d, &s->dst, md, node))) goto done;
  const dnnl_memory_desc_t *ws_md = cpu_pd_md(fpd, dnnl_query_workspace_md, 0);
  if (ws_md && ws_md->ndims > 0 && dnnl_memory_desc_get_size(ws_md) > 0) {
    if (!(s->ws = cpu_alloc(dnnl_memory_desc_get_size(ws_md)))) {
      st = cpu_oom(d, node, dnnl_memory_desc_get_size(ws_md), "the pooling workspace");
      goto done;
    }
    if ((st = cpu_mem(d, &s->ws_m, ws_md, node)) || (st = cpu_mem(d, &s->b_ws, ws_md, node)))
      goto done;
  }
  if (d->cfg.training) {
    dnnl_dims_t strides, kernel, pl, pr;
    window(node, strides, kernel, pl, pr);
    dnnl_pooling_desc_t desc;
    CPU_TRY(st, d,
            dnnl_pooling_backward_desc_init(&desc, algorithm(node), in_md, md, strides, kernel, pl,
                                            pr),
            node, "pool backward descriptor");
    if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, "pool backward"))) goto done;
    if ((st = cpu_prim_create(d, &s->bwd, bpd, node, "pool backward"))) goto done;
    if ((st = cpu_mem(d, &s->diff_dst, md, node)) || (st = cpu_mem(d, &s->diff_src, in_md, node)))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (st) {
    pool_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
