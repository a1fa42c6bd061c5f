/* fake_nccl.cpp — the NCCL calls of the strategies' implementation (plugins/strategies/
 * nccl_impl/nccl_impl.c) on the CPU, with NCCL's semantics across the communicators of one
 * process and its rules checked (fake_cuda.h): what lets replicated's, parameter_server's
 * and horovod's NCCL paths run, and be checked, without a GPU.
 *
 * Semantics. A clique is the communicators made from one ncclUniqueId; its k-th collective
 * is the k-th collective call of each of its ranks. It completes when every rank has issued
 * its call: the last to arrive computes it from every rank's sendbuff — sum, prod, max, min,
 * avg and premultiplied sums, in fp32, fp16 or bf16, accumulated in fp32 in rank order and
 * rounded once to the type, to nearest even; ncclAvg on floats is what NCCL makes of it, a
 * sum premultiplied by 1/nranks — and writes every rank's recvbuff through work enqueued on
 * that rank's stream (fake_cuda_enqueue_fn, on its GPU). The fake's streams run their work
 * at once, so at that moment every rank's earlier work is done and its later work not begun:
 * stream order holds. Calls inside ncclGroupStart/End are deferred to the outermost
 * ncclGroupEnd, as NCCL launches them there; one thread driving several GPUs therefore
 * completes its collectives in ncclGroupEnd.
 *
 * Threads. A call whose collective some rank has not issued yet blocks its thread until the
 * other ranks' threads issue theirs (its stream's later work must not run before the
 * results land), up to $CNNB_FAKE_NCCL_WAIT_S seconds (60), then fails naming the ranks
 * missing. A rank's driver is the thread that last called NCCL with its communicator: a
 * thread that would wait for a rank it drives itself would wait forever, an illegal sequence
 * (NCCL requires a group around one thread's calls for several ranks), and fails at once.
 *
 * Non-blocking communicators (ncclConfig_t.blocking = 0, as nccl_impl.c makes them): init,
 * ncclGroupEnd, a collective outside a group and ncclCommFinalize answer ncclInProgress, and
 * ncclCommGetAsyncError answers ncclInProgress once more (and until every rank has joined,
 * after an init), so the callers' polling runs. Any other call on such a communicator before
 * ncclCommGetAsyncError said ncclSuccess fails (NCCL refuses it with ncclInvalidArgument).
 *
 * Checks, each a fake_cuda_fail naming the call: a handle that is no communicator, or one
 * destroyed, aborted or finalized; a rank, root, count, type or op out of range; ranks of one
 * collective that disagree on its kind, count, type, op or root; a unique id not made by
 * ncclGetUniqueId or used twice; a config not from NCCL_CONFIG_INITIALIZER; ncclGroupEnd
 * without ncclGroupStart, and a thread that ends inside a group; a buffer NULL, outside a live
 * device allocation of the communicator's GPU, or overlapping the other without being it; a
 * stream not live, or capturing (the fake records no collective into a graph); an op that is
 * no live premultiplied sum of the communicator, or one made for another type; ncclCommFinalize
 * or ncclCommDestroy with the communicator's calls still in an open group; the waits above.
 *
 * Reported as NCCL reports them (a result and words for ncclGetLastError), because callers
 * handle them: two ranks of a clique on one GPU ("Duplicate GPU detected", ncclInvalidUsage,
 * as NCCL's init says) and a clique spanning processes. The fake spans one process: a rank
 * joining a unique id made by another process (horovod across mpirun ranks) is refused at
 * its init, and the maker's communicators learn it through a shared-memory marker named from
 * the id, so every rank of such a job ends at once rather than at its timeout. */
/* Without NCCL's header (component NCCL off) there is nothing to fake: the strategies'
 * implementation is not built then (plugins/strategies/common/nccl.cmake). */
#if __has_include(<nccl.h>)
#include <nccl.h>

#include "fake_cuda.h"
#include "../../../strategies/common/compact16.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

/* ---- handles -------------------------------------------------------------------------- */

/* What ncclGetUniqueId writes into the id's 128 bytes. */
const char kIdMagic[16] = "cnnb-fake-nccl";
struct IdBits {
  char magic[16];
  int32_t pid;     /* the process that made it: the fake spans that one */
  uint32_t serial; /* its n-th id */
  uint64_t nonce;
};
static_assert(sizeof(IdBits) <= NCCL_UNIQUE_ID_BYTES, "the id holds its bits");

enum class Kind { AllReduce, Reduce, Broadcast };
enum class State { Live, Finalized, Destroyed, Aborted };

/* A premultiplied sum (ncclRedOpCreatePreMulSum). */
struct PreMul {
  bool live;
  ncclDataType_t type;
  float scale;        /* ncclScalarHostImmediate: read at creation, as the type holds it */
  const void *scalar; /* ncclScalarDevice: read when the collective runs */
};

struct Clique;

} // namespace

