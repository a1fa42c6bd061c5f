/* test_local_reduce.c — the local all-reduce algorithms compiled into the strategy plugins
 * (plugins/strategies/common/local_reduce.c, in cnnb_strategy_common, linked as the plugins link
 * it): xring and pscpu, plain and sharded, for 1..8 replicas and ranges from empty to several pscpu
 * blocks with ragged chunks, leave on every replica the same floats (bit for bit), within the float
 * error bound of recursive summation of a double-precision sum, exact on integers, and nothing
 * written outside the range. The ring's summation order (chunk c starts at replica c) is pinned by
 * a case where order changes the float result. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "local_reduce.h"

enum { MAX_REPLICAS = 8, GUARD = 16 };
static const float SENTINEL = -12345.5f;

/* Deterministic values of varied sign and magnitude (a few orders), from a 64-bit LCG. */
static uint64_t rng_state;
static float next_value(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  uint32_t bits = (uint32_t)(rng_state >> 32);
  double unit = (double)(bits & 0xffffff) / (double)0x1000000 * 2.0 - 1.0; /* [-1, 1) */
  return (float)ldexp(unit, (int)((bits >> 24) % 16) - 4);                 /* 2^-4 .. 2^11 */
}

typedef struct buffers {
  int32_t n;
  int64_t count;
  float *data[MAX_REPLICAS]; /* [count + GUARD]: the range, then a guard */
  double *sum, *abs_sum;     /* [count]: what the reduction should give, and its bound's scale */
} buffers;

static buffers make(int32_t n, int64_t count, bool integers) {
  buffers b = {.n = n, .count = count};
  b.sum = calloc((size_t)count + 1, sizeof *b.sum);
  b.abs_sum = calloc((size_t)count + 1, sizeof *b.abs_sum);
  ck_assert(b.sum && b.abs_sum);
  for (int32_t r = 0; r < n; r++) {
    ck_assert((b.data[r] = malloc(((size_t)count + GUARD) * sizeof(float))) != NULL);
    for (int64_t i = 0; i < count; i++) {
      float v = integers ? (float)((int64_t)((i * 7 + r * 13) % 101) - 50) : next_value();
      b.data[r][i] = v;
      b.sum[i] += v;
      b.abs_sum[i] += fabs(v);
    }
    for (int64_t i = count; i < count + GUARD; i++) b.data[r][i] = SENTINEL;
  }
  return b;
}

static void release(buffers *b) {
  for (int32_t r = 0; r < b->n; r++) free(b->data[r]);
  free(b->sum);
  free(b->abs_sum);
}

/* Every replica equal to replica 0 bit for bit, replica 0 within the recursive-summation
 * bound (n - 1) u sum|x| (u = 2^-24) of the exact sum (exactly equal when `exact`), the
 * guards untouched. (Checked by hand and asserted on failure: ck_assert per element
 * would record a mark point for each of millions of elements.) */
static void check_result(const buffers *b, const char *what, bool exact) {
  for (int32_t r = 1; r < b->n; r++)
    if (memcmp(b->data[r], b->data[0], (size_t)b->count * sizeof(float)) != 0)
      ck_abort_msg("%s: replica %d differs from replica 0", what, (int)r);
  for (int64_t i = 0; i < b->count; i++) {
    double got = b->data[0][i], bound = exact ? 0.0 : (b->n - 1) * ldexp(b->abs_sum[i], -24);
    if (!(fabs(got - b->sum[i]) <= bound))
      ck_abort_msg("%s: element %lld is %.9g, the sum is %.9g (bound %g)", what, (long long)i, got,
                   b->sum[i], bound);
  }
  for (int32_t r = 0; r < b->n; r++)
    for (int64_t i = b->count; i < b->count + GUARD; i++)
      if (b->data[r][i] != SENTINEL)
        ck_abort_msg("%s: replica %d written past the range at %lld", what, (int)r,
                     (long long)(i - b->count));
}

static float *scratch(void) {
  static float *block;
  if (!block) ck_assert((block = malloc((size_t)LOCAL_REDUCE_PSCPU_BLOCK * sizeof(float))) != NULL);
  return block;
}

static const int32_t replica_counts[] = {1, 2, 3, 4, 5, 8};
/* Empty, shorter than the ring's chunk count, ragged chunks, and past two pscpu blocks. */
static const int64_t counts[] = {0, 1, 2, 3, 7, 1000, 2 * LOCAL_REDUCE_PSCPU_BLOCK + 37};
static const int32_t shard_counts[] = {1, 2, 3, 7};

