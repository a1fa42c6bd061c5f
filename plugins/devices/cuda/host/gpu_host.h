/* gpu_host.h — what nvcc provides to the cuda device's own kernels (kernels_*.cu), for
 * compiling them as plain host C++ (g++ or clang++, C++17) in the test-only fake CUDA
 * build (../fake/, -DCNNB_CUDA_FAKE=ON) and in the host test of the kernels
 * (../tests/test_cuda_kernels_host.cpp). gpu_math.h includes it when __CUDACC__ is not
 * defined; nvcc never sees it. The kernels' arithmetic is compiled unchanged: only the
 * CUDA spellings around it are given host meanings here.
 *
 *  - __global__, __device__, __host__, __forceinline__ keep the host meanings the CUDA
 *    headers give them (nothing, or an always_inline function); __launch_bounds__ is
 *    dropped; __shared__ makes a `static thread_local` variable, one per OS thread, which
 *    the threads of a block share because a block runs on one OS thread (below);
 *  - __half and __nv_bfloat16 are the CUDA headers' own types, whose host conversions
 *    (__float2half_rn, __float2bfloat16_rn) round to nearest even bit for bit as the GPU
 *    does (the test checks them against its own rounding);
 *  - blockIdx, threadIdx, blockDim, gridDim are thread_local variables the launch sets;
 *  - a launch (GPU_LAUNCH, GPU_LAUNCH_BARRIERS) converts its arguments to the kernel's
 *    parameter types at once, by value as CUDA copies them, and hands a closure that owns
 *    them to the fake runtime (fake_cuda_enqueue_fn), which runs it now or records it
 *    under stream capture. The closure runs every block of the grid in turn:
 *      GPU_LAUNCH: each thread of the block as a plain call, one after the other (fast:
 *        the fake build runs whole training steps through these kernels). Correct only
 *        for kernels whose threads never wait for each other; a barrier or shuffle in
 *        such a kernel ends the process naming it.
 *      GPU_LAUNCH_BARRIERS: each thread as a fiber on the launching OS thread (a
 *        stack of its own, switched to by a few instructions on x86-64, by ucontext
 *        elsewhere). The fibers run in thread order, each until it reaches __syncthreads, a
 *        warp shuffle or its end; a warp whose lanes all wait at a shuffle, or a block
 *        whose live threads all wait at __syncthreads, is then let through. So a kernel
 *        gets the values a GPU gives it, deterministically; threads that could never
 *        all meet (a shuffle with lanes that have exited, a barrier some threads skip)
 *        end the process naming the kernel, where a GPU would hang or be undefined.
 *  - atomics are the compiler's __atomic builtins (several host threads may run kernels
 *    on different streams at once).
 *
 * Not emulated, and refused at launch: dynamic shared memory (shmem > 0), launch
 * shapes a GPU refuses. */
#ifndef CNNB_GPU_HOST_H
#define CNNB_GPU_HOST_H

#ifdef __CUDACC__
#error "host/gpu_host.h stands in for nvcc in host builds: nvcc must not include it"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <deque>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "../fake/fake_cuda.h"
#include "../gpu_kernels.h"

#if defined(__SANITIZE_ADDRESS__)
#define GPU_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPU_HOST_ASAN 1
#endif
#endif
#ifdef GPU_HOST_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* ---- spellings ---------------------------------------------------------------------- */

/* The CUDA headers already define __global__, __device__ and __host__ as nothing and
 * __forceinline__ as an always_inline `inline` for host compilers. */
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
/* One variable per OS thread: a block's threads (fibers or plain calls) all run on the
 * launching thread, so they share it; blocks run one after another, and a GPU leaves
 * shared memory undefined at a block's start, so reusing it is right. */
#undef __shared__
#define __shared__ static thread_local

/* The launch's coordinates, set by the launch loop before each thread runs (and by the
 * fiber scheduler each time it resumes a thread). */
inline thread_local uint3 blockIdx;
inline thread_local uint3 threadIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

/* `#pragma unroll`, which g++ does not know (and whose warning no diagnostic pragma in a
 * header can silence before GCC 13): kernels write GPU_UNROLL(n) instead. */
