/* ops_eltwise.c — elementwise ops: relu, relu6 and the activations of ABI 1.14 (oneDNN
 * eltwise; relu, relu6, sigmoid and hard_sigmoid backward from the output so an in-place
 * one still differentiates right), add (oneDNN binary, with the
 * following ReLU as a post-op when the planner fused it; its gradient passes unchanged to
 * both inputs) and dropout (plain C over the buffer), plus the gradient accumulation the
 * executor asks for where a tensor feeds several consumers.
 *
 * Dropout's mask is a pure function of (seed, step, node, element), so backward
 * recomputes it instead of keeping it, and a run is reproducible. Elements are taken in
 * the buffer's physical order; a blocked layout's padding is zero and stays zero. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_device.h"

/* ---- relu, relu6 and the activations of ABI 1.14 ------------------------------------ */

/* relu6 is oneDNN's clip_v2 over [0, 6] from the output: dx = dy where 0 < y < 6, else 0,
 * which is TF's Relu6Grad (0 < x < 6) at every x, the bounds included. clip (v1) would
 * pass the gradient at x == 6 and has no output form; bounded_relu likewise passes it
 * at x == 6 and is gone from oneDNN 3. The activations map onto oneDNN's algorithms
 * (sigmoid: logistic from the output; silu: swish with alpha 1; hard_swish; gelu: erf or
 * tanh) but hard_sigmoid, which oneDNN 2 lacks: an affine map x / 6 + 1/2 first, then
 * clip_v2 over [0, 1] in place, and backward clip_v2's from the output (0 < y < 1, which
 * is -3 < x < 3, torch's open interval) times the map's 1/6. */
typedef struct eltwise_kind {
  const char *fwd_name, *bwd_name; /* for messages: "relu forward" */
  dnnl_alg_kind_t alg;
  float alpha, beta;
  bool from_dst;     /* backward reads the output (a *_use_dst_for_bwd algorithm) */
  bool affine_first; /* hard_sigmoid: y = alg(scale * x + shift) */
  float scale, shift;
} eltwise_kind;

#define KIND(op, ...) \
  { .fwd_name = op " forward", .bwd_name = op " backward", __VA_ARGS__ }
static const eltwise_kind relu_kind = KIND("relu", .alg = dnnl_eltwise_relu_use_dst_for_bwd,
                                           .from_dst = true);
static const eltwise_kind relu6_kind = KIND("relu6", .alg = dnnl_eltwise_clip_v2_use_dst_for_bwd,
                                            .beta = 6.f, .from_dst = true);
static const eltwise_kind sigmoid_kind =
    KIND("sigmoid", .alg = dnnl_eltwise_logistic_use_dst_for_bwd, .from_dst = true);
static const eltwise_kind silu_kind = KIND("silu", .alg = dnnl_eltwise_swish, .alpha = 1.f);
static const eltwise_kind hard_sigmoid_kind =
    KIND("hard_sigmoid", .alg = dnnl_eltwise_clip_v2_use_dst_for_bwd, .beta = 1.f, .from_dst = true,
         .affine_first = true, .scale = 1.f / 6.f, .shift = 0.5f);
static const eltwise_kind hard_swish_kind = KIND("hard_swish", .alg = dnnl_eltwise_hardswish);
static const eltwise_kind gelu_erf_kind = KIND("gelu", .alg = dnnl_eltwise_gelu_erf);
static const eltwise_kind gelu_tanh_kind = KIND("gelu (tanh)", .alg = dnnl_eltwise_gelu_tanh);
#undef KIND

typedef struct relu_node {
  cpu_node base;
  const eltwise_kind *kind;
  dnnl_primitive_t fwd, bwd;
  dnnl_primitive_t affine;  /* affine_first: x -> scale x + shift, before fwd */
  dnnl_primitive_t rescale; /* affine_first: g -> scale g in place, after bwd */
  dnnl_memory_t src, dst, diff_dst, diff_src;
} relu_node;

static cnnb_status relu_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  relu_node *s = (relu_node *)n;
  cpu_bind(s->src, io->inputs[0]);
  cpu_bind(s->dst, io->output);
  if (s->affine) {
    dnnl_exec_arg_t pre[2] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}};
    cnnb_status st = cpu_exec(d, s->affine, 2, pre, n->node, s->kind->fwd_name);
    if (st != CNNB_OK) return st;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s->dst}, {DNNL_ARG_DST, s->dst}}; /* in place */
    return cpu_exec(d, s->fwd, 2, args, n->node, s->kind->fwd_name);
  }
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}};
  return cpu_exec(d, s->fwd, 2, args, n->node, s->kind->fwd_name);
}

