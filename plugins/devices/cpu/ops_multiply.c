/* ops_multiply.c — the products of ABI 1.14 on oneDNN: multiply (x * gate, the gate of
 * x's shape or one value per image and channel: the squeeze-and-excitation gate) and
 * channel_scale (x * scale[c], ConvNeXt's layer scale, the scale a param).
 *
 * Forward is one binary multiply, src1 broadcast over what it lacks. Backward:
 *   dx = dy * gate       the forward primitive again, on dy
 *   dgate = dy * x       a binary multiply, then, when the gate is smaller than x, a sum
 *                        reduction over the dimensions it lacks (H, W; for the channel
 *                        scale N too) into the gate's gradient.
 * The product waits in transient slot 1 between the two: nodes run one at a time. The
 * gradient of a scale lands in the fp32 gradient arena whatever the activation type.
 * A squeeze-and-excitation gate ([N, C, 1, 1] on a bigger image) and the channel scale
 * have a loop of their own (ops_gate.c), where oneDNN 2.6 only has its reference kernel;
 * these primitives serve the layouts that loop does not walk. */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct product_node {
  cpu_node base;
  int scale_param;             /* channel_scale: the gate is the node's param [C], not input 1 */
  int reduce;                  /* the gate is smaller than x: dgate is a reduction of dy * x */
  dnnl_primitive_t fwd;        /* dst = src0 * src1 (src1 broadcast) */
  dnnl_primitive_t dy_times_x; /* dy * x, into the gate's gradient or the product */
  dnnl_primitive_t sum;        /* the product summed to the gate's shape */
  dnnl_memory_t x, gate, y, dy, product, dgate;
  const char *name; /* "multiply", "channel_scale" */
} product_node;

static const void *gate_of(const product_node *s, const cnnb_node_io *io) {
  return s->scale_param ? cpu_param_ptr(s->base.g, io->params, s->base.node->params[0])
                        : io->inputs[1];
}

static cnnb_status product_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  product_node *s = (product_node *)n;
  cpu_bind(s->x, io->inputs[0]);
  cpu_bind(s->gate, gate_of(s, io));
  cpu_bind(s->y, io->output);
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC_0, s->x}, {DNNL_ARG_SRC_1, s->gate}, {DNNL_ARG_DST, s->y}};
  return cpu_exec(d, s->fwd, 3, args, n->node, s->name);
}

/* d(loss)/d(gate) into `out` (the gate's gradient layout). */
static cnnb_status gate_gradient(cpu_device *d, product_node *s, const cnnb_node_io *io,
                                 void *out) {
  cnnb_status st;
  cpu_bind(s->dy, io->output_grad);
  cpu_bind(s->x, io->inputs[0]);
  cpu_bind(s->product, s->reduce ? cpu_transient(d, 1) : out);
  dnnl_exec_arg_t mul[3] = {
      {DNNL_ARG_SRC_0, s->dy}, {DNNL_ARG_SRC_1, s->x}, {DNNL_ARG_DST, s->product}};
  if ((st = cpu_exec(d, s->dy_times_x, 3, mul, s->base.node, "gate gradient")) || !s->reduce)
    return st;
  cpu_bind(s->dgate, out);
  dnnl_exec_arg_t sum[2] = {{DNNL_ARG_SRC, s->product}, {DNNL_ARG_DST, s->dgate}};
  return cpu_exec(d, s->sum, 2, sum, s->base.node, "gate gradient sum");
}

static cnnb_status product_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  product_node *s = (product_node *)n;
  cnnb_status st;
  void *dx = io->input_grads[0];
  void *dgate = s->scale_param ? cpu_param_ptr(n->g, io->grads, n->node->params[0])
                               : (io->num_inputs > 1 ? io->input_grads[1] : NULL);
  /* multiply(x, x): one buffer for both gradients, dy * x twice. */
  const int aliased = dx && dx == dgate;
  if (dgate && (st = gate_gradient(d, s, io, aliased ? cpu_transient(d, 0) : dgate))) return st;
  if (dx) {
    cpu_bind(s->x, io->output_grad);
    cpu_bind(s->gate, gate_of(s, io));
    cpu_bind(s->y, dx);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC_0, s->x}, {DNNL_ARG_SRC_1, s->gate}, {DNNL_ARG_DST, s->y}};
    if ((st = cpu_exec(d, s->fwd, 3, args, n->node, "input gradient"))) return st;
  }
  if (aliased) cpu_accumulate_buffer(d, &n->plan->md[n->node->inputs[0]], dx, cpu_transient(d, 0));
  return CNNB_OK;
}