#define GPU_UNROLL(n) GPU_PRAGMA_(GCC unroll n)

namespace gpu_host {

/* ---- the launch ----------------------------------------------------------------------- */

/* The limits a GPU launch has (compute capability 8.0 and newer). */
inline void check_launch(const char *kernel, dim3 grid, dim3 block, size_t shmem) {
  if (grid.x < 1 || grid.x > 0x7fffffffu || grid.y < 1 || grid.y > 65535 || grid.z < 1 ||
      grid.z > 65535)
    fake_cuda_fail(kernel, "grid (%u, %u, %u) is not a valid launch", grid.x, grid.y, grid.z);
  if (block.x < 1 || block.x > 1024 || block.y < 1 || block.y > 1024 || block.z < 1 ||
      block.z > 64 || (uint64_t)block.x * block.y * block.z > 1024)
    fake_cuda_fail(kernel, "block (%u, %u, %u) is not a valid launch", block.x, block.y, block.z);
  if (shmem != 0)
    fake_cuda_fail(kernel, "%zu bytes of dynamic shared memory: not emulated on the host", shmem);
}

/* The kernel running on this OS thread (for messages), and the block being run with
 * barriers (NULL: a plain launch, where waiting is a defect). */
struct block_run;
inline thread_local const char *running_kernel = nullptr;
inline thread_local block_run *running_block = nullptr;

[[noreturn]] inline void no_barriers(const char *what) {
  fake_cuda_fail(running_kernel ? running_kernel : "kernel",
                 "%s in a kernel launched with GPU_LAUNCH, whose threads run one after "
                 "another: launch it with GPU_LAUNCH_BARRIERS",
                 what);
}

/* Runs every thread of every block as a plain call, in CUDA's linear order (x fastest):
 * correct for kernels whose threads never wait for one another. */
template <auto Kernel, typename Args>
void run_plain(const char *name, const Args &args, dim3 grid, dim3 block) {
  running_kernel = name;
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = make_uint3(bx, by, bz);
        for (unsigned tz = 0; tz < block.z; tz++)
          for (unsigned ty = 0; ty < block.y; ty++)
            for (unsigned tx = 0; tx < block.x; tx++) {
              threadIdx = make_uint3(tx, ty, tz);
              std::apply(Kernel, args);
            }
      }
  running_kernel = nullptr;
}

/* ---- blocks with barriers: one fiber per thread ---------------------------------------- */

/* An execution context to switch to: a stack pointer where callee-saved registers were
 * pushed (x86-64), or a ucontext. swapcontext costs a system call (it saves the signal
 * mask) per switch, and a block of 256 threads switches several times per barrier per
 * thread: the fake's training steps run bias gradients of thousands of such blocks. */
#if defined(__x86_64__)
struct context {
  void *sp;
};
#else
struct context {
  ucontext_t uc;
  bool made; /* getcontext done once; makecontext reuses it */
};
#endif

} // namespace gpu_host

#if defined(__x86_64__)
/* gpu_host_switch(from, to): pushes the callee-saved registers, MXCSR and the x87
 * control word (the SysV ABI's preserved state), stores the stack pointer in *from, and
 * pops the same from the stack `to` points into. A new context's stack holds zeros for
 * the registers and returns into the fiber's start function. Weak and hidden: every translation
 * unit that includes this header defines it, the linker keeps one, no library exports it. */
extern "C" void gpu_host_switch(void **from, void *to);
asm(R"(
  .pushsection .text.gpu_host_switch,"ax",@progbits
  .weak gpu_host_switch
  .hidden gpu_host_switch
  .type gpu_host_switch, @function
gpu_host_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gpu_host_switch, .-gpu_host_switch
  .popsection
)");
#endif

