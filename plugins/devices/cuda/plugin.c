/* plugin.c — the `cuda` device plugin as the loader sees it: descriptor, flags, whether
 * this machine can run it, and a vtable that forwards every call to the implementation
 * (libcnnb_cuda_impl.so, device.c), which it loads when a run creates the first device.
 *
 * Why two objects: the implementation links cuDNN and cuBLAS, hundreds of megabytes that
 * every cnnbench start (the loader opens each plugin) would otherwise map, and whose
 * loading a machine without them would refuse. This file links no CUDA library: the
 * driver is probed through dlopen("libcuda.so.1"), as the CUDA runtime itself finds it,
 * so the plugin loads everywhere and `--list_plugins` and `--device=cuda` can say in one
 * line what is missing (the driver, a device, the implementation). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <cnnb/cnnb.h>

#include "algo_cache_file.h" /* GPU_ALGO_FILE_AUTO only: plain C, no CUDA */
#include "gpu_impl.h"

/* ---- the driver probe ------------------------------------------------------------ */

/* The CUDA driver API's few calls the probe needs (cuda.h's signatures; CUresult is
 * an int-sized enum, 0 = CUDA_SUCCESS). */
typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_count_fn)(int *count);
typedef int (*cu_version_fn)(int *version);
typedef int (*cu_error_fn)(int error, const char **text);

static char unavailable_why[512];
static int probed;

/* The driver library the probe opens: NVIDIA's, or in the test-only fake tree
 * (CNNB_CUDA_FAKE) the fake's, by its path in the build tree. */
/* The CUDA runtime version the implementation is built with (CMakeLists.txt): 13000 for
 * 13.0. */
#ifndef GPU_RUNTIME_VERSION
#error "GPU_RUNTIME_VERSION: the build defines it from the CUDA toolkit's version"
#endif
#ifndef GPU_DRIVER_LIBRARY
#define GPU_DRIVER_LIBRARY "libcuda.so.1"
#endif

/* The directory of this plugin's file, for the implementation beside it. */
static int plugin_dir(char *buf, size_t size) {
  Dl_info info;
  if (!dladdr((void *)plugin_dir, &info) || !info.dli_fname) return -1;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return snprintf(buf, size, ".") < (int)size ? 0 : -1;
  int n = snprintf(buf, size, "%.*s", (int)(slash - info.dli_fname), info.dli_fname);
  return n > 0 && (size_t)n < size ? 0 : -1;
}

static int impl_path(char *buf, size_t size) {
  char dir[4096];
  if (plugin_dir(dir, sizeof dir)) return -1;
  int n = snprintf(buf, size, "%s/%s", dir, GPU_IMPL_FILE);
  return n > 0 && (size_t)n < size ? 0 : -1;
}

/* "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"; the driver's own names
 * when it can give them (the toolkit's stub library cannot). */
static const char *cu_error_text(void *lib, int code) {
  cu_error_fn name = (cu_error_fn)dlsym(lib, "cuGetErrorName");
  cu_error_fn text = (cu_error_fn)dlsym(lib, "cuGetErrorString");
  static char buf[256];
  const char *n = NULL, *t = NULL;
  if (name && name(code, &n) != 0) n = NULL;
  if (text && text(code, &t) != 0) t = NULL;
  if (n) snprintf(buf, sizeof buf, "%s (%s)", n, t ? t : "no description");
  else if (code == 34) /* CUDA_ERROR_STUB_LIBRARY */
    snprintf(buf, sizeof buf,
             "CUresult 34, CUDA_ERROR_STUB_LIBRARY: the toolkit's stub "
             "libcuda.so.1 is on the library path instead of the driver's");
  else snprintf(buf, sizeof buf, "CUresult %d", code);
  return buf;
}

/* The oldest driver release (Linux) that runs each major CUDA runtime version: NVIDIA's
 * CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions". */
static const char *minimum_driver(int cuda_major) {
  return cuda_major >= 13 ? "580" : cuda_major == 12 ? "525" : cuda_major == 11 ? "450" : "?";
}