struct ncclComm {
  Clique *clique;
  int rank, nranks, device;
  bool blocking;
  State state;
  bool joined;        /* in its clique (an init in a group joins at ncclGroupEnd) */
  int settle;         /* ncclCommGetAsyncError answers still to say "in progress" */
  const char *owing;  /* the call that answered ncclInProgress, until polled to success */
  ncclResult_t async; /* the error it met, reported by ncclCommGetAsyncError */
  std::string async_why;
  std::vector<PreMul> ops; /* op ncclNumOps + i */
  uint64_t issued;         /* collectives submitted */
  std::thread::id driver;  /* the thread that last called NCCL with it */
};

namespace {

/* One rank's call of one collective. */
struct Call {
  Kind kind;
  ncclComm *comm;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  cudaStream_t stream;
  float scale;        /* the premultiplier (1 for the plain ops) */
  const void *scalar; /* or where to read it, at run time */
  bool premul;        /* op made by ncclRedOpCreatePreMulSum */
};

/* One collective of a clique: every rank's call, once issued. */
struct Coll {
  uint64_t seq;
  std::vector<Call> calls;
  std::vector<bool> have;
  int arrived = 0;
  bool done = false;
  ncclResult_t failed = ncclSuccess; /* a rank was destroyed or aborted before its call */
  std::string why;
};

struct Clique {
  std::string key; /* the id's bytes */
  std::string name;
  std::string marker; /* the shared-memory object a rank of another process makes */
  int nranks;
  std::vector<ncclComm *> members;
  int joined = 0;
  bool complete = false;
  std::map<uint64_t, std::shared_ptr<Coll>> open; /* issued by some rank, not complete */
};

std::mutex mu; /* guards everything below, and runs the collectives */
std::condition_variable progress;
std::map<std::string, std::unique_ptr<Clique>> cliques;
/* Every communicator ever made: the dead ones are kept, so a call on one is caught rather
 * than read through a freed pointer. */
std::map<const ncclComm *, std::unique_ptr<ncclComm>> comms;
std::atomic<uint32_t> ids_made;

thread_local std::string last_error;

/* A call deferred to the outermost ncclGroupEnd. */
struct Deferred {
  bool init; /* a communicator joining its clique; else a collective */
  ncclComm *comm;
  Call call;
};

/* This thread's group. A thread ending inside one has left NCCL's work unlaunched. */
struct Group {
  int depth = 0;
  std::vector<Deferred> deferred;
  ncclResult_t error = ncclSuccess; /* the first refused call's, ncclGroupEnd's answer */
  ~Group() {
    if (depth > 0)
      fake_cuda_fail("ncclGroupStart",
                     "the thread ended inside %d group%s: ncclGroupStart without ncclGroupEnd "
                     "(%zu call%s left unlaunched)",
                     depth, depth > 1 ? "s" : "", deferred.size(), deferred.size() == 1 ? "" : "s");
  }
};
thread_local Group group;

const char *kind_api(Kind k) {
  return k == Kind::AllReduce ? "ncclAllReduce"
         : k == Kind::Reduce  ? "ncclReduce"
                              : "ncclBroadcast";
}

size_t type_size(ncclDataType_t t) { return t == ncclFloat32 ? 4 : 2; }

bool type_modelled(ncclDataType_t t) {
  return t == ncclFloat32 || t == ncclFloat16 || t == ncclBfloat16;
}

const char *type_name(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat16: return "ncclFloat16";
    case ncclBfloat16: return "ncclBfloat16";
    default: return "a type the fake does not model";
  }
}

std::string op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "ncclSum";
    case ncclProd: return "ncclProd";
    case ncclMax: return "ncclMax";
    case ncclMin: return "ncclMin";
    case ncclAvg: return "ncclAvg";
    default: return "premultiplied sum " + std::to_string((int)op);
  }
}

float load(const void *p, ncclDataType_t t, size_t i) {
  if (t == ncclFloat16) return compact16_fp16_to_f32(static_cast<const uint16_t *>(p)[i]);
  if (t == ncclBfloat16) return compact16_bf16_to_f32(static_cast<const uint16_t *>(p)[i]);
  return static_cast<const float *>(p)[i];
}

void store(void *p, ncclDataType_t t, size_t i, float v) {
  if (t == ncclFloat16) static_cast<uint16_t *>(p)[i] = compact16_fp16_from_f32(v);
  else if (t == ncclBfloat16) static_cast<uint16_t *>(p)[i] = compact16_bf16_from_f32(v);
  else static_cast<float *>(p)[i] = v;
}

/* A value as the type holds it (NCCL keeps a scalar in the collective's type). */
float in_type(float v, ncclDataType_t t) {
  if (t == ncclFloat16) return compact16_fp16_to_f32(compact16_fp16_from_f32(v));
  if (t == ncclBfloat16) return compact16_bf16_to_f32(compact16_bf16_from_f32(v));
  return v;
}

