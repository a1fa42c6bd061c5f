/* ops_pad.c — the pads: pad_channels and, at the end of the file, pad_spatial.
 *
 * pad_channels (ABI 1.2): `before` zero channels, x, `after` zero channels,
 * the CIFAR ResNets' shortcut. Forward is oneDNN's concat of (a zero buffer, x, the
 * zero buffer) made once in prepare; backward hands x the middle channel range of the
 * output gradient (a reorder out of a sub-memory view, as concat's backward does).
 *
 * The output keeps its input's layout family (x in nChw16c gives y in nChw16c), so the
 * residual add that follows meets the convolution's layout and converts nothing; only
 * if oneDNN's concat refuses that layout does the output go plain NCHW. A blocked
 * gradient cannot be cut at a channel offset inside a block (16 channels padded by 8),
 * so backward then converts it to plain NCHW first, in the device's transient buffer.
 * Nothing is allocated per step. */
#include <stdlib.h>

#include "cpu_device.h"

typedef struct pad_node {
  cpu_node base;
  int32_t count; /* concat sources: x and each non-empty zero range */
  dnnl_primitive_t fwd;
  dnnl_memory_t src[3], dst;
  dnnl_exec_arg_t args[4];
  void *zeros;        /* read-only; bound to both zero sources */
  int32_t x_arg;      /* which source is x */
  cpu_xform to_plain; /* backward via plain: dy -> plain */
  int bwd_via_plain;
  cpu_xform slice; /* dy's middle channels (a view) -> x's gradient layout */
} pad_node;

/* Layout tags a pad output can inherit from its input; anything else goes plain. */
static const dnnl_format_tag_t inherited_tags[] = {dnnl_nchw, dnnl_nChw16c, dnnl_nChw8c,
                                                   dnnl_nChw4c, dnnl_nhwc};

/* The tag of `md` (shape s) among inherited_tags, or dnnl_nchw. */
static dnnl_format_tag_t tag_of(const dnnl_memory_desc_t *md, cnnb_shape s) {
  dnnl_dim_t dims[4] = {s.n, s.c, s.h, s.w};
  for (size_t i = 0; i < sizeof inherited_tags / sizeof *inherited_tags; i++) {
    dnnl_memory_desc_t cand = cpu_md_tag(4, dims, md->data_type, inherited_tags[i]);
    if (cpu_md_same(md, &cand)) return inherited_tags[i];
  }
  return dnnl_nchw;
}

/* The concat's sources: each non-empty zero range in layout `tag` (zeros are zeros in
 * any layout, and sources in the destination's layout let oneDNN take its fast path),
 * and x in its own layout. Returns their count; *x_arg is x's place, *zero_bytes the
 * larger zero range's size. */
static int32_t pad_sources(const cnnb_graph *g, const cpu_plan *p, const cnnb_node *n,
                           dnnl_format_tag_t tag, dnnl_data_type_t dt, dnnl_memory_desc_t srcs[3],
                           int32_t *x_arg, size_t *zero_bytes) {
  cnnb_shape ys = n->shape;
  const int32_t widths[3] = {n->attr.pad.before, cnnb_graph_node(g, n->inputs[0])->shape.c,
                             n->attr.pad.after};
  int32_t count = 0;
  *zero_bytes = 0;
  for (int k = 0; k < 3; k++) {
    if (k == 1) {
      *x_arg = count;
      srcs[count++] = p->md[n->inputs[0]];
    } else if (widths[k] > 0) {
      dnnl_dim_t dims[4] = {ys.n, widths[k], ys.h, ys.w};
      srcs[count] = cpu_md_tag(4, dims, dt, tag);
      size_t bytes = dnnl_memory_desc_get_size(&srcs[count++]);
      if (bytes > *zero_bytes) *zero_bytes = bytes;
    }
  }
  return count;
}