namespace gpu_host {

#if !defined(__x86_64__)
/* getcontext returns twice (as setjmp does): called where no variable of the caller is
 * live across it. */
[[gnu::noinline]] inline int getcontext_once(ucontext_t *uc) { return getcontext(uc); }
#endif

/* Makes `c` run start() on the stack [bottom, bottom + bytes). */
inline void make_context(context *c, char *bottom, size_t bytes, void (*start)()) {
#ifdef GPU_HOST_ASAN
  /* The stack's last fiber left its frames' redzones poisoned: it never returned. */
  __asan_unpoison_memory_region(bottom, bytes);
#endif
#if defined(__x86_64__)
  /* From the top: a zero return address for `start` (which never returns; entered with
   * the stack 8 past a 16-byte boundary, as after a call), `start` for the switch's ret,
   * six registers, and MXCSR / the control word as they are now. */
  uint64_t *top = reinterpret_cast<uint64_t *>(bottom + bytes);
  uint64_t *sp = top - 9;
  memset(sp, 0, 9 * sizeof *sp);
  top[-2] = reinterpret_cast<uint64_t>(start);
  uint32_t mxcsr;
  uint16_t control;
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(control));
  memcpy(sp, &mxcsr, 4);
  memcpy(reinterpret_cast<char *>(sp) + 4, &control, 2);
  c->sp = sp;
#else
  if (!c->made && getcontext_once(&c->uc) != 0)
    fake_cuda_fail("kernel launch", "getcontext failed");
  c->made = true;
  c->uc.uc_stack.ss_sp = bottom;
  c->uc.uc_stack.ss_size = bytes;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, start, 0);
#endif
}

inline void switch_context(context *from, context *to) {
#if defined(__x86_64__)
  gpu_host_switch(&from->sp, to->sp);
#else
  swapcontext(&from->uc, &to->uc);
#endif
}

enum fiber_state : uint8_t { FIBER_RUNS, FIBER_AT_SYNCTHREADS, FIBER_AT_SHUFFLE, FIBER_DONE };

struct fiber {
  context ctx;
  uint3 thread;
  fiber_state state;
  unsigned shuffles; /* this thread's shuffles so far: their parity picks the buffer */
};

/* Fiber stacks, kept per OS thread for the next launch; a PROT_NONE page below each
 * turns an overflow into a fault. */