std::string who(const ncclComm *c) {
  char text[160];
  snprintf(text, sizeof text, "rank %d of %d of clique %s (GPU %d)", c->rank, c->nranks,
           c->clique->name.c_str(), c->device);
  return text;
}

/* ncclGetLastError's words for this thread, and the result. */
__attribute__((format(printf, 2, 3))) ncclResult_t refuse(ncclResult_t r, const char *fmt, ...) {
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  last_error = text;
  if (group.depth > 0 && group.error == ncclSuccess) group.error = r;
  return r;
}

/* Runs f with `device` current (NCCL sets its communicator's GPU itself). */
template <typename F>
void on_device(int device, F f) {
  int was = 0;
  cudaGetDevice(&was);
  if (was != device) cudaSetDevice(device);
  f();
  if (was != device) cudaSetDevice(was);
}

double wait_limit_s() {
  const char *env = getenv("CNNB_FAKE_NCCL_WAIT_S");
  double s = env && *env ? atof(env) : 60;
  return s > 0 ? s : 60;
}

/* The communicator behind a handle, checked: made by ncclCommInit*, not destroyed or
 * aborted, and (unless `polling`) not owing a poll. Caller holds mu. */
ncclComm *comm_of(ncclComm_t handle, const char *api, bool polling = false) {
  if (!handle) fake_cuda_fail(api, "the communicator is NULL");
  auto it = comms.find(handle);
  if (it == comms.end())
    fake_cuda_fail(api, "%p is not a communicator (none made by ncclCommInitRank* is there)",
                   (void *)handle);
  ncclComm *c = it->second.get();
  if (c->state == State::Destroyed)
    fake_cuda_fail(api, "%s is used after ncclCommDestroy", who(c).c_str());
  if (c->state == State::Aborted)
    fake_cuda_fail(api, "%s is used after ncclCommAbort", who(c).c_str());
  if (!polling && c->owing)
    fake_cuda_fail(api,
                   "%s is used while %s is in progress: a non-blocking communicator must be "
                   "polled with ncclCommGetAsyncError until ncclSuccess first (NCCL refuses "
                   "the call)",
                   who(c).c_str(), c->owing);
  return c;
}

/* The call's group, if any, holds calls on c: finalizing or destroying it now is too early. */
void no_deferred_calls(const ncclComm *c, const char *api) {
  for (const Deferred &d : group.deferred)
    if (d.comm == c)
      fake_cuda_fail(api, "%s still has calls in this thread's open group (before ncclGroupEnd)",
                     who(c).c_str());
}

void answered_in_progress(ncclComm *c, const char *api) {
  if (c->blocking) return;
  c->settle = 1;
  if (!c->owing) c->owing = api;
}

/* ---- cliques ---------------------------------------------------------------------------- */

std::string marker_name(const IdBits &bits) {
  char name[96];
  snprintf(name, sizeof name, "/cnnb-fake-nccl-%d-%u-%llx", (int)bits.pid, bits.serial,
           (unsigned long long)bits.nonce);
  return name;
}

void fail_clique(Clique *q, ncclResult_t r, const std::string &why) {
  for (ncclComm *m : q->members)
    if (m && m->async == ncclSuccess) {
      m->async = r;
      m->async_why = why;
    }
}

/* Whether a rank joined in another process: its init left the marker (see the top). */
void check_marker(Clique *q) {
  if (q->complete) return;
  int fd = shm_open(q->marker.c_str(), O_RDONLY, 0);
  if (fd < 0) return;
  close(fd);
  shm_unlink(q->marker.c_str());
  fail_clique(q, ncclInvalidUsage,
              "the fake NCCL spans one process: a rank of clique " + q->name +
                  " joined it from another process (multi-process NCCL, as horovod across "
                  "mpirun ranks, needs a real GPU and NCCL)");
}

/* c joins its clique (at its init, or at the ncclGroupEnd of the group holding it). */
void join(ncclComm *c, const char *api) {
  Clique *q = c->clique;
  if (q->complete)
    fake_cuda_fail(api,
                   "the unique id of clique %s was used again after its %d ranks joined (an id "
                   "makes one communicator per rank, once: get a new one with ncclGetUniqueId)",
                   q->name.c_str(), q->nranks);
  if (q->members[c->rank])
    fake_cuda_fail(api, "rank %d of clique %s joined twice (GPUs %d and %d)", c->rank,
                   q->name.c_str(), q->members[c->rank]->device, c->device);
  q->members[c->rank] = c;
  c->joined = true;
  if (++q->joined < q->nranks) return;
  q->complete = true;
  /* NCCL's own refusal at init: one GPU per rank. */
  for (int a = 0; a < q->nranks; a++)
    for (int b = a + 1; b < q->nranks; b++)
      if (q->members[a]->device == q->members[b]->device) {
        char why[200];
        snprintf(why, sizeof why,
                 "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d (clique %s)",
                 b, a, q->members[a]->device, q->name.c_str());
        fail_clique(q, ncclInvalidUsage, why);
        return;
      }
}

