/* all_reduce_spec.c — reads --all_reduce_spec (all_reduce_spec.h). Works on spans of the
 * flag's text and fixed arrays: no allocation, so a refused spec costs nothing. */
#include "all_reduce_spec.h"

#include <stdio.h>
#include <string.h>

const char all_reduce_spec_grammar[] =
    "the grammar is ALG[#SHARDS][/CROSS][:LIMIT:SPEC] with ALG one of xring, ring, pscpu, "
    "nccl (GPUs), SHARDS 1..1024, CROSS across ranks one of mpi, xring, pscpu (MPI's "
    "allreduce) or nccl (after nccl), LIMIT the largest bucket in elements (suffix k, m, g: "
    "x1024) taking ALG, increasing, e.g. pscpu:32k:xring or nccl/xring";

typedef struct span {
  const char *p;
  size_t len;
} span;

static bool span_is(span s, const char *word) {
  return s.len == strlen(word) && memcmp(s.p, word, s.len) == 0;
}

/* Splits s at the first `sep`: *head before it, *rest after (rest.p NULL when absent). */
static void split(span s, char sep, span *head, span *rest) {
  const char *at = memchr(s.p, sep, s.len);
  if (!at) {
    *head = s;
    *rest = (span){NULL, 0};
    return;
  }
  *head = (span){s.p, (size_t)(at - s.p)};
  *rest = (span){at + 1, s.len - (size_t)(at - s.p) - 1};
}

static cnnb_status refuse(cnnb_ctx *ctx, const char *text, const char *what, span part) {
  return cnnb_error(ctx, CNNB_EINVAL, "--all_reduce_spec=%s: %s '%.*s'; %s", text, what,
                    (int)part.len, part.p, all_reduce_spec_grammar);
}

/* Digits, with an optional binary suffix when `suffix` (tf's parse_general_int, whose T we
 * leave out: no bucket has 2^40 elements), in [1, max]. */
static bool parse_count(span s, bool suffix, int64_t max, int64_t *value) {
  int64_t scale = 1;
  size_t digits = s.len;
  if (suffix && digits > 0) {
    switch (s.p[digits - 1]) {
      case 'k':
      case 'K':
        scale = (int64_t)1 << 10;
        digits--;
        break;
      case 'm':
      case 'M':
        scale = (int64_t)1 << 20;
        digits--;
        break;
      case 'g':
      case 'G':
        scale = (int64_t)1 << 30;
        digits--;
        break;
      default: break;
    }
  }
  if (digits == 0 || digits > 12) return false; /* 12 digits: no overflow below */
  int64_t v = 0;
  for (size_t i = 0; i < digits; i++) {
    if (s.p[i] < '0' || s.p[i] > '9') return false;
    v = v * 10 + (s.p[i] - '0');
  }
  if (v == 0 || v > max / scale) return false;
  *value = v * scale;
  return true;
}

/* NAME[#SHARDS] of the local algorithm. */
static cnnb_status parse_local(cnnb_ctx *ctx, const char *text, span s, reduce_range *r) {
  span name, shards;
  split(s, '#', &name, &shards);
  if (name.len == 0) return refuse(ctx, text, "no algorithm in", s);
  if (span_is(name, "xring") || span_is(name, "ring")) {
    r->alg = LOCAL_REDUCE_XRING;
  } else if (span_is(name, "pscpu")) {
    r->alg = LOCAL_REDUCE_PSCPU;
  } else if (span_is(name, "nccl")) {
    r->nccl = true;
  } else if (span_is(name, "mpi")) {
    return refuse(ctx, text,
                  "the cross-rank part needs a local algorithm before it (xring/mpi, nccl/mpi):",
                  s);
  } else {
    return refuse(ctx, text, "unknown algorithm", name);
  }
  r->shards = 1;
  if (shards.p) {
    int64_t v = 0;
    if (!parse_count(shards, false, ALL_REDUCE_SPEC_MAX_SHARDS, &v))
      return refuse(ctx, text, "the shard count after '#' must be a number from 1 to 1024, not",
                    shards);
    r->shards = (int32_t)v;
  }
  return CNNB_OK;
}

