/* gpu_impl.h — how the cuda plugin (plugin.c) meets its implementation
 * (libcnnb_cuda_impl.so, device.c): the one symbol the implementation exports, and what
 * it returns. No CUDA header here: the plugin links no CUDA library.
 *
 * Both are built from the same commit and installed together; the plugin still checks
 * the implementation's version and struct size, so a stale copy left beside a newer
 * plugin is refused with both versions named instead of being called. */
#ifndef CNNB_GPU_IMPL_H
#define CNNB_GPU_IMPL_H

#include <cnnb/cnnb.h>

/* The device's version: the plugin's descriptor and the implementation both say it. */
#define GPU_DEVICE_VERSION "0.1.0"
/* Where the implementation lies, relative to the plugin's own directory. */
#define GPU_IMPL_FILE "cuda/libcnnb_cuda_impl.so"
#define GPU_IMPL_ENTRY "cnnb_cuda_impl_entry"
/* --cudnn_workspace_mb's default (plugin.c declares the flag; device.c falls back to it
 * where no flag table exists). */
#define GPU_DEFAULT_WORKSPACE_MB 1024
#define GPU_STRINGIFY_(x) #x
#define GPU_STRINGIFY(x) GPU_STRINGIFY_(x)

typedef struct gpu_impl {
  uint32_t struct_size;
  const char *version;              /* GPU_DEVICE_VERSION it was built with */
  const cnnb_device_vtable *vtable; /* every slot the plugin forwards to */
  /* [any-thread] the uint8 input conversion, on an implementation instance */
  const cnnb_device_uint8_input *uint8_input;
} gpu_impl;

typedef const gpu_impl *(*gpu_impl_entry_fn)(void);

#endif
