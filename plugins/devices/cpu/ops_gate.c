/* ops_gate.c — x times one value per channel (ABI 1.14), broadcast over H and W:
 *   multiply by a squeeze-and-excitation gate [N, C, 1, 1]   (a value per image and channel)
 *   channel_scale by its param [C]                            (ConvNeXt's layer scale)
 *
 * Not oneDNN's binary primitive, on purpose: oneDNN 2.6 has no fast kernel for these
 * broadcasts on the layouts these networks' convolutions pick (nChw8c when C is not a
 * multiple of 16, nhwc, a gate in another blocking than x), and its reference loop made
 * RegNetY's gates 72% of a training step and ConvNeXt's layer scales 37%. The loop here
 * walks x in its own layout, an (image, channel block) at a time over the device's threads:
 *   forward   y = x * g[n, c]           (channel padding of a blocked y written as 0)
 *   backward  dx = dy * g[n, c],  dg[n, c] = the sum over H, W of dy * x
 *             (the channel scale's over N too: a channel block a unit), summed in double.
 * Any layout with at most one inner block, on the channels, is walked by its strides; the
 * gate is x's type, the scale fp32 (the param arena), whatever x's. */
#include <stdlib.h>
#include <string.h>

#include "cpu_device.h"

/* A layout as the loop reads it: element (n, c, h, w) at
 * n * s[0] + (c / block) * s[1] + h * s[2] + w * s[3] + c % block. */
typedef struct walk {
  int64_t s[4];
  int64_t block, blocks; /* channels per block; blocks (padded channels / block) */
} walk;

static bool walk_of(const dnnl_memory_desc_t *md, walk *w) {
  if (md->format_kind != dnnl_blocked || md->ndims != 4) return false;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (b->inner_nblks > 1 || (b->inner_nblks == 1 && b->inner_idxs[0] != 1)) return false;
  for (int i = 0; i < 4; i++) w->s[i] = b->strides[i];
  w->block = b->inner_nblks ? b->inner_blks[0] : 1;
  w->blocks = md->padded_dims[1] / w->block;
  return true;
}

static inline int64_t at(const walk *w, int64_t n, int64_t c, int64_t h, int64_t x) {
  return n * w->s[0] + (c / w->block) * w->s[1] + h * w->s[2] + x * w->s[3] + c % w->block;
}

typedef struct gate_node {
  cpu_node base;
  walk x, g;        /* x's layout (y's and the gradients' too), the gate's */
  int per_image;    /* 1: an SE gate [N, C, 1, 1] (input 1); 0: the scale param [C] */
  int bf16, g_bf16; /* x's type, the gate's */
  int32_t images, channels, height, width;
  size_t gate_padding; /* bytes of the gate's buffer when it has channel padding, else 0 */
} gate_node;

typedef struct gate_job {
  const gate_node *s;
  const void *a; /* x (forward) or dy (backward) */
  const void *b; /* the gate's gradient: x; else unused */
  const void *gate;
  void *out;    /* y / dx, or the gate's gradient */
  int gradient; /* 1: out is the gate's gradient */
} gate_job;

