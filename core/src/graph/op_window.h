/* op_window.h — TensorFlow's window arithmetic for the ops that slide a window (conv2d,
 * max and avg pool): their checks, output size and padding resolved to explicit pads, so
 * devices only ever see pad_top/bottom/left/right. Used by the op table's shape rules. */
#ifndef CNNB_OP_WINDOW_H
#define CNNB_OP_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <cnnb/graph.h>

/* Checks n->attr.window's kernel, stride and dilation and `padding` (SAME, VALID or
 * EXPLICIT with the pads in attr.window.pad_*) against input `in`, then writes the
 * resolved pads and n->shape = [in.n, in.c, out_h, out_w]. `kind` names the window in
 * refusals ("filter" or "window"). On a refusal: false, with why in error[size]. */
bool cnnb_window_resolve(cnnb_node *n, uint32_t padding, cnnb_shape in, const char *kind,
                         char *error, size_t size);

#endif