/* ---- collectives -------------------------------------------------------------------------- */

/* Runs a collective whose every rank has issued its call: computes the result from every
 * sendbuff, then writes each rank's recvbuff on its own stream. Caller holds mu. */
void run(Coll &k) {
  const Call &first = k.calls[0];
  const char *api = kind_api(first.kind);
  size_t n = k.calls.size(), count = first.count, bytes = count * type_size(first.type);
  for (const Call &c : k.calls)
    if (fake_cuda_capturing(c.stream))
      fake_cuda_fail(api,
                     "%s: stream %p began capturing before the collective ran (the fake "
                     "records no collective into a CUDA graph)",
                     who(c.comm).c_str(), (void *)c.stream);
  auto result = std::make_shared<std::vector<unsigned char>>(bytes);
  if (first.kind == Kind::Broadcast) {
    if (bytes) memcpy(result->data(), k.calls[first.root].send, bytes);
  } else {
    ncclDataType_t t = first.type;
    std::vector<float> acc(count);
    for (size_t r = 0; r < n; r++) {
      const Call &c = k.calls[r];
      float s = c.scalar ? in_type(load(c.scalar, t, 0), t) : c.scale;
      bool scaled = c.premul || c.op == ncclAvg;
      for (size_t i = 0; i < count; i++) {
        float x = load(c.send, t, i);
        if (scaled) x *= s;
        if (r == 0) acc[i] = x;
        else if (c.op == ncclProd) acc[i] *= x;
        else if (c.op == ncclMax) acc[i] = x != x || acc[i] < x ? x : acc[i]; /* NaN spreads */
        else if (c.op == ncclMin) acc[i] = x != x || acc[i] > x ? x : acc[i];
        else acc[i] += x;
      }
    }
    for (size_t i = 0; i < count; i++) store(result->data(), t, i, acc[i]);
  }
  for (size_t r = 0; r < n; r++) {
    const Call &c = k.calls[r];
    if (first.kind == Kind::Reduce && (int)r != first.root) continue;
    if (!bytes) continue;
    void *dst = c.recv;
    on_device(c.comm->device, [&] {
      fake_cuda_enqueue_fn(c.stream, api,
                           [dst, result, bytes]() { memcpy(dst, result->data(), bytes); });
    });
  }
  k.done = true;
}

/* "rank 1 (GPU 1)", where the clique is named already. */
std::string rank_of(const ncclComm *c) {
  return "rank " + std::to_string(c->rank) + " (GPU " + std::to_string(c->device) + ")";
}

/* Whether two ranks' calls of one collective agree; else fails naming both. */
void check_match(const Call &a, const Call &b, uint64_t seq) {
  const char *api = kind_api(b.kind);
  std::string x = rank_of(a.comm), y = rank_of(b.comm);
  if (a.kind != b.kind)
    fake_cuda_fail(api,
                   "collective #%llu of clique %s: %s calls %s, %s called %s (every rank must "
                   "issue the same collectives in the same order)",
                   (unsigned long long)seq + 1, a.comm->clique->name.c_str(), y.c_str(), api,
                   x.c_str(), kind_api(a.kind));
  if (a.count != b.count || a.type != b.type)
    fake_cuda_fail(api, "collective #%llu of clique %s: %s gives %zu x %s, %s gave %zu x %s",
                   (unsigned long long)seq + 1, a.comm->clique->name.c_str(), y.c_str(), b.count,
                   type_name(b.type), x.c_str(), a.count, type_name(a.type));
  if (b.kind != Kind::Broadcast && (a.premul != b.premul || (!a.premul && a.op != b.op)))
    fake_cuda_fail(api, "collective #%llu of clique %s: %s reduces with %s, %s with %s",
                   (unsigned long long)seq + 1, a.comm->clique->name.c_str(), y.c_str(),
                   op_name(b.op).c_str(), x.c_str(), op_name(a.op).c_str());
  if (b.kind != Kind::AllReduce && a.root != b.root)
    fake_cuda_fail(api, "collective #%llu of clique %s: %s gives root %d, %s gave root %d",
                   (unsigned long long)seq + 1, a.comm->clique->name.c_str(), y.c_str(), b.root,
                   x.c_str(), a.root);
}

/* A call joins its collective; the last rank's runs it. Caller holds mu. */
std::shared_ptr<Coll> submit(const Call &call) {
  ncclComm *c = call.comm;
  const char *api = kind_api(call.kind);
  if (c->state != State::Live)
    fake_cuda_fail(api, "%s was %s before the group holding its call ended", who(c).c_str(),
                   c->state == State::Finalized ? "finalized" : "destroyed or aborted");
  Clique *q = c->clique;
  uint64_t seq = c->issued++;
  std::shared_ptr<Coll> &slot = q->open[seq];
  if (!slot) {
    slot = std::make_shared<Coll>();
    slot->seq = seq;
    slot->calls.resize(q->nranks);
    slot->have.assign(q->nranks, false);
  }
  std::shared_ptr<Coll> k = slot;
  for (int r = 0; r < q->nranks; r++)
    if (k->have[r]) {
      check_match(k->calls[r], call, seq);
      break;
    }
  k->calls[c->rank] = call;
  k->have[c->rank] = true;
  if (++k->arrived == q->nranks) {
    q->open.erase(seq);
    run(*k);
    progress.notify_all();
  }
  return k;
}