struct stack_pool {
#ifdef GPU_HOST_ASAN
  static constexpr size_t bytes = 512 << 10; /* ASan's redzones make frames larger */
#else
  static constexpr size_t bytes = 64 << 10;
#endif
  static constexpr size_t guard = 4096;
  std::vector<char *> stacks; /* each the usable bottom, guard page below it */
  char *get(size_t i) {
    while (stacks.size() <= i) {
      void *p = mmap(nullptr, bytes + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
      if (p == MAP_FAILED) fake_cuda_fail("kernel launch", "no memory for a fiber stack");
      if (mprotect(p, guard, PROT_NONE) != 0) fake_cuda_fail("kernel launch", "mprotect failed");
      stacks.push_back(static_cast<char *>(p) + guard);
    }
    return stacks[i];
  }
  stack_pool() = default;
  stack_pool(const stack_pool &) = delete;
  stack_pool &operator=(const stack_pool &) = delete;
  ~stack_pool() {
    for (char *s : stacks) munmap(s - guard, bytes + guard);
  }
};

/* One block in flight: its fibers, in linear thread order, and the warps' shuffle
 * exchange, two buffers of 32 lanes per warp used alternately (a lane writes buffer
 * k % 2 for its k-th shuffle only after every lane of its warp has passed shuffle k - 1,
 * so every lane has read shuffle k - 2's values from it by then). */
struct block_run {
  const char *kernel;
  void (*body)(const void *args);
  const void *args;
  unsigned threads;
  unsigned current;
  std::deque<fiber> fibers; /* grows without moving a fiber's context */
  std::vector<uint64_t> exchange;
  context scheduler;
  const void *scheduler_stack = nullptr; /* ASan: the scheduler's stack, to switch back */
  size_t scheduler_stack_bytes = 0;
};
inline thread_local stack_pool fiber_stacks;
inline thread_local block_run current_block;

/* Switching stacks: ASan must be told (start before, finish after each switch). */
inline void sanitizer_start_switch(void **save, const void *bottom, size_t bytes) {
#ifdef GPU_HOST_ASAN
  __sanitizer_start_switch_fiber(save, bottom, bytes);
#else
  (void)save, (void)bottom, (void)bytes;
#endif
}
inline void sanitizer_finish_switch(void *save, const void **old_bottom, size_t *old_bytes) {
#ifdef GPU_HOST_ASAN
  __sanitizer_finish_switch_fiber(save, old_bottom, old_bytes);
#else
  (void)save, (void)old_bottom, (void)old_bytes;
#endif
}

/* A fiber: the kernel for one thread, then back to the scheduler for good. */
inline void fiber_main() {
  block_run &b = *running_block;
  sanitizer_finish_switch(nullptr, &b.scheduler_stack, &b.scheduler_stack_bytes);
  b.body(b.args);
  fiber &f = b.fibers[b.current];
  f.state = FIBER_DONE;
  sanitizer_start_switch(nullptr, b.scheduler_stack, b.scheduler_stack_bytes); /* dies */
  switch_context(&f.ctx, &b.scheduler);
  fake_cuda_fail(b.kernel, "a finished thread was resumed");
}

/* From inside a fiber: wait (as `why`) until the scheduler lets this thread through. */
inline void wait_in_fiber(fiber_state why) {
  block_run &b = *running_block;
  fiber &f = b.fibers[b.current];
  f.state = why;
  void *save = nullptr;
  sanitizer_start_switch(&save, b.scheduler_stack, b.scheduler_stack_bytes);
  switch_context(&f.ctx, &b.scheduler);
  sanitizer_finish_switch(save, &b.scheduler_stack, &b.scheduler_stack_bytes);
}

inline void resume_fiber(block_run &b, unsigned t) {
  b.current = t;
  threadIdx = b.fibers[t].thread;
  void *save = nullptr;
  sanitizer_start_switch(&save, fiber_stacks.get(t), stack_pool::bytes);
  switch_context(&b.scheduler, &b.fibers[t].ctx);
  sanitizer_finish_switch(save, nullptr, nullptr);
}

/* Runs the block blockIdx of the launch to its end, phase by phase. */
inline void run_block(block_run &b) {
  const dim3 d = blockDim;
  for (unsigned t = 0; t < b.threads; t++) {
    fiber &f = b.fibers[t];
    f.thread = make_uint3(t % d.x, t / d.x % d.y, t / (d.x * d.y));
    f.state = FIBER_RUNS;
    f.shuffles = 0;
    make_context(&f.ctx, fiber_stacks.get(t), stack_pool::bytes, fiber_main);
  }
  const unsigned warps = (b.threads + 31) / 32;
  for (;;) {
    for (unsigned t = 0; t < b.threads; t++)
      if (b.fibers[t].state == FIBER_RUNS) resume_fiber(b, t);
    /* Every thread now waits or is done. Warps all of whose lanes wait at a shuffle go
     * on first; a shuffle some lanes never reach (they exited) can never complete. */
    bool released = false;
    for (unsigned w = 0; w < warps; w++) {
      const unsigned first = w * 32, end = first + 32 < b.threads ? first + 32 : b.threads;
      unsigned at_shuffle = 0, done = 0;
      for (unsigned t = first; t < end; t++) {
        at_shuffle += b.fibers[t].state == FIBER_AT_SHUFFLE;
        done += b.fibers[t].state == FIBER_DONE;
      }
      if (at_shuffle == 0 || at_shuffle + done < end - first) continue;
      if (done)
        fake_cuda_fail(b.kernel,
                       "block (%u, %u, %u) warp %u: a shuffle that %u of its lanes never reach "
                       "(they returned)",
                       blockIdx.x, blockIdx.y, blockIdx.z, w, done);
      for (unsigned t = first; t < end; t++) b.fibers[t].state = FIBER_RUNS;
      released = true;
    }
    if (released) continue;
    unsigned live = 0, at_barrier = 0;
    for (unsigned t = 0; t < b.threads; t++) {
      live += b.fibers[t].state != FIBER_DONE;
      at_barrier += b.fibers[t].state == FIBER_AT_SYNCTHREADS;
    }
    if (live == 0) return;
    if (at_barrier != live)
      fake_cuda_fail(b.kernel,
                     "block (%u, %u, %u): %u threads wait at __syncthreads while %u wait at "
                     "shuffles their warps never complete",
                     blockIdx.x, blockIdx.y, blockIdx.z, at_barrier, live - at_barrier);
    /* Threads that returned do not hold a barrier up (as on compute capability 7.0+). */
    for (unsigned t = 0; t < b.threads; t++)
      if (b.fibers[t].state == FIBER_AT_SYNCTHREADS) b.fibers[t].state = FIBER_RUNS;
  }
}

template <auto Kernel, typename Args>
void run_with_barriers(const char *name, const Args &args, dim3 grid, dim3 block) {
  block_run &b = current_block;
  if (running_block) fake_cuda_fail(name, "a launch from inside a kernel");
  b.kernel = name;
  b.body = [](const void *a) { std::apply(Kernel, *static_cast<const Args *>(a)); };
  b.args = &args;
  b.threads = block.x * block.y * block.z;
  if (b.fibers.size() < b.threads) b.fibers.resize(b.threads);
  b.exchange.assign((size_t)(b.threads + 31) / 32 * 2 * 32, 0);
  running_kernel = name;
  running_block = &b;
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = make_uint3(bx, by, bz);
        run_block(b);
      }
  running_block = nullptr;
  running_kernel = nullptr;
}