/* CROSS[#SHARDS]: how the ranks' local sums meet. */
static cnnb_status parse_cross(cnnb_ctx *ctx, const char *text, span cross, reduce_range *r) {
  span name, shards;
  split(cross, '#', &name, &shards);
  int64_t unused = 0;
  if (shards.p && !parse_count(shards, false, ALL_REDUCE_SPEC_MAX_SHARDS, &unused))
    return refuse(ctx, text, "the shard count after '#' must be a number from 1 to 1024, not",
                  shards);
  if (span_is(name, "mpi") || span_is(name, "xring") || span_is(name, "ring") ||
      span_is(name, "pscpu")) {
    r->cross_nccl = false;
    return CNNB_OK;
  }
  if (span_is(name, "nccl")) {
    if (!r->nccl)
      return refuse(ctx, text, "NCCL across ranks needs NCCL within them (nccl or nccl/nccl), not",
                    cross);
    return CNNB_OK;
  }
  return refuse(ctx, text,
                "across ranks mpi, xring, pscpu (MPI's allreduce) or nccl are supported, not",
                name);
}

/* LOCAL[/CROSS]. */
static cnnb_status parse_range(cnnb_ctx *ctx, const char *text, span s, reduce_range *r) {
  if (s.len == 0) return refuse(ctx, text, "an algorithm is missing between the ':'s:", s);
  snprintf(r->text, sizeof r->text, "%.*s", (int)s.len, s.p);
  span local, cross;
  split(s, '/', &local, &cross);
  cnnb_status st = parse_local(ctx, text, local, r);
  if (st != CNNB_OK) return st;
  r->cross_nccl = r->nccl; /* nccl alone spans the ranks */
  if (cross.p && memchr(cross.p, '/', cross.len))
    return refuse(ctx, text, "one '/' at most (LOCAL/CROSS):", s);
  return cross.p ? parse_cross(ctx, text, cross, r) : CNNB_OK;
}

cnnb_status all_reduce_spec_parse(cnnb_ctx *ctx, const char *text, all_reduce_spec *out) {
  memset(out, 0, sizeof *out);
  if (!text || !*text) {
    out->ranges[0] = (reduce_range){
        .alg = LOCAL_REDUCE_XRING, .shards = 1, .limit = INT64_MAX, .text = "xring"};
    out->num_ranges = 1;
    return CNNB_OK;
  }
  span rest = {text, strlen(text)};
  int64_t previous = 0;
  for (;;) {
    if (out->num_ranges == ALL_REDUCE_SPEC_MAX_RANGES)
      return refuse(ctx, text, "more than 16 ranges: the rest is", rest);
    reduce_range *r = &out->ranges[out->num_ranges++];
    span range, limit;
    split(rest, ':', &range, &rest);
    cnnb_status st = parse_range(ctx, text, range, r);
    if (st != CNNB_OK) return st;
    r->limit = INT64_MAX;
    if (!rest.p) return CNNB_OK;
    split(rest, ':', &limit, &rest);
    if (!parse_count(limit, true, (int64_t)1 << 40, &r->limit))
      return refuse(ctx, text, "a limit must be a positive element count (k, m, g: x1024), not",
                    limit);
    if (r->limit <= previous)
      return refuse(ctx, text, "limits must increase from left to right:", limit);
    previous = r->limit;
    if (!rest.p) return refuse(ctx, text, "no algorithm after the last limit", limit);
  }
}

const reduce_range *all_reduce_spec_pick(const all_reduce_spec *spec, int64_t count) {
  for (int32_t i = 0; i < spec->num_ranges - 1; i++)
    if (count <= spec->ranges[i].limit) return &spec->ranges[i];
  return &spec->ranges[spec->num_ranges - 1];
}

const reduce_range *all_reduce_spec_find_nccl(const all_reduce_spec *spec) {
  for (int32_t i = 0; i < spec->num_ranges; i++)
    if (spec->ranges[i].nccl) return &spec->ranges[i];
  return NULL;
}

void all_reduce_spec_describe(const all_reduce_spec *spec, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (int32_t i = 0; i < spec->num_ranges && used < size; i++) {
    const reduce_range *r = &spec->ranges[i];
    char alg[48], shards[16] = "";
    if (r->shards > 1) snprintf(shards, sizeof shards, "#%d", (int)r->shards);
    snprintf(alg, sizeof alg, "%s%s%s", r->nccl ? "nccl" : local_reduce_alg_name(r->alg), shards,
             r->nccl && !r->cross_nccl ? "/mpi" : "");
    int n;
    if (spec->num_ranges == 1) n = snprintf(out + used, size - used, "%s for every bucket", alg);
    else if (i + 1 < spec->num_ranges)
      n = snprintf(out + used, size - used, "%s%s for buckets of up to %lld elements",
                   i ? ", " : "", alg, (long long)r->limit);
    else n = snprintf(out + used, size - used, ", %s above", alg);
    if (n < 0) return;
    used += (size_t)n;
  }
}