static inline float load(const void *p, int64_t i, int bf16) {
  return bf16 ? cpu_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void store(void *p, int64_t i, float v, int bf16) {
  if (bf16) ((uint16_t *)p)[i] = cpu_f32_to_bf16(v);
  else ((float *)p)[i] = v;
}

/* The sum over H and W of a * b for image n, channel c. */
static double plane_dot(const gate_node *s, const void *a, const void *b, int64_t n, int64_t c) {
  double sum = 0.0;
  for (int64_t h = 0; h < s->height; h++)
    for (int64_t w = 0; w < s->width; w++) {
      const int64_t i = at(&s->x, n, c, h, w);
      sum += (double)load(a, i, s->bf16) * load(b, i, s->bf16);
    }
  return sum;
}

/* The gate's gradient. Units: (image, channel block) pairs for an SE gate, channel blocks
 * (every image summed) for the scale. */
static void gradient_range(const gate_job *job, int64_t begin, int64_t end) {
  const gate_node *s = job->s;
  const walk *xw = &s->x;
  for (int64_t u = begin; u < end; u++) {
    const int64_t n = s->per_image ? u / xw->blocks : 0, cb = u % xw->blocks;
    for (int64_t k = 0; k < xw->block; k++) {
      const int64_t c = cb * xw->block + k;
      if (c >= s->channels) continue; /* the gate's padding was zeroed whole */
      double sum = 0.0;
      if (s->per_image) sum = plane_dot(s, job->a, job->b, n, c);
      else
        for (int64_t m = 0; m < s->images; m++) sum += plane_dot(s, job->a, job->b, m, c);
      store(job->out, at(&s->g, n, c, 0, 0), (float)sum, s->g_bf16);
    }
  }
}

/* y (or dx) = a * g. Units are (image, channel block) pairs. */
static void gate_range(void *ctx, int64_t begin, int64_t end) {
  const gate_job *job = ctx;
  if (job->gradient) {
    gradient_range(job, begin, end);
    return;
  }
  const gate_node *s = job->s;
  const walk *xw = &s->x;
  for (int64_t u = begin; u < end; u++) {
    const int64_t n = u / xw->blocks, cb = u % xw->blocks;
    for (int64_t k = 0; k < xw->block; k++) {
      const int64_t c = cb * xw->block + k;
      const int real = c < s->channels;
      const float g = real ? load(job->gate, at(&s->g, n, c, 0, 0), s->g_bf16) : 0.0f;
      for (int64_t h = 0; h < s->height; h++)
        for (int64_t w = 0; w < s->width; w++) {
          const int64_t i = at(xw, n, c, h, w);
          store(job->out, i, real ? load(job->a, i, s->bf16) * g : 0.0f, s->bf16);
        }
    }
  }
}

static void gate_run(cpu_device *d, gate_node *s, const void *a, const void *b, const void *gate,
                     void *out, int gradient) {
  gate_job job = {s, a, b, gate, out, gradient};
  int64_t units = (gradient && !s->per_image ? 1 : s->images) * s->x.blocks;
  cpu_parallel_for(d, units, gate_range, &job);
}

static const void *gate_of(const gate_node *s, const cnnb_node_io *io) {
  return s->per_image ? io->inputs[1]
                      : cpu_param_ptr(s->base.g, io->params, s->base.node->params[0]);
}

static cnnb_status gate_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  gate_node *s = (gate_node *)n;
  gate_run(d, s, io->inputs[0], NULL, gate_of(s, io), io->output, 0);
  return CNNB_OK;
}

static cnnb_status gate_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  gate_node *s = (gate_node *)n;
  void *dgate = s->per_image ? io->input_grads[1]
                             : cpu_param_ptr(n->g, io->grads, n->node->params[0]);
  /* The gate's gradient first: it reads x, which never shares dx's buffer here (a gate of
   * one value per channel is never x itself: the shapes differ). */
  if (dgate) {
    if (s->gate_padding) memset(dgate, 0, s->gate_padding);
    gate_run(d, s, io->output_grad, io->inputs[0], NULL, dgate, 1);
  }
  if (io->input_grads[0])
    gate_run(d, s, io->output_grad, NULL, gate_of(s, io), io->input_grads[0], 0);
  return CNNB_OK;
}

static void gate_release(cpu_device *d, cpu_node *n) {
  (void)d;
  free(n);
}

static const cpu_node_ops gate_ops = {gate_forward, gate_backward, gate_release};

cnnb_status cpu_prepare_gate(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const int per_image = node->op == CNNB_OP_MULTIPLY;
  const dnnl_memory_desc_t *x = &p->md[node->inputs[0]];
  gate_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, node, sizeof *s, "its state");
  cpu_node_init(&s->base, &gate_ops, g, p, index);
  s->per_image = per_image;
  bool walks = walk_of(x, &s->x) && cpu_md_same(x, &p->md[index]) &&
               (x->data_type == dnnl_f32 || x->data_type == dnnl_bf16);
  if (walks && per_image) {
    const dnnl_memory_desc_t *gate = &p->md[node->inputs[1]];
    walks = walk_of(gate, &s->g) && gate->data_type == x->data_type;
    s->g_bf16 = gate->data_type == dnnl_bf16;
    if (gate->padded_dims[1] != gate->dims[1]) s->gate_padding = dnnl_memory_desc_get_size(gate);
  } else if (walks) { /* the param [C], fp32: element (n, c) at c */
    s->g = (walk){{0, 1, 0, 0}, 1, node->shape.c};
  }
  if (!walks) {
    free(s);
    return CNNB_EUNSUPPORTED; /* the caller runs it on oneDNN's binary instead */
  }
  s->bf16 = x->data_type == dnnl_bf16;
  s->images = node->shape.n;
  s->channels = node->shape.c;
  s->height = node->shape.h;
  s->width = node->shape.w;
  *out = &s->base;
  return CNNB_OK;
}