/* The kernel's parameters, as values: what a launch copies. */
template <typename F>
struct kernel_params;
template <typename... P>
struct kernel_params<void (*)(P...)> {
  using type = std::tuple<std::decay_t<P>...>;
};

template <auto Kernel, typename... A>
void launch(bool barriers, const char *name, dim3 grid, dim3 block, size_t shmem,
            cudaStream_t stream, A &&...args) {
  using Args = typename kernel_params<decltype(Kernel)>::type;
  check_launch(name, grid, block, shmem);
  fake_cuda_enqueue_fn(stream, name,
                       [values = Args(std::forward<A>(args)...), name, grid, block, barriers]() {
                         if (barriers) run_with_barriers<Kernel>(name, values, grid, block);
                         else run_plain<Kernel>(name, values, grid, block);
                       });
}

/* ---- warp shuffles -------------------------------------------------------------------- */

enum shuffle_kind { SHUFFLE_INDEX, SHUFFLE_DOWN, SHUFFLE_UP, SHUFFLE_XOR };

/* Every lane publishes v, waits for its whole warp, then reads its source lane's value,
 * as the shfl.sync instruction does; a source outside the lane's width-wide segment (or
 * beyond the block's last thread) gives the lane its own value. Full masks only (every
 * lane of the warp that exists): that is all the kernels use. */
template <typename T>
T shuffle(const char *what, unsigned mask, T v, shuffle_kind kind, int arg, int width) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable<T>::value,
                "a shuffled value is at most 8 bytes");
  block_run *b = running_block;
  if (!b) no_barriers(what);
  fiber &f = b->fibers[b->current];
  const unsigned warp = b->current / 32, lane = b->current % 32;
  const unsigned lanes = b->threads - warp * 32 < 32 ? b->threads - warp * 32 : 32;
  const unsigned full = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  if (mask != full)
    fake_cuda_fail(b->kernel, "%s with mask %#x: only whole warps (%#x) are emulated", what, mask,
                   full);
  if (width < 1 || width > 32 || (width & (width - 1)))
    fake_cuda_fail(b->kernel, "%s with width %d: not a power of 2 up to 32", what, width);
  uint64_t *slots = &b->exchange[((size_t)warp * 2 + (f.shuffles & 1)) * 32];
  f.shuffles++;
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  slots[lane] = bits;
  wait_in_fiber(FIBER_AT_SHUFFLE);
  const int base = (int)lane & ~(width - 1);
  int src;
  switch (kind) {
    case SHUFFLE_INDEX: src = base + (arg & (width - 1)); break;
    case SHUFFLE_DOWN: src = (int)lane + arg; break;
    case SHUFFLE_UP: src = (int)lane - arg; break;
    default: src = (int)lane ^ arg; break;
  }
  if (src < base || src >= base + width || src >= (int)lanes) return v;
  T out;
  memcpy(&out, &slots[src], sizeof out);
  return out;
}

} // namespace gpu_host