static void sweep(local_reduce_alg alg, bool integers) {
  rng_state = 42;
  for (size_t a = 0; a < sizeof replica_counts / sizeof *replica_counts; a++)
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
      for (size_t s = 0; s < sizeof shard_counts / sizeof *shard_counts; s++) {
        int32_t n = replica_counts[a], shards = shard_counts[s];
        buffers b = make(n, counts[c], integers);
        local_reduce(alg, b.data, n, b.count, shards, scratch());
        char what[128];
        snprintf(what, sizeof what, "%s#%d, %d replicas, %lld elements%s",
                 local_reduce_alg_name(alg), (int)shards, (int)n, (long long)b.count,
                 integers ? ", integers" : "");
        check_result(&b, what, integers);
        release(&b);
      }
}

START_TEST(xring_sums_within_bound) { sweep(LOCAL_REDUCE_XRING, false); }
END_TEST

START_TEST(pscpu_sums_within_bound) { sweep(LOCAL_REDUCE_PSCPU, false); }
END_TEST

START_TEST(integers_sum_exactly) {
  sweep(LOCAL_REDUCE_XRING, true);
  sweep(LOCAL_REDUCE_PSCPU, true);
}
END_TEST

/* The unsharded entry points are the one-shard case. */
START_TEST(entry_points_match_one_shard) {
  rng_state = 7;
  buffers a = make(4, 5003, false), b = make(4, 5003, false);
  for (int32_t r = 0; r < 4; r++) memcpy(b.data[r], a.data[r], 5003 * sizeof(float));
  local_reduce_xring(a.data, 4, a.count);
  local_reduce(LOCAL_REDUCE_XRING, b.data, 4, b.count, 1, NULL);
  ck_assert(memcmp(a.data[0], b.data[0], 5003 * sizeof(float)) == 0);
  check_result(&a, "xring", false);
  release(&a);
  release(&b);
  rng_state = 7;
  a = make(3, 5003, false);
  b = make(3, 5003, false);
  for (int32_t r = 0; r < 3; r++) memcpy(b.data[r], a.data[r], 5003 * sizeof(float));
  local_reduce_pscpu(a.data, 3, a.count, scratch());
  local_reduce(LOCAL_REDUCE_PSCPU, b.data, 3, b.count, 1, scratch());
  ck_assert(memcmp(a.data[0], b.data[0], 5003 * sizeof(float)) == 0);
  check_result(&a, "pscpu", false);
  release(&a);
  release(&b);
}
END_TEST

/* Three replicas holding 1, 1e8, -1e8 in each of three elements (one per ring chunk):
 * the float sum depends on the order. The ring sums chunk c starting at replica c
 * ((1 + 1e8) - 1e8 = 0, (1e8 - 1e8) + 1 = 1, (-1e8 + 1) + 1e8 = 0); pscpu sums every
 * element in replica order (0 everywhere). Sharding pscpu never changes its order. */
START_TEST(summation_order) {
  const float values[3] = {1.0f, 1e8f, -1e8f};
  float data[3][3];
  float *views[3] = {data[0], data[1], data[2]};
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 3; i++) data[r][i] = values[r];
  local_reduce_xring(views, 3, 3);
  const float ring_want[3] = {0.0f, 1.0f, 0.0f};
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 3; i++)
      ck_assert_msg(data[r][i] == ring_want[i], "xring: replica %d element %d is %g, want %g", r, i,
                    (double)data[r][i], (double)ring_want[i]);
  for (int32_t shards = 1; shards <= 3; shards++) {
    for (int r = 0; r < 3; r++)
      for (int i = 0; i < 3; i++) data[r][i] = values[r];
    local_reduce(LOCAL_REDUCE_PSCPU, views, 3, 3, shards, scratch());
    for (int r = 0; r < 3; r++)
      for (int i = 0; i < 3; i++)
        ck_assert_msg(data[r][i] == 0.0f, "pscpu#%d: replica %d element %d is %g, want 0",
                      (int)shards, r, i, (double)data[r][i]);
  }
}
END_TEST

START_TEST(names) {
  ck_assert_str_eq(local_reduce_alg_name(LOCAL_REDUCE_XRING), "xring");
  ck_assert_str_eq(local_reduce_alg_name(LOCAL_REDUCE_PSCPU), "pscpu");
}
END_TEST

int main(void) {
  Suite *s = suite_create("local_reduce");
  TCase *tc = tcase_create("local_reduce");
  tcase_add_test(tc, xring_sums_within_bound);
  tcase_add_test(tc, pscpu_sums_within_bound);
  tcase_add_test(tc, integers_sum_exactly);
  tcase_add_test(tc, entry_points_match_one_shard);
  tcase_add_test(tc, summation_order);
  tcase_add_test(tc, names);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
