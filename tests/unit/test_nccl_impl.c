/* test_nccl_impl.c — the strategies' NCCL implementation (plugins/strategies/nccl_impl,
 * <plugins>/nccl/libcnnb_nccl_impl.so) on any machine, GPU or not: a strategy plugin
 * loads without mapping NCCL; the implementation loads with every symbol resolved (it is
 * the one that links NCCL), exports its entry alone, gives the table of the plugins'
 * version with every slot filled, names the NCCL and CUDA runtime it was built with, and
 * says in one line why it cannot run where it cannot. Skips (77) where it is not built
 * (no NCCL at configure time, sanitizer builds). The collectives themselves are checked
 * against the recording stub (cli_strategy_nccl) and on a GPU (cli_gpu_nccl). */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_api.h"

static char impl_path[4096], plugin_path[4096];

START_TEST(strategy_plugin_maps_no_nccl) {
  /* Its SDK symbols come from this executable (ENABLE_EXPORTS). */
  void *plugin = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(plugin != NULL, "%s", dlerror());
  ck_assert_ptr_nonnull(dlsym(plugin, "cnnb_plugin_entry"));
  ck_assert_msg(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD) == NULL,
                "loading the replicated plugin mapped libnccl.so.2");
  dlclose(plugin);
}
END_TEST

START_TEST(implementation_fills_the_table) {
  void *lib = dlopen(impl_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(lib != NULL, "%s", dlerror());
  /* It links NCCL itself, so NCCL is mapped now. */
  ck_assert_ptr_nonnull(dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD));
  void *sym = dlsym(lib, NCCL_API_ENTRY);
  ck_assert_msg(sym != NULL, "%s exports no %s", impl_path, NCCL_API_ENTRY);
  /* Its own functions stay hidden (impl.map). */
  ck_assert_ptr_null(dlsym(lib, "nccl_convert_launch"));
  ck_assert_ptr_null(dlsym(lib, "all_reduce"));
  nccl_api_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  const nccl_api *api = entry();
  ck_assert_ptr_nonnull(api);
  ck_assert_uint_ge(api->struct_size, sizeof(nccl_api));
  ck_assert_str_eq(api->version, NCCL_API_VERSION);
  const void *slots[] = {api->unavailable,   api->describe,       api->last_error,
                         api->get_unique_id, api->comm_init_rank, api->group_start,
                         api->group_end,     api->all_reduce,     api->reduce,
                         api->broadcast,     api->premul_sum,     api->op_destroy,
                         api->comm_status,   api->comm_finalize,  api->comm_destroy,
                         api->comm_abort,    api->event_create,   api->event_record,
                         api->event_query,   api->event_destroy,  api->convert};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    ck_assert_msg(slots[i] != NULL, "slot %zu is NULL", i);
  /* ncclGetVersion and cudaRuntimeGetVersion need no GPU. */
  const char *what = api->describe();
  ck_assert_msg(strncmp(what, "NCCL 2.", 7) == 0 && strstr(what, "(CUDA runtime ") != NULL,
                "describe: %s", what);
  printf("test_nccl_impl: %s\n", what);
  const char *why = api->unavailable();
  if (why) { /* no GPU here: one line, the same every time */
    printf("test_nccl_impl: cannot run here: %s\n", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    ck_assert_uint_gt(strlen(why), 10);
    ck_assert_str_eq(api->unavailable(), why);
    if (access("/dev/nvidiactl", F_OK) != 0 && !dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD))
      ck_assert_msg(strstr(why, "libcuda.so.1") || strstr(why, "GPU") || strstr(why, "CUDA"),
                    "the reason names neither the driver nor a GPU: %s", why);
  }
  dlclose(lib);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nccl_impl");
  TCase *tc = tcase_create("nccl_impl");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, strategy_plugin_maps_no_nccl);
  tcase_add_test(tc, implementation_fills_the_table);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (!dir) {
    fprintf(stderr, "test_nccl_impl: CNNB_PLUGIN_DIR is not set (run it through ctest)\n");
    return 1;
  }
  snprintf(impl_path, sizeof impl_path, "%s/%s", dir, NCCL_API_IMPL_FILE);
  snprintf(plugin_path, sizeof plugin_path, "%s/libcnnb_strategy_replicated.so", dir);
  if (access(impl_path, R_OK) != 0 || access(plugin_path, R_OK) != 0) {
    printf("test_nccl_impl: skipped: the NCCL implementation or the replicated plugin is not "
           "built here (%s)\n",
           impl_path);
    return 77;
  }
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