cnnb_status cpu_layout_pad(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                           dnnl_memory_desc_t *out) {
  const cnnb_node *n = cnnb_graph_node(g, index);
  const dnnl_memory_desc_t *x = &p->md[n->inputs[0]];
  dnnl_format_tag_t tag = tag_of(x, cnnb_graph_node(g, n->inputs[0])->shape);
  dnnl_dim_t dims[4] = {n->shape.n, n->shape.c, n->shape.h, n->shape.w};
  *out = cpu_md_tag(4, dims, x->data_type, tag);
  if (tag == dnnl_nchw) return CNNB_OK;
  dnnl_memory_desc_t srcs[3];
  int32_t x_arg;
  size_t zero_bytes;
  int32_t count = pad_sources(g, p, n, tag, x->data_type, srcs, &x_arg, &zero_bytes);
  dnnl_primitive_desc_t pd;
  cnnb_status st = cpu_concat_pd(d, n, count, srcs, out, &pd, 1);
  if (st == CNNB_OK) {
    dnnl_primitive_desc_destroy(pd);
    return CNNB_OK;
  }
  if (st != CNNB_EUNSUPPORTED) return st; /* out of memory is not a layout refusal */
  *out = cpu_md_nchw(n->shape, x->data_type);
  return CNNB_OK;
}

static cnnb_status pad_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  pad_node *s = (pad_node *)n;
  for (int32_t i = 0; i < s->count; i++)
    cpu_bind(s->src[i], i == s->x_arg ? io->inputs[0] : s->zeros);
  cpu_bind(s->dst, io->output);
  return cpu_exec(d, s->fwd, s->count + 1, s->args, n->node, "pad_channels forward");
}

static cnnb_status pad_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  pad_node *s = (pad_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  const void *grad = io->output_grad;
  cnnb_status st;
  if (s->bwd_via_plain) {
    if ((st = cpu_xform_run(d, &s->to_plain, grad, cpu_transient(d, 0), n->node))) return st;
    grad = cpu_transient(d, 0);
  }
  return cpu_xform_run(d, &s->slice, grad, io->input_grads[0], n->node);
}

static void pad_release(cpu_device *d, cpu_node *n) {
  (void)d;
  pad_node *s = (pad_node *)n;
  if (s->fwd) dnnl_primitive_destroy(s->fwd);
  for (int i = 0; i < 3; i++)
    if (s->src[i]) dnnl_memory_destroy(s->src[i]);
  if (s->dst) dnnl_memory_destroy(s->dst);
  cpu_free(s->zeros);
  cpu_xform_fini(&s->to_plain);
  cpu_xform_fini(&s->slice);
  free(s);
}

static const cpu_node_ops pad_ops = {pad_forward, pad_backward, pad_release};

