/* room.c — address space kept free for oneDNN, and the set of primitives not yet run
 * (whose first run may generate kernels, so it gets the room too). Why: below. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "cpu_device.h"

/* oneDNN cannot report every failure to get memory. Its JIT assembler (Xbyak, built
 * without exceptions) maps a 256 KiB code buffer for each kernel it generates; when that
 * mmap fails it records an error and goes on writing machine code through the NULL
 * buffer, so dnnl_primitive_create dies with SIGSEGV (in Xbyak's CodeArray::db, top_ ==
 * NULL) instead of returning dnnl_out_of_memory; and a C++ allocation failing inside it
 * throws through code that cannot unwind (SIGABRT, seen from a GEMM kernel's std::call_once
 * in an OpenMP worker). Near an address-space limit (RLIMIT_AS, prlimit --as) the big
 * buffers the device allocates itself fail cleanly, but the last one that fits can leave
 * too little for the next primitive's code. So the device keeps CPU_ROOM_BYTES mapped
 * while its own allocations run, the way the JIT maps its code (private, writable, so
 * that RLIMIT_DATA and strict overcommit count it too; never touched: no memory), and
 * unmaps it for the duration of each oneDNN call that may allocate;
 * when it is not held (taken meanwhile), the call first checks that that much can be had,
 * and fails with CNNB_ENOMEM when not. One primitive's creation measured at most ~4 MiB
 * (resnet20/50, inception3, googlenet, mobilenet, vgg11, alexnet, densenet; fp32 and bf16;
 * training and inference). Some kernels are generated on a primitive's first execution
 * (the GEMM kernels behind gemm-based convolutions and bf16 inner products, in whichever
 * thread gets there first), so each primitive's first run gets the room too (cpu_exec);
 * later runs leave it held. */
#define CPU_ROOM_BYTES ((size_t)16 << 20)

static void *room_map(void) {
  void *p = mmap(NULL, CPU_ROOM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

cnnb_status cpu_room_open(cpu_device *d, const cnnb_node *node, const char *what) {
  if (d->room) {
    munmap(d->room, CPU_ROOM_BYTES);
    d->room = NULL;
    return CNNB_OK;
  }
  void *probe = room_map();
  if (!probe) {
    int err = errno;
    return cpu_oom(d, node, 0,
                   "no room left for oneDNN's %s (it needs up to %zu MiB free for the code of "
                   "the kernels it generates; mmap: %s)",
                   what, CPU_ROOM_BYTES >> 20, strerror(err));
  }
  munmap(probe, CPU_ROOM_BYTES);
  return CNNB_OK;
}

void cpu_room_close(cpu_device *d) {
  if (!d->room) d->room = room_map(); /* when it cannot be had, the next open says so */
}

void cpu_room_free(cpu_device *d) {
  if (d->room) munmap(d->room, CPU_ROOM_BYTES);
  d->room = NULL;
  free(d->unrun);
  d->unrun = NULL;
  d->unrun_cap = d->unrun_count = 0;
}

/* The primitives not yet executed: an open-addressing set (linear probing, deletion by
 * backward shift). A primitive destroyed before it ran stays listed; if another takes its
 * address, that one has not run either. */
static size_t unrun_home(const cpu_device *d, dnnl_primitive_t prim) {
  uint64_t h = (uint64_t)(uintptr_t)prim * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 32) & (d->unrun_cap - 1);
}

int cpu_room_note_created(cpu_device *d, dnnl_primitive_t prim) {
  if ((d->unrun_count + 1) * 2 > d->unrun_cap) {
    size_t cap = d->unrun_cap ? d->unrun_cap * 2 : 256;
    dnnl_primitive_t *old = d->unrun, *grown = calloc(cap, sizeof *grown);
    if (!grown) return 0;
    size_t old_cap = d->unrun_cap;
    d->unrun = grown;
    d->unrun_cap = cap;
    d->unrun_count = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i]) cpu_room_note_created(d, old[i]);
    free(old);
  }
  size_t i = unrun_home(d, prim);
  while (d->unrun[i] && d->unrun[i] != prim) i = (i + 1) & (d->unrun_cap - 1);
  if (!d->unrun[i]) d->unrun_count++;
  d->unrun[i] = prim;
  return 1;
}

int cpu_room_first_run(cpu_device *d, dnnl_primitive_t prim) {
  if (!d->unrun_count) return 0;
  size_t mask = d->unrun_cap - 1, i = unrun_home(d, prim);
  while (d->unrun[i] != prim) {
    if (!d->unrun[i]) return 0;
    i = (i + 1) & mask;
  }
  d->unrun[i] = NULL;
  d->unrun_count--;
  for (size_t j = (i + 1) & mask; d->unrun[j]; j = (j + 1) & mask) {
    size_t home = unrun_home(d, d->unrun[j]);
    /* move j's entry into the hole unless its home lies cyclically in (i, j] */
    if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
      d->unrun[i] = d->unrun[j];
      d->unrun[j] = NULL;
      i = j;
    }
  }
  return 1;
}