/* Ranks that have not issued collective k, for messages. */
std::string missing(const Clique *q, const Coll &k) {
  std::string list;
  for (int r = 0; r < q->nranks; r++)
    if (!k.have[r]) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return list;
}

/* A call of k that some rank issued. */
const Call &issued(const Coll &k) {
  size_t r = 0;
  while (!k.have[r]) r++;
  return k.calls[r];
}

/* Fails a collective that can never complete (a rank gone), waking its waiters. */
void fail_coll(Clique *q, Coll &k, const std::string &why) {
  k.failed = ncclRemoteError;
  k.why = why;
  q->open.erase(k.seq);
  for (int r = 0; r < q->nranks; r++)
    if (k.have[r] && k.calls[r].comm->async == ncclSuccess) {
      k.calls[r].comm->async = ncclRemoteError;
      k.calls[r].comm->async_why = why;
    }
  progress.notify_all();
}

/* Waits until the collectives this thread submitted are complete (the other ranks' threads
 * issue theirs), and blocking inits until their cliques are. Fails at once where a missing
 * rank is driven by this thread (it would wait forever), and past the limit. Returns the
 * first failure's result. Caller holds mu through `hold`. */
ncclResult_t await(std::unique_lock<std::mutex> &hold,
                   const std::vector<std::shared_ptr<Coll>> &mine,
                   const std::vector<ncclComm *> &inits, const char *api) {
  std::thread::id self = std::this_thread::get_id();
  for (const auto &k : mine) {
    if (k->done || k->failed != ncclSuccess) continue;
    const Call &any = issued(*k);
    Clique *q = any.comm->clique;
    for (int r = 0; r < q->nranks; r++) {
      if (k->have[r]) continue;
      ncclComm *m = q->members[r];
      if (!m) continue; /* not joined yet: another thread's init may still come */
      if (m->state == State::Destroyed || m->state == State::Aborted) {
        fail_coll(q, *k,
                  "rank " + std::to_string(r) + " of clique " + q->name + " was " +
                      (m->state == State::Destroyed ? "destroyed" : "aborted") +
                      " before issuing " + kind_api(any.kind));
        break;
      }
      if (m->driver == self)
        fake_cuda_fail(api,
                       "illegal sequence: collective #%llu (%s) of clique %s has rank%s %s still "
                       "to issue it, and this thread drives rank %d too: on one thread, every "
                       "rank's call must be inside one ncclGroupStart/ncclGroupEnd (NCCL would "
                       "block here forever)",
                       (unsigned long long)k->seq + 1, kind_api(any.kind), q->name.c_str(),
                       missing(q, *k).find(',') != std::string::npos ? "s" : "",
                       missing(q, *k).c_str(), r);
    }
  }
  double limit = wait_limit_s();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  for (;;) {
    const Coll *waiting = nullptr;
    for (const auto &k : mine)
      if (!k->done && k->failed == ncclSuccess) waiting = k.get();
    const ncclComm *joining = nullptr;
    for (const ncclComm *c : inits)
      if (!c->clique->complete && c->state == State::Live) joining = c;
    if (!waiting && !joining) break;
    if (progress.wait_until(hold, deadline) == std::cv_status::timeout) {
      if (waiting) {
        const Call &any = issued(*waiting);
        fake_cuda_fail(api,
                       "collective #%llu (%s) of clique %s waited %g s for rank(s) %s to issue it "
                       "(no other thread did; $CNNB_FAKE_NCCL_WAIT_S sets the limit)",
                       (unsigned long long)waiting->seq + 1, kind_api(any.kind),
                       any.comm->clique->name.c_str(), limit,
                       missing(any.comm->clique, *waiting).c_str());
      }
      fake_cuda_fail(api,
                     "%s waited %g s for the other ranks to join (a blocking init: on one "
                     "thread, make every rank's communicator inside one group)",
                     who(joining).c_str(), limit);
    }
  }
  for (const auto &k : mine)
    if (k->failed != ncclSuccess) {
      last_error = k->why;
      return k->failed;
    }
  for (const ncclComm *c : inits)
    if (c->async != ncclSuccess) {
      last_error = c->async_why;
      return c->async;
    }
  return ncclSuccess;
}

