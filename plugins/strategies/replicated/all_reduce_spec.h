/* all_reduce_spec.h — --all_reduce_spec as tf_cnn_benchmarks' parse_all_reduce_spec reads
 * it, for the replicated strategy:
 *   spec  ::= range | range:LIMIT:spec
 *   range ::= alg | alg/cross               local algorithm, then the cross-rank one
 *   alg   ::= NAME | NAME#SHARDS            NAME: xring, ring, pscpu, nccl
 *   cross ::= mpi | xring | pscpu | nccl    (#SHARDS allowed and unused)
 * A range before LIMIT takes the buckets of at most LIMIT elements (tf compares a
 * tensor's element count with `<=`; k, m, g multiply by 1024, 1024^2, 1024^3), the
 * spec after it the rest; limits must increase. SHARDS (1..1024) cuts each bucket into
 * that many pieces. Across ranks tf's xring and pscpu ran over gRPC; here MPI's allreduce
 * stands in for them (mpi, xring and pscpu all mean it). nccl is tf's NCCL all-reduce:
 * alone (or nccl/nccl), one NCCL communicator over every GPU of every rank; nccl/mpi
 * (nccl/xring, nccl/pscpu) reduces the process's GPUs with NCCL, sums that across ranks
 * with MPI, and broadcasts it back with NCCL, as tf's nccl/xring. NCCL across ranks needs
 * NCCL within them: xring/nccl is refused. Empty: xring.
 *
 * Parsing is grammar only and allocates nothing, so a refusal comes before any memory is
 * taken; whether the device can run an algorithm (nccl) is the strategy's to judge. */
#ifndef CNNB_REPLICATED_ALL_REDUCE_SPEC_H
#define CNNB_REPLICATED_ALL_REDUCE_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "local_reduce.h"

enum { ALL_REDUCE_SPEC_MAX_RANGES = 16, ALL_REDUCE_SPEC_MAX_SHARDS = 1024 };

typedef struct reduce_range {
  local_reduce_alg alg; /* xring for "ring" too; meaningless when nccl */
  bool nccl;            /* "nccl": needs a device with NCCL */
  bool cross_nccl;      /* nccl alone or nccl/nccl: one NCCL all-reduce spans the ranks;
                           false: MPI sums across ranks */
  int32_t shards;       /* >= 1 */
  int64_t limit;        /* the largest bucket (elements) it takes; INT64_MAX for the last */
  char text[64];        /* the range as written (truncated), for messages */
} reduce_range;

typedef struct all_reduce_spec {
  reduce_range ranges[ALL_REDUCE_SPEC_MAX_RANGES];
  int32_t num_ranges;
} all_reduce_spec;

/* The grammar in one line, for messages that refuse a spec. */
extern const char all_reduce_spec_grammar[];

/* Parses `text` (--all_reduce_spec's value). A malformed spec is CNNB_EINVAL with a
 * message naming the flag, the bad part and the grammar. */
cnnb_status all_reduce_spec_parse(cnnb_ctx *ctx, const char *text, all_reduce_spec *out);
/* The range that reduces a bucket of `count` elements. */
const reduce_range *all_reduce_spec_pick(const all_reduce_spec *spec, int64_t count);
/* The first range that uses nccl, or NULL. */
const reduce_range *all_reduce_spec_find_nccl(const all_reduce_spec *spec);
/* "pscpu for buckets of up to 32768 elements, xring#2 above", for a log line. */
void all_reduce_spec_describe(const all_reduce_spec *spec, char *out, size_t size);

#endif