cnnb_status cpu_prepare_pad(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                            cpu_node **out) {
  pad_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &pad_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *ymd = &p->md[index];
  const dnnl_memory_desc_t *xmd = &p->md[node->inputs[0]];
  cnnb_shape ys = node->shape, xs = cnnb_graph_node(g, node->inputs[0])->shape;
  int32_t before = node->attr.pad.before, after = node->attr.pad.after;
  dnnl_primitive_desc_t pd = NULL;
  cnnb_status st = CNNB_OK;
  if (node->num_inputs != 1 || before < 0 || after < 0 || ys.c != before + xs.c + after) {
    st = cnnb_error(d->ctx, CNNB_EINVAL,
                    "cpu: pad_channels '%s': %d inputs, pads %d, %d, %d channels in, %d out",
                    node->name, node->num_inputs, before, after, xs.c, ys.c);
    goto done;
  }

  dnnl_memory_desc_t srcs[3];
  size_t zero_bytes;
  s->count = pad_sources(g, p, node, tag_of(ymd, ys), ymd->data_type, srcs, &s->x_arg, &zero_bytes);
  if (zero_bytes && !(s->zeros = cpu_alloc(zero_bytes))) { /* cpu_alloc zeroes */
    st = cpu_oom(d, node, zero_bytes, "the zeros of pad_channels");
    goto done;
  }
  if ((st = cpu_concat_pd(d, node, s->count, srcs, ymd, &pd, 0))) goto done;
  if ((st = cpu_prim_create(d, &s->fwd, pd, node, "pad_channels"))) goto done;
  for (int32_t i = 0; i < s->count; i++) {
    if ((st = cpu_mem(d, &s->src[i], &srcs[i], node))) goto done;
    s->args[i] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + i, s->src[i]};
  }
  if ((st = cpu_mem(d, &s->dst, ymd, node))) goto done;
  s->args[s->count] = (dnnl_exec_arg_t){DNNL_ARG_DST, s->dst};

  if (d->cfg.training) {
    dnnl_dims_t dims = {xs.n, xs.c, xs.h, xs.w}, offsets = {0, before, 0, 0};
    dnnl_memory_desc_t view, plain = cpu_md_nchw(ys, ymd->data_type);
    if (dnnl_memory_desc_init_submemory(&view, ymd, dims, offsets) != dnnl_success) {
      if ((st = cpu_xform_init(d, &s->to_plain, ymd, &plain, node,
                               "pad_channels gradient to plain")))
        goto done;
      if ((st = cpu_transient_reserve(d, 0, dnnl_memory_desc_get_size(&plain), node))) goto done;
      s->bwd_via_plain = 1;
      if (dnnl_memory_desc_init_submemory(&view, &plain, dims, offsets) != dnnl_success) {
        st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cpu: pad_channels '%s': cannot slice plain NCHW",
                        node->name);
        goto done;
      }
    }
    if ((st = cpu_xform_init(d, &s->slice, &view, xmd, node, "pad_channels gradient slice")))
      goto done;
  }
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (st) {
    pad_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}

/* ---- pad_spatial (ABI 1.10: CNNB_ABI_MINOR_PAD_SPATIAL) ------------------------------ */

/* pad_spatial: zero rows and columns added on each side of H and W, or cut off where an
 * amount is negative (NASNet's factorized reduction: pad bottom/right by one, cut the
 * first row and column). The output keeps its input's layout family, as pad_channels'
 * does; the part of x that survives is one reorder between two sub-memory views (blocked
 * layouts block channels only, so a spatial offset is a view in any of them), and the
 * rest of the output is zeroed first. Backward is the same copy the other way: dx is the
 * part of dy over x, zero where x was cut. Nothing is allocated per step. */

typedef struct pad_spatial_node {
  cpu_node base;
  int64_t rows, cols;   /* the surviving region; 0: nothing survives */
  int y_whole, x_whole; /* the region covers all of y (x): no zeroing needed */
  size_t y_bytes, x_bytes;
  cpu_xform fwd; /* x's region -> y's region */
  cpu_xform bwd; /* dy's region -> dx's region */
} pad_spatial_node;

cnnb_status cpu_layout_pad_spatial(cpu_device *d, const cnnb_graph *g, const cpu_plan *p,
                                   int32_t index, dnnl_memory_desc_t *out) {
  (void)d;
  const cnnb_node *n = cnnb_graph_node(g, index);
  const dnnl_memory_desc_t *x = &p->md[n->inputs[0]];
  dnnl_format_tag_t tag = tag_of(x, cnnb_graph_node(g, n->inputs[0])->shape);
  dnnl_dim_t dims[4] = {n->shape.n, n->shape.c, n->shape.h, n->shape.w};
  *out = cpu_md_tag(4, dims, x->data_type, tag);
  return CNNB_OK;
}

static cnnb_status pad_spatial_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  pad_spatial_node *s = (pad_spatial_node *)n;
  if (!s->y_whole) memset(io->output, 0, s->y_bytes);
  if (!s->rows) return CNNB_OK;
  return cpu_xform_run(d, &s->fwd, io->inputs[0], io->output, n->node);
}

static cnnb_status pad_spatial_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  pad_spatial_node *s = (pad_spatial_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  if (!s->x_whole) memset(io->input_grads[0], 0, s->x_bytes);
  if (!s->rows) return CNNB_OK;
  return cpu_xform_run(d, &s->bwd, io->output_grad, io->input_grads[0], n->node);
}