/* The checks every collective call makes, then its Call. Caller holds mu. */
Call make_call(Kind kind, const void *send, void *recv, size_t count, ncclDataType_t type,
               ncclRedOp_t op, int root, ncclComm_t handle, cudaStream_t stream) {
  const char *api = kind_api(kind);
  ncclComm *c = comm_of(handle, api);
  if (c->state == State::Finalized)
    fake_cuda_fail(api, "%s is used after ncclCommFinalize", who(c).c_str());
  if (!c->joined) fake_cuda_fail(api, "%s has not joined its clique yet", who(c).c_str());
  c->driver = std::this_thread::get_id();
  if (!type_modelled(type))
    fake_cuda_fail(api, "type %d: the fake models ncclFloat32, ncclFloat16 and ncclBfloat16",
                   (int)type);
  Call call{kind, c, send, recv, count, type, op, root, stream, 1.0f, nullptr, false};
  if (kind != Kind::Broadcast) {
    if ((int)op >= (int)ncclNumOps) {
      size_t i = (size_t)op - ncclNumOps;
      if (i >= c->ops.size() || !c->ops[i].live)
        fake_cuda_fail(api, "op %d is no live premultiplied sum of %s", (int)op, who(c).c_str());
      if (c->ops[i].type != type)
        fake_cuda_fail(api, "op %d was made for %s, the collective is %s", (int)op,
                       type_name(c->ops[i].type), type_name(type));
      call.premul = true;
      call.scale = c->ops[i].scale;
      call.scalar = c->ops[i].scalar;
    } else if ((int)op < 0) {
      fake_cuda_fail(api, "op %d is no reduction", (int)op);
    } else if (op == ncclAvg) {
      call.scale = in_type(1.0f / (float)c->nranks, type); /* NCCL's avg on floats */
    }
  }
  if (kind != Kind::AllReduce && (root < 0 || root >= c->nranks))
    fake_cuda_fail(api, "root %d is not a rank of %s", root, who(c).c_str());
  fake_cuda_check_stream(stream, api);
  if (fake_cuda_capturing(stream))
    fake_cuda_fail(api, "stream %p is capturing: the fake records no collective into a CUDA graph",
                   (void *)stream);
  if (count > ((size_t)-1) / 4) fake_cuda_fail(api, "count %zu is out of range", count);
  size_t bytes = count * type_size(type);
  bool reads = kind != Kind::Broadcast || c->rank == root;
  bool writes = kind != Kind::Reduce || c->rank == root;
  if (bytes) {
    on_device(c->device, [&] {
      if (reads) fake_cuda_check_device(send, bytes, type_size(type), api, "sendbuff");
      if (writes) fake_cuda_check_device(recv, bytes, type_size(type), api, "recvbuff");
    });
    const char *a = static_cast<const char *>(send), *b = static_cast<const char *>(recv);
    if (reads && writes && a != b && a < b + bytes && b < a + bytes)
      fake_cuda_fail(api,
                     "sendbuff %p and recvbuff %p overlap by part (%zu bytes each): in place "
                     "they must be equal",
                     send, recv, bytes);
  }
  return call;
}

/* A collective call: deferred inside a group, else submitted and waited for. Caller holds
 * mu through `hold`. */
ncclResult_t collective(std::unique_lock<std::mutex> &hold, const Call &call) {
  const char *api = kind_api(call.kind);
  ncclComm *c = call.comm;
  if (c->async != ncclSuccess) return refuse(c->async, "%s", c->async_why.c_str());
  if (group.depth > 0) {
    group.deferred.push_back(Deferred{false, c, call});
    return ncclSuccess;
  }
  std::shared_ptr<Coll> k = submit(call);
  ncclResult_t r = await(hold, {k}, {}, api);
  if (r != ncclSuccess) return refuse(r, "%s", last_error.c_str());
  if (c->blocking) return ncclSuccess;
  answered_in_progress(c, api);
  return ncclInProgress;
}

} // namespace