/* The loaded kernel module's release ("580.65.06"), or "" where it cannot be read. */
static void driver_release(char *buf, size_t size) {
  buf[0] = '\0';
  FILE *f = fopen("/sys/module/nvidia/version", "r");
  if (!f) return;
  if (fgets(buf, (int)size, f)) buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

/* Whether a driver that supports CUDA `driver` runs this build's runtime
 * (GPU_RUNTIME_VERSION): the same major version or newer (minor versions are compatible
 * within a major). When not, unavailable_why names both and the fix: the CUDA runtime
 * itself would fail only at the first call, with "CUDA driver version is insufficient". */
static int driver_new_enough(int driver) {
  int need = GPU_RUNTIME_VERSION / 1000;
  if (driver <= 0 || driver / 1000 >= need) return 1;
  char release[64];
  driver_release(release, sizeof release);
  snprintf(unavailable_why, sizeof unavailable_why,
           "the NVIDIA driver%s%s supports CUDA %d.%d, older than %s, which this build "
           "(CUDA %d.%d runtime) needs: update the driver to %s or newer, or rebuild cnnbench "
           "with a CUDA %d toolkit",
           release[0] ? " " : "", release, driver / 1000, driver % 1000 / 10, minimum_driver(need),
           need, GPU_RUNTIME_VERSION % 1000 / 10, minimum_driver(need), driver / 1000);
  return 0;
}

/* Fills unavailable_why, or leaves it empty when a GPU is usable. */
static void probe(void) {
  char path[4096];
  if (impl_path(path, sizeof path) || access(path, R_OK) != 0) {
    snprintf(unavailable_why, sizeof unavailable_why,
             "built without its implementation: %s is missing (sanitizer builds leave it out; "
             "rebuild with the CUDA toolkit and cuDNN)",
             GPU_IMPL_FILE);
    return;
  }
  void *lib = dlopen(GPU_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(unavailable_why, sizeof unavailable_why,
             "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s)", dlerror());
    return;
  }
  /* The handle stays open: the CUDA runtime opens the same library and unloading a
   * driver library is never safe. */
  cu_init_fn init = (cu_init_fn)dlsym(lib, "cuInit");
  cu_count_fn count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
  cu_version_fn version = (cu_version_fn)dlsym(lib, "cuDriverGetVersion");
  if (!init || !count || !version) {
    snprintf(unavailable_why, sizeof unavailable_why,
             "libcuda.so.1 lacks cuInit / cuDeviceGetCount: not an NVIDIA driver library");
    return;
  }
  int driver = 0, devices = 0, rc;
  char driver_text[32] = "version unknown";
  if (version(&driver) == 0 && driver > 0)
    snprintf(driver_text, sizeof driver_text, "CUDA %d.%d", driver / 1000, driver % 1000 / 10);
  if (!driver_new_enough(driver)) return;
  if ((rc = init(0)) != 0) {
    snprintf(unavailable_why, sizeof unavailable_why, "the NVIDIA driver (%s) failed to start: %s",
             driver_text, cu_error_text(lib, rc));
    return;
  }
  if ((rc = count(&devices)) != 0 || devices <= 0) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(unavailable_why, sizeof unavailable_why, "no CUDA device visible%s%s%s%s",
             visible ? " (CUDA_VISIBLE_DEVICES=" : "", visible ? visible : "", visible ? ")" : "",
             rc ? cu_error_text(lib, rc) : "");
    return;
  }
  unavailable_why[0] = '\0';
}

static const char *unavailable(void) {
  if (!probed) {
    probe();
    probed = 1;
  }
  return unavailable_why[0] ? unavailable_why : NULL;
}

static const cnnb_device_availability availability = {
    .struct_size = sizeof(cnnb_device_availability),
    .unavailable = unavailable,
};

/* ---- the implementation ------------------------------------------------------------ */

static const gpu_impl *impl;

