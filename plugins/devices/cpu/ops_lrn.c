/* ops_lrn.c — local response normalisation across channels (AlexNet, GoogLeNet) on
 * oneDNN's LRN.
 *
 * TF: y = x / (bias + alpha * sum_{c-r..c+r} x^2)^beta. oneDNN divides its alpha by the
 * window size n = 2r+1: y = x / (k + alpha'/n * sum x^2)^beta. So alpha' = alpha * n,
 * k = bias, and both sum only the channels that exist at the edges. */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct lrn_node {
  cpu_node base;
  void *ws;
  dnnl_primitive_t fwd, bwd;
  dnnl_memory_t src, dst, ws_m, b_src, diff_dst, diff_src, b_ws;
} lrn_node;

static cnnb_status lrn_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  lrn_node *s = (lrn_node *)n;
  cpu_bind(s->src, io->inputs[0]);
  cpu_bind(s->dst, io->output);
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}, {DNNL_ARG_WORKSPACE, s->ws_m}};
  if (s->ws) cpu_bind(s->ws_m, s->ws);
  return cpu_exec(d, s->fwd, s->ws ? 3 : 2, args, n->node, "lrn forward");
}

static cnnb_status lrn_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  lrn_node *s = (lrn_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  cpu_bind(s->b_src, io->inputs[0]);
  cpu_bind(s->diff_dst, io->output_grad);
  cpu_bind(s->diff_src, io->input_grads[0]);
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->b_src},
                             {DNNL_ARG_DIFF_DST, s->diff_dst},
                             {DNNL_ARG_DIFF_SRC, s->diff_src},
                             {DNNL_ARG_WORKSPACE, s->b_ws}};
  if (s->ws) cpu_bind(s->b_ws, s->ws);
  return cpu_exec(d, s->bwd, s->ws ? 4 : 3, args, n->node, "lrn backward");
}

static void lrn_release(cpu_device *d, cpu_node *n) {
  lrn_node *s = (lrn_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  if (s->bwd) dnnl_primitive_destroy(s->bwd);
  dnnl_memory_t mems[] = {s->src, s->dst, s->ws_m, s->b_src, s->diff_dst, s->diff_src, s->b_ws};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_free(s->ws);
  free(s);
}

static const cpu_node_ops lrn_ops = {lrn_forward, lrn_backward, lrn_release};

cnnb_status cpu_prepare_lrn(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                            cpu_node **out) {
  lrn_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &lrn_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *md = &p->md[index];
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  dnnl_lrn_desc_t desc;
  cnnb_status st;
  int32_t r = node->attr.lrn.depth_radius;
  dnnl_dim_t size = 2 * (dnnl_dim_t)r + 1;
  float alpha = node->attr.lrn.alpha * (float)size, beta = node->attr.lrn.beta,
        k = node->attr.lrn.bias;
  if (r < 0) {
    st = cnnb_error(d->ctx, CNNB_EINVAL, "cpu: lrn '%s': depth_radius %d < 0", node->name, r);
    goto done;
  }
  CPU_TRY(st, d,
          dnnl_lrn_forward_desc_init(&desc,
                                     d->cfg.training ? dnnl_forward_training
                                                     : dnnl_forward_inference,
                                     dnnl_lrn_across_channels, md, size, alpha, beta, k),
          node, "lrn forward descriptor");
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, "lrn forward"))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, fpd, node, "lrn forward"))) goto done;
  if ((st = cpu_mem(d, &s->src, md, node)) || (st = cpu_mem(d, &s->dst, md, node))) goto done;
  const dnnl_memory_desc_t *ws_md = cpu_pd_md(fpd, dnnl_query_workspace_md, 0);
  if (ws_md && ws_md->ndims > 0 && dnnl_memory_desc_get_size(ws_md) > 0) {
    if (!(s->ws = cpu_alloc(dnnl_memory_desc_get_size(ws_md)))) {
      st = cpu_oom(d, node, dnnl_memory_desc_get_size(ws_md), "the lrn workspace");
      goto done;
    }
    if ((st = cpu_mem(d, &s->ws_m, ws_md, node)) || (st = cpu_mem(d, &s->b_ws, ws_md, node)))
      goto done;
  }
  if (d->cfg.training) {
    CPU_TRY(st, d,
            dnnl_lrn_backward_desc_init(&desc, dnnl_lrn_across_channels, md, md, size, alpha, beta,
                                        k),
            node, "lrn backward descriptor");
    if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, "lrn backward"))) goto done;
    if ((st = cpu_prim_create(d, &s->bwd, bpd, node, "lrn backward"))) goto done;
    if ((st = cpu_mem(d, &s->b_src, md, node)) || (st = cpu_mem(d, &s->diff_dst, md, node)) ||
        (st = cpu_mem(d, &s->diff_src, md, node)))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (st) {
    lrn_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
