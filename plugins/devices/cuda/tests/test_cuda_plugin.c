/* test_cuda_plugin.c — what the `cuda` device promises on any machine, GPU or not (the
 * conformance suites cover the GPU itself, label gpu): the plugin loads through the
 * host's loader without any CUDA library, offers its flags and capabilities, says in
 * one line why it cannot run where it cannot (never crashing), and its implementation
 * (cuda/libcnnb_cuda_impl.so) loads with every symbol resolved, matches the plugin's
 * version, fills every [required] slot and runs every op of the ABI in every precision
 * (its supports_op, which needs no GPU). Skips (77) when the plugin is not built;
 * the implementation's cases skip where it is not (sanitizer builds). */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cnnb/cnnb.h>
#include "gpu_impl.h"
#include "loader/loader.h"
#include "graph/op_device.h"

static char plugin_path[4096], impl_path[4096];

static const cnnb_plugin *load_plugin(cnnb_loader **l, cnnb_ctx **ctx) {
  *ctx = cnnb_ctx_create("test", NULL);
  *l = cnnb_loader_create(*ctx);
  ck_assert_ptr_nonnull(*l);
  char err[1024] = "";
  ck_assert_msg(cnnb_loader_discover(*l, plugin_path, err, sizeof err) == CNNB_OK, "%s", err);
  const cnnb_plugin *p = NULL;
  ck_assert_msg(cnnb_loader_find(*l, CNNB_KIND_DEVICE, "cuda", &p, NULL, err, sizeof err) ==
                    CNNB_OK,
                "%s", err);
  return p;
}

START_TEST(plugin_loads_without_cuda_libraries) {
  cnnb_loader *l;
  cnnb_ctx *ctx;
  const cnnb_plugin *p = load_plugin(&l, &ctx);
  ck_assert_str_eq(p->name, "cuda");
  ck_assert_str_eq(p->version, GPU_DEVICE_VERSION);
  ck_assert_str_eq(p->offers[0], "cuda");
  ck_assert_ptr_null(p->offers[1]);
  ck_assert_ptr_nonnull(p->register_flags);
  ck_assert_ptr_nonnull(p->get_extension(CNNB_EXT_DEVICE_AVAILABILITY));
  ck_assert_ptr_nonnull(p->get_extension(CNNB_EXT_FUSED_RELU_ADD));
  ck_assert_ptr_nonnull(p->get_extension(CNNB_EXT_DEVICE_UINT8_INPUT));
  /* GPU memory: strategies must stage through copy_to_host / copy_to_device. */
  ck_assert_ptr_null(p->get_extension(CNNB_EXT_HOST_MEMORY));
  ck_assert_ptr_null(p->get_extension("cnnb.no.such/1"));
  /* Loading the plugin mapped no CUDA library: they come with the implementation. */
  ck_assert_ptr_null(dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD));
  ck_assert_ptr_null(dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD));
  cnnb_loader_destroy(l);
  cnnb_ctx_destroy(ctx);
}
END_TEST

/* Where it cannot run: one line, the same every time, and create() refuses with it. */
START_TEST(unavailable_is_one_line_and_create_refuses) {
  cnnb_loader *l;
  cnnb_ctx *ctx;
  const cnnb_plugin *p = load_plugin(&l, &ctx);
  const char *why = cnnb_device_unavailable(p);
  if (!why) { /* a GPU machine: the gpu-labelled suites cover it */
    cnnb_loader_destroy(l);
    cnnb_ctx_destroy(ctx);
    return;
  }
  ck_assert_ptr_null(strchr(why, '\n'));
  ck_assert_uint_gt(strlen(why), 10);
  ck_assert_str_eq(cnnb_device_unavailable(p), why);
  const cnnb_device_vtable *dv = p->vtable;
  cnnb_device_config cfg = {
      .struct_size = sizeof cfg, .precision = CNNB_PRECISION_FP32, .training = 1};
  void *dev = (void *)1;
  ck_assert_int_eq(dv->create(ctx, "cuda", &cfg, &dev), CNNB_EUNSUPPORTED);
  ck_assert_ptr_null(dev);
  ck_assert_msg(strstr(cnnb_error_message(ctx), why) != NULL, "create: %s (reason: %s)",
                cnnb_error_message(ctx), why);
  cnnb_loader_destroy(l);
  cnnb_ctx_destroy(ctx);
}
END_TEST

static const gpu_impl *open_impl(void **lib) {
  *lib = dlopen(impl_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(*lib != NULL, "%s", dlerror());
  gpu_impl_entry_fn entry = (gpu_impl_entry_fn)dlsym(*lib, GPU_IMPL_ENTRY);
  ck_assert_msg(entry != NULL, "%s exports no %s", impl_path, GPU_IMPL_ENTRY);
  return entry();
}

START_TEST(implementation_matches_the_plugin) {
  if (access(impl_path, R_OK) != 0) return; /* a sanitizer build leaves it out */
  void *lib;
  const gpu_impl *impl = open_impl(&lib);
  ck_assert_ptr_nonnull(impl);
  ck_assert_uint_ge(impl->struct_size, sizeof(gpu_impl));
  ck_assert_str_eq(impl->version, GPU_DEVICE_VERSION);
  const cnnb_device_vtable *v = impl->vtable;
  ck_assert_uint_eq(v->struct_size, sizeof(cnnb_device_vtable));
  /* Every slot: the plugin forwards each one without checking. */
  const void *slots[] = {v->create,       v->destroy,        v->describe,         v->alloc,
                         v->free,         v->copy_to_device, v->copy_to_host,     v->fill_zero,
                         v->synchronize,  v->tensor_bytes,   v->tensor_from_host, v->tensor_to_host,
                         v->prepare,      v->release,        v->forward,          v->backward,
                         v->accumulate,   v->update,         v->all_finite,       v->supports_op,
                         v->get_extension};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    ck_assert_msg(slots[i] != NULL, "slot %zu is NULL", i);
  ck_assert_ptr_nonnull(impl->uint8_input);
  ck_assert_ptr_nonnull(impl->uint8_input->input_from_host_uint8);
  /* Every op of the ABI (its op table, ops.c): supports_op reads only the table. */
  for (uint32_t op = CNNB_OP_INPUT; op < CNNB_OP_COUNT_; op++)
    ck_assert_msg(v->supports_op(NULL, op) == 1, "op %u: supports_op is not 1", op);
  ck_assert_int_eq(v->supports_op(NULL, CNNB_OP_COUNT_ + 7), 0);
  dlclose(lib);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cuda_plugin");
  TCase *tc = tcase_create("cuda_plugin");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, plugin_loads_without_cuda_libraries);
  tcase_add_test(tc, unavailable_is_one_line_and_create_refuses);
  tcase_add_test(tc, implementation_matches_the_plugin);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (!dir) {
    fprintf(stderr, "test_cuda_plugin: CNNB_PLUGIN_DIR is not set (run it through ctest)\n");
    return 1;
  }
  snprintf(plugin_path, sizeof plugin_path, "%s/libcnnb_device_cuda.so", dir);
  snprintf(impl_path, sizeof impl_path, "%s/%s", dir, GPU_IMPL_FILE);
  if (access(plugin_path, R_OK) != 0) {
    printf("test_cuda_plugin: skipped: the cuda device is not built here (%s)\n", plugin_path);
    return 77;
  }
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
