/* ops_channels.c — ShuffleNet v2's channel ops of ABI 1.14 on oneDNN:
 *
 * slice_channels: channels [begin, begin + count) of x, as one reorder from a sub-memory
 * view. A view cannot start inside a channel block, so a blocked x is first converted to
 * plain NCHW (transient slot 1); the output is plain NCHW. Backward zeroes dx (plain: the
 * input's gradient itself, or slot 0 converted back to x's layout afterwards) and reorders
 * dy into the same view of it.
 *
 * channel_shuffle: oneDNN's shuffle primitive on x's own layout, forward and backward.
 * oneDNN views the channels as a (C / G) x G matrix and transposes it; torch's groups g
 * view them as g x (C / g): the same permutation with G = C / g. */
#include <stdlib.h>
#include <string.h>

#include "cpu_device.h"

/* ---- slice_channels ------------------------------------------------------------------ */

typedef struct slice_node {
  cpu_node base;
  cpu_xform to_plain;   /* x's layout -> plain NCHW (prim NULL: x is plain) */
  cpu_xform fwd;        /* plain x's view -> y */
  cpu_xform bwd;        /* dy -> the view of plain dx */
  cpu_xform from_plain; /* plain dx -> x's layout */
  size_t plain_bytes;
} slice_node;

static cnnb_status slice_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  slice_node *s = (slice_node *)n;
  const void *x = io->inputs[0];
  if (cpu_xform_needed(&s->to_plain)) {
    cnnb_status st = cpu_xform_run(d, &s->to_plain, x, cpu_transient(d, 1), n->node);
    if (st) return st;
    x = cpu_transient(d, 1);
  }
  return cpu_xform_run(d, &s->fwd, x, io->output, n->node);
}

static cnnb_status slice_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  slice_node *s = (slice_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  const int convert = cpu_xform_needed(&s->from_plain);
  void *dx = convert ? cpu_transient(d, 0) : io->input_grads[0];
  memset(dx, 0, s->plain_bytes);
  cnnb_status st = cpu_xform_run(d, &s->bwd, io->output_grad, dx, n->node);
  if (st || !convert) return st;
  return cpu_xform_run(d, &s->from_plain, dx, io->input_grads[0], n->node);
}

static void slice_release(cpu_device *d, cpu_node *n) {
  (void)d;
  slice_node *s = (slice_node *)n;
  cpu_xform_fini(&s->to_plain);
  cpu_xform_fini(&s->fwd);
  cpu_xform_fini(&s->bwd);
  cpu_xform_fini(&s->from_plain);
  free(s);
}

static const cpu_node_ops slice_ops = {slice_forward, slice_backward, slice_release};

cnnb_status cpu_prepare_slice_channels(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                       int32_t index, cpu_node **out) {
  slice_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &slice_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape, ys = node->shape;
  const dnnl_memory_desc_t *xmd = &p->md[node->inputs[0]], *ymd = &p->md[index];
  const dnnl_memory_desc_t plain = cpu_md_nchw(xs, xmd->data_type);
  s->plain_bytes = dnnl_memory_desc_get_size(&plain);
  dnnl_dims_t dims = {ys.n, ys.c, ys.h, ys.w}, offsets = {0, node->attr.slice.begin, 0, 0};
  dnnl_memory_desc_t view;
  cnnb_status st = CNNB_OK;
  if (dnnl_memory_desc_init_submemory(&view, &plain, dims, offsets) != dnnl_success) {
    st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cpu: slice_channels '%s': cannot view channels %d..%d",
                    node->name, node->attr.slice.begin, node->attr.slice.begin + ys.c);
    goto done;
  }
  if ((st = cpu_xform_init(d, &s->to_plain, xmd, &plain, node, "slice_channels input")) ||
      (cpu_xform_needed(&s->to_plain) &&
       (st = cpu_transient_reserve(d, 1, s->plain_bytes, node))) ||
      (st = cpu_xform_init(d, &s->fwd, &view, ymd, node, "slice_channels forward")))
    goto done;
  if (d->cfg.training) {
    if ((st = cpu_xform_init(d, &s->bwd, ymd, &view, node, "slice_channels gradient")) ||
        (st = cpu_xform_init(d, &s->from_plain, &plain, xmd, node, "slice_channels gradient")) ||
        (cpu_xform_needed(&s->from_plain) &&
         (st = cpu_transient_reserve(d, 0, s->plain_bytes, node))))
      goto done;
  }
done:
  if (st) {
    slice_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}

/* ---- channel_shuffle ----------------------------------------------------------------- */

typedef struct shuffle_node {
  cpu_node base;
  dnnl_primitive_t fwd, bwd;
  dnnl_memory_t src, dst;
} shuffle_node;

static cnnb_status shuffle_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  shuffle_node *s = (shuffle_node *)n;
  cpu_bind(s->src, io->inputs[0]);
  cpu_bind(s->dst, io->output);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}};
  return cpu_exec(d, s->fwd, 2, args, n->node, "channel_shuffle forward");
}

static cnnb_status shuffle_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  shuffle_node *s = (shuffle_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  cpu_bind(s->dst, io->output_grad);
  cpu_bind(s->src, io->input_grads[0]);
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_DIFF_DST, s->dst}, {DNNL_ARG_DIFF_SRC, s->src}};
  return cpu_exec(d, s->bwd, 2, args, n->node, "channel_shuffle backward");
}

static void shuffle_release(cpu_device *d, cpu_node *n) {
  (void)d;
  shuffle_node *s = (shuffle_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  if (s->bwd) dnnl_primitive_destroy(s->bwd);
  if (s->src) dnnl_memory_destroy(s->src);
  if (s->dst) dnnl_memory_destroy(s->dst);
  free(s);
}

static const cpu_node_ops shuffle_ops = {shuffle_forward, shuffle_backward, shuffle_release};

cnnb_status cpu_prepare_channel_shuffle(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                        int32_t index, cpu_node **out) {
  shuffle_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &shuffle_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *md = &p->md[index]; /* x's layout (cpu_layout_same) */
  const dnnl_dim_t group_size = node->shape.c / node->attr.shuffle.groups;
  dnnl_shuffle_desc_t desc;
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  cnnb_status st;
  CPU_TRY(st, d,
          dnnl_shuffle_forward_desc_init(&desc,
                                         d->cfg.training ? dnnl_forward_training
                                                         : dnnl_forward_inference,
                                         md, 1, group_size),
          node, "channel_shuffle forward");
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, "channel_shuffle forward")) ||
      (st = cpu_prim_create(d, &s->fwd, fpd, node, "channel_shuffle forward")) ||
      (st = cpu_mem(d, &s->src, md, node)) || (st = cpu_mem(d, &s->dst, md, node)))
    goto done;
  if (d->cfg.training) {
    CPU_TRY(st, d, dnnl_shuffle_backward_desc_init(&desc, md, 1, group_size), node,
            "channel_shuffle backward");
    if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, "channel_shuffle backward")) ||
        (st = cpu_prim_create(d, &s->bwd, bpd, node, "channel_shuffle backward")))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (st) {
    shuffle_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