static cnnb_status relu_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  relu_node *s = (relu_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  const eltwise_kind *k = s->kind;
  if (k->from_dst) cpu_bind(s->dst, io->output);
  else cpu_bind(s->src, io->inputs[0]);
  cpu_bind(s->diff_dst, io->output_grad);
  cpu_bind(s->diff_src, io->input_grads[0]);
  dnnl_exec_arg_t args[3] = {
      {k->from_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, k->from_dst ? s->dst : s->src},
      {DNNL_ARG_DIFF_DST, s->diff_dst},
      {DNNL_ARG_DIFF_SRC, s->diff_src}};
  cnnb_status st = cpu_exec(d, s->bwd, 3, args, n->node, k->bwd_name);
  if (st != CNNB_OK || !s->rescale) return st;
  dnnl_exec_arg_t chain[2] = {{DNNL_ARG_SRC, s->diff_src}, {DNNL_ARG_DST, s->diff_src}};
  return cpu_exec(d, s->rescale, 2, chain, n->node, k->bwd_name);
}

static void relu_release(cpu_device *d, cpu_node *n) {
  relu_node *s = (relu_node *)n;
  dnnl_primitive_t prims[] = {s->fwd, s->bwd, s->affine, s->rescale};
  for (size_t i = 0; i < 4; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t mems[] = {s->src, s->dst, s->diff_dst, s->diff_src};
  for (size_t i = 0; i < 4; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  free(s);
}

static const cpu_node_ops relu_ops = {relu_forward, relu_backward, relu_release};

/* An inference eltwise_linear primitive: x -> scale x + shift over md. */
static cnnb_status linear_primitive(cpu_device *d, const dnnl_memory_desc_t *md, float scale,
                                    float shift, const cnnb_node *node, const char *what,
                                    dnnl_primitive_t *out) {
  dnnl_eltwise_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  cnnb_status st = cpu_check(d,
                             dnnl_eltwise_forward_desc_init(&desc, dnnl_forward_inference,
                                                            dnnl_eltwise_linear, md, scale, shift),
                             node, what);
  if (st != CNNB_OK || (st = cpu_pd_create(d, &pd, &desc, NULL, NULL, node, what))) return st;
  st = cpu_prim_create(d, out, pd, node, what);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

/* Output and gradients keep the input's layout (plan.c), so one descriptor serves all. */
static cnnb_status prepare_activation(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                      int32_t index, const eltwise_kind *kind, cpu_node **out) {
  relu_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &relu_ops, g, p, index);
  s->kind = kind;
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *md = &p->md[index];
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  dnnl_eltwise_desc_t desc;
  cnnb_status st;
  CPU_TRY(st, d,
          dnnl_eltwise_forward_desc_init(&desc,
                                         d->cfg.training ? dnnl_forward_training
                                                         : dnnl_forward_inference,
                                         kind->alg, md, kind->alpha, kind->beta),
          node, kind->fwd_name);
  if ((st = cpu_pd_create(d, &fpd, &desc, NULL, NULL, node, kind->fwd_name))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, fpd, node, kind->fwd_name))) goto done;
  if ((st = cpu_mem(d, &s->src, md, node)) || (st = cpu_mem(d, &s->dst, md, node))) goto done;
  if (kind->affine_first &&
      (st = linear_primitive(d, md, kind->scale, kind->shift, node, kind->fwd_name, &s->affine)))
    goto done;
  if (d->cfg.training) {
    CPU_TRY(st, d,
            dnnl_eltwise_backward_desc_init(&desc, kind->alg, md, md, kind->alpha, kind->beta),
            node, kind->bwd_name);
    if ((st = cpu_pd_create(d, &bpd, &desc, NULL, fpd, node, kind->bwd_name))) goto done;
    if ((st = cpu_prim_create(d, &s->bwd, bpd, node, kind->bwd_name))) goto done;
    if ((st = cpu_mem(d, &s->diff_dst, md, node)) || (st = cpu_mem(d, &s->diff_src, md, node)))
      goto done;
    if (kind->affine_first &&
        (st = linear_primitive(d, md, kind->scale, 0.f, node, kind->bwd_name, &s->rescale)))
      goto done;
  }
done:
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (st) {
    relu_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}

cnnb_status cpu_prepare_relu(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out) {
  return prepare_activation(d, g, p, index, &relu_kind, out);
}

cnnb_status cpu_prepare_relu6(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                              cpu_node **out) {
  return prepare_activation(d, g, p, index, &relu6_kind, out);
}

/* The activations of ABI 1.14, by op (gelu by its form). */
cnnb_status cpu_prepare_activation(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   cpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const eltwise_kind *kind = node->op == CNNB_OP_SIGMOID        ? &sigmoid_kind
                             : node->op == CNNB_OP_SILU         ? &silu_kind
                             : node->op == CNNB_OP_HARD_SIGMOID ? &hard_sigmoid_kind
                             : node->op == CNNB_OP_HARD_SWISH   ? &hard_swish_kind
                             : node->attr.gelu.tanh             ? &gelu_tanh_kind
                                                                : &gelu_erf_kind;
  return prepare_activation(d, g, p, index, kind, out);
}

/* ---- add --------------------------------------------------------------------------- */

/* The residual add's gradient is the output gradient itself, in the usual case where
 * input and output share a layout: a plain copy, split over the device's threads (one
 * thread's memcpy does not saturate memory bandwidth). Units of 16 bytes. */
typedef struct copy_job {
  void *dst;
  const void *src;
  size_t bytes;
} copy_job;

static void copy_range(void *ctx, int64_t begin, int64_t end) {
  const copy_job *job = ctx;
  size_t from = (size_t)begin * 16, to = (size_t)end * 16;
  if (to > job->bytes) to = job->bytes;
  if (from < to) memcpy((char *)job->dst + from, (const char *)job->src + from, to - from);
}

static cnnb_status pass_gradient(cpu_device *d, cpu_xform *x, const void *src, void *dst,
                                 const cnnb_node *node) {
  if (cpu_xform_needed(x)) return cpu_xform_run(d, x, src, dst, node);
  if (src == dst) return CNNB_OK;
  copy_job job = {dst, src, x->bytes};
  cpu_parallel_for(d, (int64_t)((x->bytes + 15) / 16), copy_range, &job);
  return CNNB_OK;
}

typedef struct add_node {
  cpu_node base;
  int fused_relu;
  dnnl_primitive_t fwd;
  dnnl_memory_t src0, src1, dst;
  cpu_fused_relu relu;   /* the fused ReLU's backward */
  int mask_into[2];      /* input i's gradient has the output's layout: mask dy into it */
  cpu_xform to_input[2]; /* output gradient -> each input's gradient layout */
} add_node;

static cnnb_status add_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  add_node *s = (add_node *)n;
  cpu_bind(s->src0, io->inputs[0]);
  cpu_bind(s->src1, io->inputs[1]);
  cpu_bind(s->dst, io->output);
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC_0, s->src0}, {DNNL_ARG_SRC_1, s->src1}, {DNNL_ARG_DST, s->dst}};
  return cpu_exec(d, s->fwd, 3, args, n->node, "add forward");
}

