/* ops_concat.c — concatenation along channels (Inception, DenseNet) on oneDNN's concat;
 * its backward hands each input the slice of the output gradient that is its own
 * (a reorder out of a sub-memory view of the gradient into the input's layout).
 *
 * When the output layout cannot be cut at an input's channel offset (a 16-channel
 * blocked layout sliced at channel 8), the gradient is first converted to plain NCHW,
 * where every slice is a view. */
#include <stdlib.h>

#include "cpu_device.h"

#define MAX_INPUTS 32

typedef struct concat_node {
  cpu_node base;
  int32_t count;
  dnnl_primitive_t fwd;
  dnnl_memory_t src[MAX_INPUTS], dst;
  dnnl_exec_arg_t args[MAX_INPUTS + 1];
  cpu_xform slice[MAX_INPUTS]; /* gradient view -> input i's gradient layout */
  cpu_xform to_plain;          /* gradient -> plain, when slicing needs it */
  int via_plain;
} concat_node;

cnnb_status cpu_concat_pd(cpu_device *d, const cnnb_node *n, int32_t count,
                          const dnnl_memory_desc_t *srcs, const dnnl_memory_desc_t *dst,
                          dnnl_primitive_desc_t *pd, int quiet) {
  *pd = NULL;
  cnnb_status st = cpu_room_open(d, n, "concat");
  if (st) return st;
  dnnl_status_t s = dnnl_concat_primitive_desc_create(pd, dst, count, 1, srcs, d->attr, d->engine);
  cpu_room_close(d);
  if (s != dnnl_success) {
    *pd = NULL;
    if (quiet && s != dnnl_out_of_memory) return CNNB_EUNSUPPORTED;
    return cpu_check(d, s, n, "concat");
  }
  st = cpu_scratch_reserve(d, *pd, n);
  if (st) {
    dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
  }
  return st;
}

static cnnb_status concat_pd(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                             const dnnl_memory_desc_t *dst, dnnl_primitive_desc_t *pd, int quiet) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  if (n->num_inputs < 1 || n->num_inputs > MAX_INPUTS)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED, "cpu: concat '%s' of %d inputs (1..%d)", n->name,
                      n->num_inputs, MAX_INPUTS);
  dnnl_memory_desc_t srcs[MAX_INPUTS];
  for (int32_t i = 0; i < n->num_inputs; i++) srcs[i] = p->md[n->inputs[i]];
  return cpu_concat_pd(d, n, n->num_inputs, srcs, dst, pd, quiet);
}

cnnb_status cpu_layout_concat(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                              dnnl_memory_desc_t *out) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  dnnl_dim_t dims[4] = {n->shape.n, n->shape.c, n->shape.h, n->shape.w};
  dnnl_data_type_t dt = p->md[n->inputs[0]].data_type;
  dnnl_memory_desc_t any = cpu_md_any(4, dims, dt);
  dnnl_primitive_desc_t pd;
  cnnb_status st = concat_pd(d, g, p, index, &any, &pd, 1);
  if (st == CNNB_OK) {
    *out = *cpu_pd_md(pd, dnnl_query_dst_md, 0);
    dnnl_primitive_desc_destroy(pd);
    return CNNB_OK;
  }
  if (st != CNNB_EUNSUPPORTED) return st; /* out of memory is not a layout refusal */
  *out = cpu_md_nchw(n->shape, dt);
  return CNNB_OK;
}

static cnnb_status concat_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  concat_node *s = (concat_node *)n;
  for (int32_t i = 0; i < s->count; i++) cpu_bind(s->src[i], io->inputs[i]);
  cpu_bind(s->dst, io->output);
  return cpu_exec(d, s->fwd, s->count + 1, s->args, n->node, "concat forward");
}

static cnnb_status concat_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  concat_node *s = (concat_node *)n;
  cnnb_status st;
  const void *grad = io->output_grad;
  if (s->via_plain) {
    if ((st = cpu_xform_run(d, &s->to_plain, grad, cpu_transient(d, 0), n->node))) return st;
    grad = cpu_transient(d, 0);
  }
  for (int32_t i = 0; i < s->count; i++)
    if (io->input_grads[i] &&
        (st = cpu_xform_run(d, &s->slice[i], grad, io->input_grads[i], n->node)))
      return st;
  return CNNB_OK;
}

static void concat_release(cpu_device *d, cpu_node *n) {
  concat_node *s = (concat_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  for (int32_t i = 0; i < MAX_INPUTS; i++) {
    if (s->src[i]) dnnl_memory_destroy(s->src[i]);
    cpu_xform_fini(&s->slice[i]);
  }
  if (s->dst) dnnl_memory_destroy(s->dst);
  cpu_xform_fini(&s->to_plain);
  free(s);
}

static const cpu_node_ops concat_ops = {concat_forward, concat_backward, concat_release};

/* Sub-memory views of `parent` for every input's channels; 0 when one cannot be cut. */
static int slice_views(const cnnb_graph *g, const cnnb_node *n, const dnnl_memory_desc_t *parent,
                       dnnl_memory_desc_t *views) {
  dnnl_dim_t offset = 0;
  for (int32_t i = 0; i < n->num_inputs; i++) {
    cnnb_shape s = cnnb_graph_node(g, n->inputs[i])->shape;
    dnnl_dims_t dims = {s.n, s.c, s.h, s.w}, offsets = {0, offset, 0, 0};
    if (dnnl_memory_desc_init_submemory(&views[i], parent, dims, offsets) != dnnl_success) return 0;
    offset += s.c;
  }
  return 1;
}

cnnb_status cpu_prepare_concat(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                               cpu_node **out) {
  concat_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &concat_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *md = &p->md[index];
  dnnl_primitive_desc_t pd = NULL;
  cnnb_status st;
  if ((st = concat_pd(d, g, p, index, md, &pd, 0))) goto done;
  s->count = node->num_inputs;
  if ((st = cpu_prim_create(d, &s->fwd, pd, node, "concat"))) goto done;
  for (int32_t i = 0; i < s->count; i++) {
    if ((st = cpu_mem(d, &s->src[i], &p->md[node->inputs[i]], node))) goto done;
    s->args[i] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + i, s->src[i]};
  }
  if ((st = cpu_mem(d, &s->dst, md, node))) goto done;
  s->args[s->count] = (dnnl_exec_arg_t){DNNL_ARG_DST, s->dst};
  if (d->cfg.training) {
    dnnl_memory_desc_t views[MAX_INPUTS];
    if (!slice_views(g, node, md, views)) {
      dnnl_memory_desc_t plain = cpu_md_nchw(node->shape, md->data_type);
      if ((st = cpu_xform_init(d, &s->to_plain, md, &plain, node, "concat gradient to plain")))
        goto done;
      s->via_plain = 1;
      if ((st = cpu_transient_reserve(d, 0, dnnl_memory_desc_get_size(&plain), node))) goto done;
      if (!slice_views(g, node, &plain, views)) {
        st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cpu: concat '%s': cannot slice plain NCHW",
                        node->name);
        goto done;
      }
    }
    for (int32_t i = 0; i < s->count; i++)
      if ((st = cpu_xform_init(d, &s->slice[i], &views[i], &p->md[node->inputs[i]], node,
                               "concat gradient slice")))
        goto done;
  }
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (st) {
    concat_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