static cnnb_status load_impl(cnnb_ctx *ctx) {
  if (impl) return CNNB_OK;
  char path[4096];
  if (impl_path(path, sizeof path))
    return cnnb_error(ctx, CNNB_EINTERNAL, "cuda: cannot find the plugin's own directory");
  /* RTLD_LOCAL: its libraries' symbols stay out of the process's namespace. */
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return cnnb_error(ctx, CNNB_EUNSUPPORTED, "cuda: cannot load %s: %s", path, dlerror());
  gpu_impl_entry_fn entry = (gpu_impl_entry_fn)dlsym(lib, GPU_IMPL_ENTRY);
  const gpu_impl *got = entry ? entry() : NULL;
  if (!got || got->struct_size < sizeof(gpu_impl) || !got->vtable ||
      strcmp(got->version, GPU_DEVICE_VERSION) != 0) {
    const char *version = got && got->version ? got->version : "unknown";
    dlclose(lib);
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "cuda: %s is version %s, the plugin %s: install both from one build", path,
                      version, GPU_DEVICE_VERSION);
  }
  impl = got; /* the library stays loaded for the process's life */
  return CNNB_OK;
}

/* ---- the forwarding vtable ----------------------------------------------------------- */

/* An instance as the host holds it: the implementation's own instance. Every call
 * below unwraps it; the implementation's vtable is `impl->vtable`. */
typedef struct instance {
  void *dev;
} instance;

#define DEV(p) (((instance *)(p))->dev)
#define VT (impl->vtable)

static cnnb_status forward_create(cnnb_ctx *ctx, const char *name, const cnnb_device_config *cfg,
                                  void **out) {
  *out = NULL;
  const char *why = unavailable();
  if (why) return cnnb_error(ctx, CNNB_EUNSUPPORTED, "cuda: cannot run on this machine: %s", why);
  cnnb_status st = load_impl(ctx);
  if (st) return st;
  instance *in = calloc(1, sizeof *in);
  if (!in) return cnnb_error(ctx, CNNB_ENOMEM, "cuda: out of memory");
  if ((st = VT->create(ctx, name, cfg, &in->dev)) != CNNB_OK) {
    free(in);
    return st;
  }
  *out = in;
  return CNNB_OK;
}

static void forward_destroy(void *device) {
  if (!device) return;
  VT->destroy(DEV(device));
  free(device);
}

static const char *forward_describe(void *device) { return VT->describe(DEV(device)); }

static cnnb_status forward_alloc(void *device, size_t bytes, void **ptr) {
  return VT->alloc(DEV(device), bytes, ptr);
}

static void forward_free(void *device, void *ptr) { VT->free(DEV(device), ptr); }

static cnnb_status forward_copy_to_device(void *device, void *dst, const void *src, size_t bytes) {
  return VT->copy_to_device(DEV(device), dst, src, bytes);
}

static cnnb_status forward_copy_to_host(void *device, void *dst, const void *src, size_t bytes) {
  return VT->copy_to_host(DEV(device), dst, src, bytes);
}

static cnnb_status forward_fill_zero(void *device, void *ptr, size_t bytes) {
  return VT->fill_zero(DEV(device), ptr, bytes);
}

static cnnb_status forward_synchronize(void *device) { return VT->synchronize(DEV(device)); }

static cnnb_status forward_tensor_bytes(void *device, const cnnb_graph *g, cnnb_tensor t,
                                        size_t *bytes) {
  return VT->tensor_bytes(DEV(device), g, t, bytes);
}

static cnnb_status forward_tensor_from_host(void *device, const cnnb_graph *g, cnnb_tensor t,
                                            void *buffer, const void *host) {
  return VT->tensor_from_host(DEV(device), g, t, buffer, host);
}

static cnnb_status forward_tensor_to_host(void *device, const cnnb_graph *g, cnnb_tensor t,
                                          const void *buffer, void *host) {
  return VT->tensor_to_host(DEV(device), g, t, buffer, host);
}

static cnnb_status forward_prepare(void *device, const cnnb_graph *g, int32_t node, void **state) {
  return VT->prepare(DEV(device), g, node, state);
}