/* ---- device functions ------------------------------------------------------------------ */

inline void __syncthreads() {
  if (!gpu_host::running_block) gpu_host::no_barriers("__syncthreads");
  gpu_host::wait_in_fiber(gpu_host::FIBER_AT_SYNCTHREADS);
}

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  return gpu_host::shuffle("__shfl_sync", mask, v, gpu_host::SHUFFLE_INDEX, src_lane, width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return gpu_host::shuffle("__shfl_down_sync", mask, v, gpu_host::SHUFFLE_DOWN, (int)delta, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return gpu_host::shuffle("__shfl_up_sync", mask, v, gpu_host::SHUFFLE_UP, (int)delta, width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  return gpu_host::shuffle("__shfl_xor_sync", mask, v, gpu_host::SHUFFLE_XOR, lane_mask, width);
}

/* Atomics return the old value, as CUDA's do, relaxed as CUDA's are; the operand is
 * converted to *p's type, as CUDA's overloads convert it. */
template <typename T, typename V>
T atomicAdd(T *p, V operand) {
  const T v = (T)operand;
  if constexpr (std::is_integral<T>::value) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
  } else { /* float, double: compare and swap */
    T old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    sum = old + v;
    while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      sum = old + v;
    return old;
  }
}
template <typename T, typename V>
T atomicSub(T *p, V operand) {
  return __atomic_fetch_sub(p, (T)operand, __ATOMIC_RELAXED);
}
template <typename T, typename V>
T atomicExch(T *p, V operand) {
  return __atomic_exchange_n(p, (T)operand, __ATOMIC_RELAXED);
}
template <typename T, typename V, typename W>
T atomicCAS(T *p, V compare, W operand) {
  T expected = (T)compare;
  __atomic_compare_exchange_n(p, &expected, (T)operand, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}
template <typename T, typename V>
T atomicMax(T *p, V operand) {
  const T v = (T)operand;
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v &&
         !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T, typename V>
T atomicMin(T *p, V operand) {
  const T v = (T)operand;
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v &&
         !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* cuda_runtime.h's C++ overload taking the kernel itself, which it declares for nvcc
 * only. */
template <typename... P>
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attributes, void (*kernel)(P...)) {
  return cudaFuncGetAttributes(attributes, reinterpret_cast<const void *>(kernel));
}

/* ---- launches ------------------------------------------------------------------------- */

/* gpu_math.h's GPU_LAUNCH / GPU_LAUNCH_BARRIERS, host side: kernel is a name or a
 * parenthesised template-id (GPU_DEPAREN, gpu_math.h), its text names the work for the
 * fake's messages. */
#define GPU_LAUNCH(kernel, grid, block, shmem, stream, ...)                                   \
  ::gpu_host::launch<GPU_DEPAREN(kernel)>(false, #kernel, (grid), (block), (shmem), (stream), \
                                          __VA_ARGS__)
#define GPU_LAUNCH_BARRIERS(kernel, grid, block, shmem, stream, ...)                         \
  ::gpu_host::launch<GPU_DEPAREN(kernel)>(true, #kernel, (grid), (block), (shmem), (stream), \
                                          __VA_ARGS__)

/* ---- probes of the kernel files' own index math (kernels_host.cpp), for the test --------- */

extern "C" {
/* kernels_pool.cu: whether a grid-stride loop over count elements runs in int32_t, its
 * block count, and offset_of / unravel in int64_t. */
int gpu_host_pool_fits_int32(int64_t count);
unsigned gpu_host_pool_blocks(int64_t count);
int64_t gpu_host_pool_offset(gpu_dims d, int32_t n, int32_t c, int32_t h, int32_t w);
void gpu_host_pool_unravel(gpu_dims d, int64_t i, int32_t *n, int32_t *c, int32_t *h, int32_t *w);
/* kernels_eltwise.cu: how the bias gradient's first pass splits dims. */
void gpu_host_bias_grad_plan(gpu_dims d, int64_t *chunks, int64_t *per_chunk);
}

#endif
