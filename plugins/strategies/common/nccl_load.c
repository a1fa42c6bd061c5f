/* nccl_load.c — finds, opens and checks the NCCL implementation (nccl_load.h), as the
 * cuda device plugin opens its own (plugins/devices/cuda/plugin.c): dlopen of a file
 * beside this plugin, RTLD_LOCAL so NCCL's and CUDA's symbols stay out of the process's
 * namespace, its version checked before the table is used. */
#define _GNU_SOURCE /* dladdr */
#include "nccl_load.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the implementation is: $CNNB_NCCL_LIBRARY, else beside this plugin's file. */
static int impl_path(char *buf, size_t size) {
  const char *given = getenv(NCCL_API_LIBRARY_ENV);
  if (given && *given) return snprintf(buf, size, "%s", given) < (int)size ? 0 : -1;
  Dl_info info;
  if (!dladdr((void *)impl_path, &info) || !info.dli_fname) return -1;
  const char *slash = strrchr(info.dli_fname, '/');
  int n = slash ? snprintf(buf, size, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                           NCCL_API_IMPL_FILE)
                : snprintf(buf, size, "./%s", NCCL_API_IMPL_FILE);
  return n > 0 && (size_t)n < size ? 0 : -1;
}

bool nccl_load_built(void) {
  char path[4096];
  return impl_path(path, sizeof path) == 0 && access(path, R_OK) == 0;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const nccl_api *loaded;

static cnnb_status open_impl(cnnb_ctx *ctx, const char *who, const nccl_api **out) {
  char path[4096];
  if (impl_path(path, sizeof path) != 0)
    return cnnb_error(ctx, CNNB_EINTERNAL, "%s: cannot find the strategy plugin's own directory",
                      who);
  const char *given = getenv(NCCL_API_LIBRARY_ENV);
  if (given && *given && access(path, R_OK) != 0)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED, "%s: %s=%s cannot be read", who, NCCL_API_LIBRARY_ENV,
                      path);
  if (access(path, R_OK) != 0)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "%s: this build has no NCCL (%s is missing): configure with the CUDA "
                      "toolkit and NCCL (cmake says \"component NCCL: on\"), not under "
                      "CNNB_SANITIZE",
                      who, path);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED, "%s: cannot load %s: %s", who, path, dlerror());
  void *sym = dlsym(lib, NCCL_API_ENTRY);
  nccl_api_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  const nccl_api *api = sym ? entry() : NULL;
  if (!api || api->struct_size < sizeof(nccl_api) || !api->version ||
      strcmp(api->version, NCCL_API_VERSION) != 0) {
    const char *version = api && api->version ? api->version : "unknown";
    dlclose(lib);
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "%s: %s has table version %s, this plugin %s: install both from one build",
                      who, path, version, NCCL_API_VERSION);
  }
  *out = api; /* the library stays loaded for the process's life, as NCCL's state does */
  return CNNB_OK;
}

cnnb_status nccl_load(cnnb_ctx *ctx, const char *who, const nccl_api **out) {
  *out = NULL;
  pthread_mutex_lock(&lock);
  cnnb_status st = loaded ? CNNB_OK : open_impl(ctx, who, &loaded);
  pthread_mutex_unlock(&lock);
  if (st != CNNB_OK) return st;
  const char *why = loaded->unavailable();
  if (why)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED, "%s: NCCL cannot run on this machine: %s", who, why);
  *out = loaded;
  return CNNB_OK;
}