static void forward_release(void *device, void *state) { VT->release(DEV(device), state); }

static cnnb_status forward_forward(void *device, void *state, const cnnb_node_io *io) {
  return VT->forward(DEV(device), state, io);
}

static cnnb_status forward_backward(void *device, void *state, const cnnb_node_io *io) {
  return VT->backward(DEV(device), state, io);
}

static cnnb_status forward_accumulate(void *device, const cnnb_graph *g, cnnb_tensor t, void *dst,
                                      const void *src) {
  return VT->accumulate(DEV(device), g, t, dst, src);
}

static cnnb_status forward_update(void *device, const cnnb_update *u) {
  return VT->update(DEV(device), u);
}

static cnnb_status forward_all_finite(void *device, const float *grads, int64_t count,
                                      int32_t *finite) {
  return VT->all_finite(DEV(device), grads, count, finite);
}

static int32_t forward_supports_op(void *device, uint32_t op) {
  return VT->supports_op(DEV(device), op);
}

static cnnb_status forward_uint8(void *device, const cnnb_graph *g, cnnb_tensor t, void *buffer,
                                 const uint8_t *host, const float *scale, const float *offset) {
  return impl->uint8_input->input_from_host_uint8(DEV(device), g, t, buffer, host, scale, offset);
}

static const cnnb_device_uint8_input uint8_input = {
    .struct_size = sizeof(cnnb_device_uint8_input),
    .input_from_host_uint8 = forward_uint8,
};

/* What every cuda instance can do, whichever GPU it drives. */
static const void *plugin_extension(const char *id) {
  static const int32_t yes = 1;
  if (strcmp(id, CNNB_EXT_DEVICE_AVAILABILITY) == 0) return &availability;
  if (strcmp(id, CNNB_EXT_FUSED_RELU_ADD) == 0) return &yes;             /* ops_eltwise.c's add */
  if (strcmp(id, CNNB_EXT_DEVICE_UINT8_INPUT) == 0) return &uint8_input; /* transfer.c */
  return NULL;
}

/* --cuda_graphs (step_graph.c): the implementation's recording, its functions given the
 * implementation's instance, as uint8_input's are. */
static const cnnb_device_step_graph *impl_step_graph(void *device) {
  return VT->get_extension(DEV(device), CNNB_EXT_STEP_GRAPH);
}
static cnnb_status forward_begin_capture(void *device) {
  return impl_step_graph(device)->begin_capture(DEV(device));
}
static cnnb_status forward_end_capture(void *device) {
  return impl_step_graph(device)->end_capture(DEV(device));
}
static cnnb_status forward_replay(void *device) {
  return impl_step_graph(device)->replay(DEV(device));
}
static const cnnb_device_step_graph step_graph = {
    .struct_size = sizeof(cnnb_device_step_graph),
    .begin_capture = forward_begin_capture,
    .end_capture = forward_end_capture,
    .replay = forward_replay,
};

/* The instance's own answers (its stream, its step recording) first; the rest are the
 * plugin's. A wrapped answer whose functions take the device must stay the plugin's
 * (uint8_input above, step_graph): the host passes them the plugin's instance. */
static const void *forward_get_extension(void *device, const char *id) {
  if (strcmp(id, CNNB_EXT_CUDA_STREAM) == 0) return VT->get_extension(DEV(device), id);
  if (strcmp(id, CNNB_EXT_STEP_GRAPH) == 0) return impl_step_graph(device) ? &step_graph : NULL;
  return plugin_extension(id);
}

static const cnnb_device_vtable vtable = {
    .struct_size = sizeof(cnnb_device_vtable),
    .create = forward_create,
    .destroy = forward_destroy,
    .describe = forward_describe,
    .alloc = forward_alloc,
    .free = forward_free,
    .copy_to_device = forward_copy_to_device,
    .copy_to_host = forward_copy_to_host,
    .fill_zero = forward_fill_zero,
    .synchronize = forward_synchronize,
    .tensor_bytes = forward_tensor_bytes,
    .tensor_from_host = forward_tensor_from_host,
    .tensor_to_host = forward_tensor_to_host,
    .prepare = forward_prepare,
    .release = forward_release,
    .forward = forward_forward,
    .backward = forward_backward,
    .accumulate = forward_accumulate,
    .update = forward_update,
    .all_finite = forward_all_finite,
    .supports_op = forward_supports_op,
    .get_extension = forward_get_extension,
};