/* ---- the API ------------------------------------------------------------------------------- */

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (!version) fake_cuda_fail("ncclGetVersion", "version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

/* The calling thread's, as NCCL's (the communicator's errors are copied there when
 * ncclCommGetAsyncError reports them). */
const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return last_error.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) fake_cuda_fail("ncclGetUniqueId", "uniqueId is NULL");
  IdBits bits;
  memcpy(bits.magic, kIdMagic, sizeof bits.magic);
  bits.pid = (int32_t)getpid();
  bits.serial = ++ids_made;
  std::random_device entropy;
  bits.nonce = ((uint64_t)entropy() << 32) ^ entropy();
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &bits, sizeof bits);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  const char *api = "ncclCommInitRankConfig";
  if (!out) fake_cuda_fail(api, "comm is NULL");
  *out = nullptr;
  bool blocking = true;
  if (config) {
    if (config->magic != 0xcafebeef || config->size < sizeof(size_t) + 3 * sizeof(int))
      fake_cuda_fail(api, "the config was not made from NCCL_CONFIG_INITIALIZER");
    blocking = config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  }
  if (nranks < 1) fake_cuda_fail(api, "nranks %d is below 1", nranks);
  if (rank < 0 || rank >= nranks) fake_cuda_fail(api, "rank %d is not in [0, %d)", rank, nranks);
  IdBits bits;
  memcpy(&bits, id.internal, sizeof bits);
  if (memcmp(bits.magic, kIdMagic, sizeof bits.magic) != 0)
    fake_cuda_fail(api, "the unique id was not made by ncclGetUniqueId");
  if (bits.pid != (int32_t)getpid()) {
    /* Leave the marker the maker's communicators look for, then refuse. */
    int fd = shm_open(marker_name(bits).c_str(), O_CREAT | O_RDWR, 0600);
    if (fd >= 0) close(fd);
    return refuse(ncclInvalidUsage,
                  "the fake NCCL spans one process: rank %d of %d joins a unique id made by "
                  "process %d from process %d (multi-process NCCL, as horovod across mpirun "
                  "ranks, needs a real GPU and NCCL)",
                  rank, nranks, (int)bits.pid, (int)getpid());
  }
  int device = 0;
  cudaGetDevice(&device);
  std::unique_lock<std::mutex> hold(mu);
  std::string key(id.internal, sizeof id.internal);
  std::unique_ptr<Clique> &slot = cliques[key];
  if (!slot) {
    slot = std::make_unique<Clique>();
    slot->key = key;
    slot->name = std::to_string(bits.pid) + "/" + std::to_string(bits.serial);
    slot->marker = marker_name(bits);
    slot->nranks = nranks;
    slot->members.assign(nranks, nullptr);
  }
  Clique *q = slot.get();
  if (q->nranks != nranks)
    fake_cuda_fail(api, "rank %d says clique %s has %d ranks, an earlier rank said %d", rank,
                   q->name.c_str(), nranks, q->nranks);
  auto made = std::make_unique<ncclComm>();
  ncclComm *c = made.get();
  c->clique = q;
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->blocking = blocking;
  c->state = State::Live;
  c->joined = false;
  c->settle = 0;
  c->owing = nullptr;
  c->async = ncclSuccess;
  c->issued = 0;
  c->driver = std::this_thread::get_id();
  comms[c] = std::move(made);
  *out = c;
  if (group.depth > 0) { /* joins at ncclGroupEnd, as NCCL initialises there */
    group.deferred.push_back(Deferred{true, c, Call{}});
    if (blocking) return ncclSuccess;
    answered_in_progress(c, api);
    return ncclInProgress;
  }
  join(c, api);
  if (!blocking) {
    answered_in_progress(c, api);
    return ncclInProgress;
  }
  ncclResult_t r = await(hold, {}, {c}, api);
  return r == ncclSuccess ? ncclSuccess : refuse(r, "%s", last_error.c_str());
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(out, nranks, id, rank, nullptr);
}