static cnnb_status add_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  add_node *s = (add_node *)n;
  cnnb_status st;
  const void *dy = io->output_grad;
  if (s->fused_relu) {
    /* dy * (y > 0), written straight into an input's gradient when the layouts allow,
     * so that input needs no copy afterwards. */
    void *masked = cpu_transient(d, 0);
    for (int i = 1; i >= 0; i--)
      if (io->input_grads[i] && s->mask_into[i]) masked = io->input_grads[i];
    if ((st = cpu_fused_relu_backward(d, &s->relu, io->output, io->output_grad, masked, n->node)))
      return st;
    dy = masked;
  }
  for (int i = 0; i < 2; i++)
    if (io->input_grads[i] &&
        (st = pass_gradient(d, &s->to_input[i], dy, io->input_grads[i], n->node)))
      return st;
  /* add(x, x) handed one buffer for both: d/dx is twice the output gradient. */
  if (io->input_grads[0] && io->input_grads[0] == io->input_grads[1])
    cpu_accumulate_buffer(d, &n->plan->md[n->node->inputs[0]], io->input_grads[0],
                          io->input_grads[0]);
  return CNNB_OK;
}

static void add_release(cpu_device *d, cpu_node *n) {
  add_node *s = (add_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  dnnl_memory_t mems[] = {s->src0, s->src1, s->dst};
  for (size_t i = 0; i < 3; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
  cpu_fused_relu_fini(&s->relu);
  cpu_xform_fini(&s->to_input[0]);
  cpu_xform_fini(&s->to_input[1]);
  free(s);
}

static const cpu_node_ops add_ops = {add_forward, add_backward, add_release};

cnnb_status cpu_prepare_add(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                            cpu_node **out) {
  add_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &add_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  s->fused_relu = node->fused_relu != 0;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_binary_desc_t desc;
  cnnb_status st;
  if (node->num_inputs != 2) {
    st = cnnb_error(d->ctx, CNNB_EINVAL, "cpu: add '%s' has %d inputs, not 2", node->name,
                    node->num_inputs);
    goto done;
  }
  const dnnl_memory_desc_t *a = &p->md[node->inputs[0]], *b = &p->md[node->inputs[1]];
  const dnnl_memory_desc_t *o = &p->md[index];
  CPU_TRY(st, d, dnnl_binary_desc_init(&desc, dnnl_binary_add, a, b, o), node, "add descriptor");
  if (s->fused_relu && (st = cpu_fused_relu_attr(d, node, &attr))) goto done;
  if ((st = cpu_pd_create(d, &pd, &desc, attr, NULL, node, "add"))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, pd, node, "add"))) goto done;
  if ((st = cpu_mem(d, &s->src0, a, node)) || (st = cpu_mem(d, &s->src1, b, node)) ||
      (st = cpu_mem(d, &s->dst, o, node)))
    goto done;
  if (d->cfg.training) {
    if ((st = cpu_xform_init(d, &s->to_input[0], o, a, node, "add gradient")) ||
        (st = cpu_xform_init(d, &s->to_input[1], o, b, node, "add gradient")))
      goto done;
    s->mask_into[0] = cpu_md_same(o, a);
    s->mask_into[1] = cpu_md_same(o, b);
    if (s->fused_relu && (st = cpu_fused_relu_prepare(d, &s->relu, o, node, "add fused relu")))
      goto done;
  }
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (st) {
    add_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}

/* ---- dropout ------------------------------------------------------------------------ */

typedef struct dropout_node {
  cpu_node base;
  float keep;
  int64_t count;      /* elements of the buffer, padding included */
  int64_t per_sample; /* stochastic depth: the elements of one image (every layout here keeps
                         an image's elements, padding included, together: N outermost), one
                         draw each; 0: one draw per element (dropout) */
  int bf16;
} dropout_node;

/* A well-mixed 64-bit function of four words (splitmix64's finaliser, chained). */
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t mask_key(uint32_t seed, uint64_t step, int32_t node) {
  return mix(mix(mix((uint64_t)seed + 0x9E3779B97F4A7C15ull) ^ step) ^ (uint64_t)(uint32_t)node);
}

/* 1 when element i is kept: uniform in [0, 1) below keep_prob. */
static inline int kept(uint64_t key, int64_t i, float keep) {
  uint64_t h = mix(key + (uint64_t)i * 0x9E3779B97F4A7C15ull);
  return (float)((double)(h >> 40) * (1.0 / 16777216.0)) < keep;
}

typedef struct mask_job {
  const dropout_node *s;
  uint64_t key;
  const void *in;
  void *out;
} mask_job;

static void apply_mask(void *ctx, int64_t begin, int64_t end) {
  const mask_job *job = ctx;
  const float keep = job->s->keep, scale = 1.0f / keep; /* keep 0: never kept, never used */
  const int64_t per = job->s->per_sample;
  if (job->s->bf16) {
    const uint16_t *x = job->in;
    uint16_t *y = job->out;
    for (int64_t i = begin; i < end; i++)
      y[i] = kept(job->key, per ? i / per : i, keep)
                 ? cpu_f32_to_bf16(cpu_bf16_to_f32(x[i]) * scale)
                 : 0;
  } else {
    const float *x = job->in;
    float *y = job->out;
    for (int64_t i = begin; i < end; i++)
      y[i] = kept(job->key, per ? i / per : i, keep) ? x[i] * scale : 0.0f;
  }
}

static void dropout_apply(cpu_device *d, const dropout_node *s, uint64_t step, const void *in,
                          void *out) {
  mask_job job = {s, mask_key(d->cfg.seed, step, s->base.index), in, out};
  cpu_parallel_for(d, s->count, apply_mask, &job);
}

static cnnb_status dropout_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  dropout_node *s = (dropout_node *)n;
  size_t bytes = (size_t)s->count * (s->bf16 ? 2 : 4);
  if (!d->cfg.training || s->keep >= 1.0f) {
    if (io->output != io->inputs[0]) memcpy(io->output, io->inputs[0], bytes);
    return CNNB_OK;
  }
  dropout_apply(d, s, io->step, io->inputs[0], io->output);
  return CNNB_OK;
}