/* ---- flags ------------------------------------------------------------------------ */

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  cnnb_status st = cnnb_flag_declare(
      registry, "cuda_allow_tf32", CNNB_FLAG_BOOL, "true",
      "fp32 convolutions and matrix products may use TF32 tensor cores (as PyTorch's "
      "cudnn.allow_tf32 and TensorFlow do by default); false computes them in full fp32.");
  if (st) return st;
  st = cnnb_flag_declare(
      registry, "cudnn_workspace_mb", CNNB_FLAG_INT, GPU_STRINGIFY(GPU_DEFAULT_WORKSPACE_MB),
      "The most GPU memory one convolution algorithm may use as workspace, in MiB; faster "
      "algorithms that need more are passed over.");
  if (st) return st;
  st = cnnb_flag_declare(
      registry, "cudnn_autotune", CNNB_FLAG_BOOL, "true",
      "Choose each convolution's algorithm by timing cuDNN's best candidates once per "
      "distinct shape (TF_CUDNN_USE_AUTOTUNE, cudnn.benchmark); false takes cuDNN's "
      "heuristic first choice.");
  if (st) return st;
  st = cnnb_flag_declare(
      registry, "cudnn_autotune_cache", CNNB_FLAG_STRING, GPU_ALGO_FILE_AUTO,
      "A file that keeps --cudnn_autotune's choices, per GPU model, cuDNN version, "
      "convolution and workspace limit, so later runs (each tuner child, each mpirun rank) "
      "take them instead of timing again; several processes may share it. auto: "
      "$XDG_CACHE_HOME/cnnbench/cudnn_autotune.tsv (~/.cache/cnnbench/cudnn_autotune.tsv "
      "without XDG_CACHE_HOME); empty: no cache.");
  if (st) return st;
  /* A local path: ranks on different machines may name different files. */
  st = cnnb_flag_mark_per_rank(registry, "cudnn_autotune_cache");
  if (st) return st;
  st = cnnb_flag_declare(registry, "winograd_nonfused", CNNB_FLAG_BOOL, "true",
                         "Let cuDNN's non-fused Winograd convolution algorithms be chosen "
                         "(tf_cnn_benchmarks' flag, TF_ENABLE_WINOGRAD_NONFUSED); false passes "
                         "them over.");
  if (st) return st;
  st = cnnb_flag_declare(registry, "batchnorm_persistent", CNNB_FLAG_BOOL, "true",
                         "Training batch norms use cuDNN's CUDNN_BATCHNORM_SPATIAL_PERSISTENT "
                         "kernels where cuDNN offers them (fp16 NHWC; tf_cnn_benchmarks' flag); "
                         "false keeps every batch norm on CUDNN_BATCHNORM_SPATIAL.");
  if (st) return st;
  return cnnb_flag_declare(registry, "gpu_indices", CNNB_FLAG_STRING, "",
                           "The GPUs this node's replicas use, in order (tf_cnn_benchmarks' "
                           "flag, e.g. 2,3): replica i of local rank r takes entry "
                           "r * --num_gpus + i; empty: GPUs 0, 1, 2, ... of those "
                           "CUDA_VISIBLE_DEVICES shows.");
}

static const char *const offers[] = {"cuda", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DEVICE, "cuda", GPU_DEVICE_VERSION,
                     "NVIDIA GPU device on cuDNN and cuBLAS: every graph op forward and backward, "
                     "fp32 (TF32), fp16 and bf16 on tensor cores"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
    .get_extension = plugin_extension,
};

/* The host checks the ABI version in the descriptor; nothing here depends on `host`. */
CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}