ncclResult_t ncclGroupStart(void) {
  group.depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  const char *api = "ncclGroupEnd";
  if (group.depth == 0) fake_cuda_fail(api, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  std::vector<Deferred> deferred;
  deferred.swap(group.deferred);
  ncclResult_t refused = group.error;
  group.error = ncclSuccess;
  std::unique_lock<std::mutex> hold(mu);
  std::vector<std::shared_ptr<Coll>> mine;
  std::vector<ncclComm *> inits;
  bool in_progress = false;
  for (const Deferred &d : deferred) {
    if (d.init) {
      if (d.comm->state == State::Aborted) continue; /* aborted inside the group */
      join(d.comm, api);
      if (d.comm->blocking) inits.push_back(d.comm);
    } else {
      mine.push_back(submit(d.call));
    }
  }
  for (const Deferred &d : deferred)
    if (!d.comm->blocking && d.comm->state != State::Aborted) {
      answered_in_progress(d.comm, api);
      in_progress = true;
    }
  ncclResult_t r = await(hold, mine, inits, api);
  if (refused != ncclSuccess) return refused; /* its words are in last_error already */
  if (r != ncclSuccess) return r;
  return in_progress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  std::unique_lock<std::mutex> hold(mu);
  return collective(hold, make_call(Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0,
                                    comm, stream));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  std::unique_lock<std::mutex> hold(mu);
  return collective(hold, make_call(Kind::Reduce, sendbuff, recvbuff, count, datatype, op, root,
                                    comm, stream));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  std::unique_lock<std::mutex> hold(mu);
  return collective(hold, make_call(Kind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum,
                                    root, comm, stream));
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  const char *api = "ncclRedOpCreatePreMulSum";
  std::unique_lock<std::mutex> hold(mu);
  ncclComm *c = comm_of(comm, api);
  if (c->state != State::Live)
    fake_cuda_fail(api, "%s is used after ncclCommFinalize", who(c).c_str());
  c->driver = std::this_thread::get_id();
  if (!op) fake_cuda_fail(api, "op is NULL");
  if (!scalar) fake_cuda_fail(api, "scalar is NULL");
  if (!type_modelled(datatype))
    fake_cuda_fail(api, "type %d: the fake models ncclFloat32, ncclFloat16 and ncclBfloat16",
                   (int)datatype);
  PreMul made{true, datatype, 1.0f, nullptr};
  if (residence == ncclScalarHostImmediate) {
    if (fake_cuda_is_device(scalar, type_size(datatype), api, "scalar"))
      fake_cuda_fail(api, "scalar %p is device memory, and the residence says host", scalar);
    made.scale = load(scalar, datatype, 0);
  } else if (residence == ncclScalarDevice) {
    on_device(c->device, [&] {
      fake_cuda_check_device(scalar, type_size(datatype), type_size(datatype), api, "scalar");
    });
    made.scalar = scalar;
  } else {
    fake_cuda_fail(api, "residence %d is neither ncclScalarDevice nor ncclScalarHostImmediate",
                   (int)residence);
  }
  c->ops.push_back(made);
  *op = (ncclRedOp_t)(ncclNumOps + (int)c->ops.size() - 1);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const char *api = "ncclRedOpDestroy";
  std::unique_lock<std::mutex> hold(mu);
  ncclComm *c = comm_of(comm, api);
  if ((int)op < (int)ncclNumOps) fake_cuda_fail(api, "%s is a built-in op", op_name(op).c_str());
  size_t i = (size_t)op - ncclNumOps;
  if (i >= c->ops.size()) fake_cuda_fail(api, "op %d was not made on %s", (int)op, who(c).c_str());
  if (!c->ops[i].live) fake_cuda_fail(api, "op %d was destroyed already", (int)op);
  c->ops[i].live = false;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) {
  const char *api = "ncclCommGetAsyncError";
  std::unique_lock<std::mutex> hold(mu);
  ncclComm *c = comm_of(comm, api, true);
  if (!async) fake_cuda_fail(api, "asyncError is NULL");
  if (c->joined) check_marker(c->clique);
  if (c->async != ncclSuccess) { /* reported: the caller's poll is over */
    last_error = c->async_why;
    c->owing = nullptr;
    *async = c->async;
  } else if (!c->joined || !c->clique->complete) {
    *async = ncclInProgress;
  } else if (c->settle > 0) {
    c->settle--;
    *async = ncclInProgress;
  } else {
    c->owing = nullptr;
    *async = ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  std::unique_lock<std::mutex> hold(mu);
  *count = comm_of(comm, "ncclCommCount")->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  std::unique_lock<std::mutex> hold(mu);
  *device = comm_of(comm, "ncclCommCuDevice")->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  std::unique_lock<std::mutex> hold(mu);
  *rank = comm_of(comm, "ncclCommUserRank")->rank;
  return ncclSuccess;
}

/* Every collective issued on it has completed (a thread waits in its call until then), so
 * finalizing flushes nothing: a non-blocking communicator answers "in progress" once. */
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  const char *api = "ncclCommFinalize";
  std::unique_lock<std::mutex> hold(mu);
  ncclComm *c = comm_of(comm, api);
  if (c->state == State::Finalized) fake_cuda_fail(api, "%s was finalized already", who(c).c_str());
  no_deferred_calls(c, api);
  c->driver = std::this_thread::get_id();
  c->state = State::Finalized;
  if (c->async != ncclSuccess) return refuse(c->async, "%s", c->async_why.c_str());
  if (c->blocking) return ncclSuccess;
  answered_in_progress(c, api);
  return ncclInProgress;
}

namespace {

/* c leaves (destroyed or aborted): its clique's collectives in flight never complete — those
 * waiting for its call, and its own pending ones, which NCCL's abort ends. Their waiters
 * wake with ncclRemoteError. */
void leave(ncclComm *c, State how) {
  c->state = how;
  Clique *q = c->clique;
  std::vector<std::shared_ptr<Coll>> stuck;
  for (auto &entry : q->open) stuck.push_back(entry.second);
  for (auto &k : stuck)
    fail_coll(q, *k,
              "rank " + std::to_string(c->rank) + " of clique " + q->name + " was " +
                  (how == State::Destroyed ? "destroyed" : "aborted") + " during collective #" +
                  std::to_string(k->seq + 1));
}

} // namespace

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const char *api = "ncclCommDestroy";
  if (!comm) return ncclSuccess;
  std::unique_lock<std::mutex> hold(mu);
  ncclComm *c = comm_of(comm, api);
  no_deferred_calls(c, api);
  leave(c, State::Destroyed);
  return ncclSuccess;
}

/* Allowed in every state but gone: it is how a caller ends a communicator whose peers are
 * lost, or whose work is pending. */
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  const char *api = "ncclCommAbort";
  if (!comm) return ncclSuccess;
  std::unique_lock<std::mutex> hold(mu);
  ncclComm *c = comm_of(comm, api, true);
  std::vector<Deferred> kept;
  for (Deferred &d : group.deferred)
    if (d.comm != c) kept.push_back(d);
  group.deferred.swap(kept);
  leave(c, State::Aborted);
  return ncclSuccess;
}

} // extern "C"

#endif /* __has_include(<nccl.h>) */