static void product_release(cpu_device *d, cpu_node *n) {
  product_node *s = (product_node *)n;
  dnnl_primitive_t prims[] = {s->fwd, s->dy_times_x, s->sum};
  for (size_t i = 0; i < 3; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t mems[] = {s->x, s->gate, s->y, s->dy, s->product, s->dgate};
  for (size_t i = 0; i < 6; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  free(s);
}

static const cpu_node_ops product_ops = {product_forward, product_backward, product_release};

/* A binary multiply a * b -> dst as a primitive. */
static cnnb_status binary_mul(cpu_device *d, const dnnl_memory_desc_t *a,
                              const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *dst,
                              const cnnb_node *node, const char *what, dnnl_primitive_t *out) {
  dnnl_binary_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  cnnb_status st = cpu_check(d, dnnl_binary_desc_init(&desc, dnnl_binary_mul, a, b, dst), node,
                             what);
  if (st != CNNB_OK || (st = cpu_pd_create(d, &pd, &desc, NULL, NULL, node, what))) return st;
  st = cpu_prim_create(d, out, pd, node, what);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

static cnnb_status sum_to(cpu_device *d, const dnnl_memory_desc_t *src,
                          const dnnl_memory_desc_t *dst, const cnnb_node *node,
                          dnnl_primitive_t *out) {
  dnnl_reduction_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  const char *what = "gate gradient sum";
  cnnb_status st =
      cpu_check(d, dnnl_reduction_desc_init(&desc, dnnl_reduction_sum, src, dst, 0.f, 0.f), node,
                what);
  if (st != CNNB_OK || (st = cpu_pd_create(d, &pd, &desc, NULL, NULL, node, what))) return st;
  st = cpu_prim_create(d, out, pd, node, what);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

static cnnb_status prepare_product(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   int scale_param, cpu_node **out) {
  product_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &product_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  s->scale_param = scale_param;
  s->name = scale_param ? "channel_scale" : "multiply";
  const cnnb_shape xs = node->shape;
  const dnnl_memory_desc_t *x = &p->md[node->inputs[0]], *y = &p->md[index];
  dnnl_memory_desc_t gate_md;
  if (scale_param) { /* the arena's plain fp32 [C], seen as [1, C, 1, 1] */
    const dnnl_dim_t dims[4] = {1, xs.c, 1, 1};
    gate_md = cpu_md_tag(4, dims, dnnl_f32, dnnl_nchw);
  } else {
    gate_md = p->md[node->inputs[1]];
  }
  const cnnb_shape gs = scale_param ? (cnnb_shape){1, xs.c, 1, 1}
                                    : cnnb_graph_node(g, node->inputs[1])->shape;
  s->reduce = cnnb_shape_count(gs) != cnnb_shape_count(xs);
  cnnb_status st;
  if ((st = binary_mul(d, x, &gate_md, y, node, s->name, &s->fwd)) ||
      (st = cpu_mem(d, &s->x, x, node)) || (st = cpu_mem(d, &s->gate, &gate_md, node)) ||
      (st = cpu_mem(d, &s->y, y, node)))
    goto done;
  if (d->cfg.training) {
    /* dy has y's layout, which is x's (cpu_layout_same). */
    const dnnl_memory_desc_t *product_md = s->reduce ? y : &gate_md;
    if ((st = binary_mul(d, y, x, product_md, node, "gate gradient", &s->dy_times_x)) ||
        (st = cpu_mem(d, &s->dy, y, node)) || (st = cpu_mem(d, &s->product, product_md, node)))
      goto done;
    if (s->reduce) {
      if ((st = sum_to(d, y, &gate_md, node, &s->sum)) ||
          (st = cpu_mem(d, &s->dgate, &gate_md, node)) ||
          (st = cpu_transient_reserve(d, 1, dnnl_memory_desc_get_size(y), node)))
        goto done;
    }
    /* multiply(x, x) sums two products in slot 0 */
    if (!scale_param && node->inputs[0] == node->inputs[1] &&
        (st = cpu_transient_reserve(d, 0, dnnl_memory_desc_get_size(x), node)))
      goto done;
  }
done:
  if (st) {
    product_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}

cnnb_status cpu_prepare_multiply(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                 cpu_node **out) {
  /* A per-channel gate on an image bigger than 1x1: the SE gate's own loop (ops_gate.c),
   * where its layouts allow. */
  const cnnb_node *node = cnnb_graph_node(g, index);
  const cnnb_shape gs = cnnb_graph_node(g, node->inputs[1])->shape;
  if (gs.h == 1 && gs.w == 1 && (node->shape.h != 1 || node->shape.w != 1) &&
      cpu_prepare_gate(d, g, p, index, out) == CNNB_OK)
    return CNNB_OK;
  return prepare_product(d, g, p, index, 0, out);
}

cnnb_status cpu_prepare_channel_scale(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                      int32_t index, cpu_node **out) {
  if (cpu_prepare_gate(d, g, p, index, out) == CNNB_OK) return CNNB_OK; /* ops_gate.c */
  return prepare_product(d, g, p, index, 1, out);
}