static void pad_spatial_release(cpu_device *d, cpu_node *n) {
  (void)d;
  pad_spatial_node *s = (pad_spatial_node *)n;
  cpu_xform_fini(&s->fwd);
  cpu_xform_fini(&s->bwd);
  free(s);
}

static const cpu_node_ops pad_spatial_ops = {pad_spatial_forward, pad_spatial_backward,
                                             pad_spatial_release};

/* [lo, hi) of x's extent `size` that lands inside an output of `out` after shifting by
 * `before` (the top or left amount). */
static void surviving(int32_t size, int32_t before, int32_t out, int64_t *lo, int64_t *hi) {
  *lo = before < 0 ? -(int64_t)before : 0;
  *hi = (int64_t)out - before < size ? (int64_t)out - before : size;
  if (*hi < *lo) *hi = *lo;
}

cnnb_status cpu_prepare_pad_spatial(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                    cpu_node **out) {
  pad_spatial_node *s = calloc(1, sizeof *s);
  if (!s) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *s, "its state");
  cpu_node_init(&s->base, &pad_spatial_ops, g, p, index);
  const cnnb_node *node = s->base.node;
  const dnnl_memory_desc_t *ymd = &p->md[index], *xmd = &p->md[node->inputs[0]];
  const cnnb_shape ys = node->shape, xs = cnnb_graph_node(g, node->inputs[0])->shape;
  const int32_t top = node->attr.pad_spatial.top, left = node->attr.pad_spatial.left;
  cnnb_status st = CNNB_OK;
  if (node->num_inputs != 1 || ys.n != xs.n || ys.c != xs.c ||
      (int64_t)ys.h != (int64_t)top + xs.h + node->attr.pad_spatial.bottom ||
      (int64_t)ys.w != (int64_t)left + xs.w + node->attr.pad_spatial.right) {
    st = cnnb_error(d->ctx, CNNB_EINVAL,
                    "cpu: pad_spatial '%s': %d inputs, pads %d, %d, %d, %d take [%d, %d, %d, %d] "
                    "to [%d, %d, %d, %d]",
                    node->name, node->num_inputs, top, node->attr.pad_spatial.bottom, left,
                    node->attr.pad_spatial.right, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
    goto done;
  }
  int64_t r0, r1, c0, c1;
  surviving(xs.h, top, ys.h, &r0, &r1);
  surviving(xs.w, left, ys.w, &c0, &c1);
  s->rows = r1 - r0, s->cols = c1 - c0;
  if (!s->cols) s->rows = 0;
  s->y_bytes = dnnl_memory_desc_get_size(ymd);
  s->x_bytes = dnnl_memory_desc_get_size(xmd);
  s->y_whole = s->rows == ys.h && s->cols == ys.w;
  s->x_whole = s->rows == xs.h && s->cols == xs.w;
  if (s->rows) {
    dnnl_dims_t dims = {xs.n, xs.c, s->rows, s->cols};
    dnnl_dims_t x_off = {0, 0, r0, c0}, y_off = {0, 0, r0 + top, c0 + left};
    dnnl_memory_desc_t xview, yview;
    if (dnnl_memory_desc_init_submemory(&xview, xmd, dims, x_off) != dnnl_success ||
        dnnl_memory_desc_init_submemory(&yview, ymd, dims, y_off) != dnnl_success) {
      st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cpu: pad_spatial '%s': cannot view its region",
                      node->name);
      goto done;
    }
    if ((st = cpu_xform_init(d, &s->fwd, &xview, &yview, node, "pad_spatial forward"))) goto done;
    if (d->cfg.training &&
        (st = cpu_xform_init(d, &s->bwd, &yview, &xview, node, "pad_spatial gradient")))
      goto done;
  }
done:
  if (st) {
    pad_spatial_release(d, &s->base);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