static cnnb_status dropout_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  dropout_node *s = (dropout_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  if (s->keep >= 1.0f) {
    if (io->input_grads[0] != io->output_grad)
      memcpy(io->input_grads[0], io->output_grad, (size_t)s->count * (s->bf16 ? 2 : 4));
    return CNNB_OK;
  }
  dropout_apply(d, s, io->step, io->output_grad, io->input_grads[0]);
  return CNNB_OK;
}

static void dropout_release(cpu_device *d, cpu_node *n) { free(n); }

static const cpu_node_ops dropout_ops = {dropout_forward, dropout_backward, dropout_release};

/* Whether each image's elements are one contiguous run of md's buffer: N not blocked and
 * its stride the largest. */
static bool images_outermost(const dnnl_memory_desc_t *md) {
  if (md->dims[0] == 1) return true;
  if (md->format_kind != dnnl_blocked) return false;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  for (int i = 0; i < b->inner_nblks; i++)
    if (b->inner_idxs[i] == 0) return false;
  for (int i = 1; i < md->ndims; i++)
    if (b->strides[i] > b->strides[0]) return false;
  return true;
}

/* Dropout, and stochastic depth as dropout of whole images (keep 1 - drop_prob). */
cnnb_status cpu_prepare_dropout(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                cpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const bool per_sample = node->op == CNNB_OP_STOCHASTIC_DEPTH;
  float keep = per_sample ? 1.0f - node->attr.stochastic_depth.drop_prob
                          : node->attr.dropout.keep_prob;
  if (!(keep >= (per_sample ? 0.0f : FLT_MIN) && keep <= 1.0f))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: %s '%s': keep probability %g is out of range",
                      per_sample ? "stochastic_depth" : "dropout", node->name, (double)keep);
  const dnnl_memory_desc_t *md = &p->md[index];
  if (md->data_type != dnnl_f32 && md->data_type != dnnl_bf16)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED, "cpu: dropout '%s': data type %d", node->name,
                      (int)md->data_type);
  dropout_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &dropout_ops, g, p, index);
  s->keep = keep;
  s->bf16 = md->data_type == dnnl_bf16;
  s->count = (int64_t)(dnnl_memory_desc_get_size(md) / (s->bf16 ? 2 : 4));
  s->per_sample = per_sample ? s->count / node->shape.n : 0;
  if (per_sample && !images_outermost(md)) {
    free(s);
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cpu: stochastic_depth '%s': its input's layout interleaves the images "
                      "(a batch-blocked format), which a per-image mask cannot walk",
                      node->name);
  }
  *out = &s->base;
  return CNNB_OK;
}

/* ---- gradient accumulation ------------------------------------------------------------ */

typedef struct acc_job {
  void *dst;
  const void *src;
} acc_job;

static void add_f32(void *ctx, int64_t begin, int64_t end) {
  const acc_job *job = ctx;
  float *y = job->dst;
  const float *x = job->src;
  for (int64_t i = begin; i < end; i++) y[i] += x[i];
}

static void add_bf16(void *ctx, int64_t begin, int64_t end) {
  const acc_job *job = ctx;
  uint16_t *y = job->dst;
  const uint16_t *x = job->src;
  for (int64_t i = begin; i < end; i++)
    y[i] = cpu_f32_to_bf16(cpu_bf16_to_f32(y[i]) + cpu_bf16_to_f32(x[i]));
}

void cpu_accumulate_buffer(const cpu_device *d, const dnnl_memory_desc_t *md, void *dst,
                           const void *src) {
  size_t bytes = dnnl_memory_desc_get_size(md);
  acc_job job = {dst, src};
  if (md->data_type == dnnl_bf16) cpu_parallel_for(d, (int64_t)(bytes / 2), add_bf16, &job);
  else cpu_parallel_for(d, (int64_t)(bytes / 4), add_f32, &job);
}
