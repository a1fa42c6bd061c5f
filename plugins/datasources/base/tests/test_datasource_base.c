/* test_datasource_base — the datasources' base library (plugins/datasources/base) on its
 * own: the shards of one epoch are disjoint and cover it exactly once, also when the
 * world does not divide it; every training epoch reshuffles and evaluation keeps file
 * order; skipping equals reading and discarding, across epoch ends; the crop draw stays in
 * range and does not depend on the shard; a split is loaded once for every holder and
 * freed by the last; a failed load leaves nothing behind. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ds_order.h"
#include "ds_splits.h"

enum { COUNT = 23 };

START_TEST(shards_cover_each_epoch_once) {
  for (int32_t world = 1; world <= 5; world++) {
    for (int64_t epoch = 0; epoch < 3; epoch++) {
      int seen[COUNT] = {0};
      for (int32_t rank = 0; rank < world; rank++) {
        ds_order o;
        ck_assert_int_eq(ds_order_init(&o, COUNT, rank, world, 7, 0x5A17, 1), 0);
        ds_order_skip(&o, epoch * ((COUNT - rank + world - 1) / world));
        int64_t e = -1;
        for (int64_t i = 0; i < (COUNT - rank + world - 1) / world; i++) {
          int64_t index = ds_order_next(&o, &e);
          ck_assert_int_eq(e, epoch);
          ck_assert(index >= 0 && index < COUNT);
          seen[index]++;
        }
        ds_order_free(&o);
      }
      for (int i = 0; i < COUNT; i++)
        ck_assert_msg(seen[i] == 1, "world %d epoch %lld: example %d read %d times", world,
                      (long long)epoch, i, seen[i]);
    }
  }
}
END_TEST

START_TEST(training_reshuffles_evaluation_keeps_order) {
  ds_order train, eval;
  ck_assert_int_eq(ds_order_init(&train, COUNT, 0, 1, 3, 1, 1), 0);
  ck_assert_int_eq(ds_order_init(&eval, COUNT, 0, 1, 3, 1, 0), 0);
  int64_t first[COUNT], second[COUNT];
  for (int i = 0; i < COUNT; i++) {
    first[i] = ds_order_next(&train, NULL);
    ck_assert_int_eq(ds_order_next(&eval, NULL), i);
  }
  for (int i = 0; i < COUNT; i++) second[i] = ds_order_next(&train, NULL);
  ck_assert_msg(memcmp(first, second, sizeof first) != 0, "epoch 1 repeats epoch 0's order");
  ds_order_free(&train);
  ds_order_free(&eval);
}
END_TEST

/* Another salt, another order: two datasources on one seed do not walk alike. */
START_TEST(salt_changes_the_order) {
  ds_order a, b;
  ck_assert_int_eq(ds_order_init(&a, COUNT, 0, 1, 3, 1, 1), 0);
  ck_assert_int_eq(ds_order_init(&b, COUNT, 0, 1, 3, 2, 1), 0);
  int same = 1;
  for (int i = 0; i < COUNT; i++) same &= ds_order_next(&a, NULL) == ds_order_next(&b, NULL);
  ck_assert_msg(!same, "salts 1 and 2 give one order");
  ds_order_free(&a);
  ds_order_free(&b);
}
END_TEST

START_TEST(skip_equals_reading) {
  for (int64_t skip = 0; skip < 3 * COUNT; skip += 4) {
    ds_order read, jumped;
    ck_assert_int_eq(ds_order_init(&read, COUNT, 1, 3, 11, 9, 1), 0);
    ck_assert_int_eq(ds_order_init(&jumped, COUNT, 1, 3, 11, 9, 1), 0);
    for (int64_t i = 0; i < skip; i++) ds_order_next(&read, NULL);
    ds_order_skip(&jumped, skip);
    for (int i = 0; i < 2 * COUNT; i++) {
      int64_t e1, e2;
      int64_t want = ds_order_next(&read, &e1), got = ds_order_next(&jumped, &e2);
      ck_assert_msg(want == got && e1 == e2,
                    "after skipping %lld, read %d: %lld (epoch %lld), "
                    "want %lld (epoch %lld)",
                    (long long)skip, i, (long long)got, (long long)e2, (long long)want,
                    (long long)e1);
    }
    ds_order_free(&read);
    ds_order_free(&jumped);
  }
}
END_TEST

START_TEST(crop_in_range_and_covers_it) {
  int dx_seen[9] = {0}, flips = 0;
  for (int64_t example = 0; example < 2000; example++) {
    ds_crop c = ds_order_crop(5, 42, 1, example, 4);
    ck_assert(c.dx >= 0 && c.dx <= 8 && c.dy >= 0 && c.dy <= 8);
    ck_assert(c.flip == 0 || c.flip == 1);
    dx_seen[c.dx]++;
    flips += c.flip;
    ds_crop again = ds_order_crop(5, 42, 1, example, 4);
    ck_assert(memcmp(&c, &again, sizeof c) == 0);
  }
  for (int i = 0; i < 9; i++) ck_assert_msg(dx_seen[i] > 0, "corner %d never drawn", i);
  ck_assert(flips > 800 && flips < 1200);
}
END_TEST

/* ---- splits -------------------------------------------------------------------------- */

static int loads, frees;

static cnnb_status load_int(const void *arg, void **set, char *err, size_t err_size) {
  if (*(const int *)arg < 0) {
    strncpy(err, "no such split", err_size);
    return CNNB_EDATA;
  }
  int *v = malloc(sizeof *v);
  *v = *(const int *)arg;
  *set = v;
  loads++;
  return CNNB_OK;
}

static void free_int(void *set) {
  free(set);
  frees++;
}

START_TEST(split_loaded_once_freed_by_last) {
  loads = frees = 0;
  int one = 1, two = 2;
  cnnb_status st = CNNB_OK;
  char err[64];
  ds_split *a = ds_split_acquire("a", load_int, free_int, &one, &st, err, sizeof err);
  ds_split *a2 = ds_split_acquire("a", load_int, free_int, &two, &st, err, sizeof err);
  ds_split *b = ds_split_acquire("b", load_int, free_int, &two, &st, err, sizeof err);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_eq(a, a2);
  ck_assert_int_eq(loads, 2);
  ck_assert_int_eq(*(const int *)ds_split_set(a2), 1);
  ck_assert_int_eq(*(const int *)ds_split_set(b), 2);
  ds_split_release(a);
  ck_assert_int_eq(frees, 0);
  ds_split_release(a2);
  ck_assert_int_eq(frees, 1);
  ds_split_release(b);
  ds_split_release(NULL);
  ck_assert_int_eq(frees, 2);
  /* Gone with its last holder: asked again, it is loaded again. */
  a = ds_split_acquire("a", load_int, free_int, &two, &st, err, sizeof err);
  ck_assert_int_eq(*(const int *)ds_split_set(a), 2);
  ds_split_release(a);
}
END_TEST

START_TEST(failed_load_says_why) {
  int bad = -1;
  cnnb_status st = CNNB_OK;
  char err[64] = "";
  ck_assert_ptr_null(ds_split_acquire("bad", load_int, free_int, &bad, &st, err, sizeof err));
  ck_assert_int_eq(st, CNNB_EDATA);
  ck_assert_str_eq(err, "no such split");
  /* Nothing of it was kept: a later good load of that key happens. */
  int good = 3;
  loads = 0;
  ds_split *s = ds_split_acquire("bad", load_int, free_int, &good, &st, err, sizeof err);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(loads, 1);
  ds_split_release(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("datasource_base");
  TCase *tc = tcase_create("base");
  tcase_add_test(tc, shards_cover_each_epoch_once);
  tcase_add_test(tc, training_reshuffles_evaluation_keeps_order);
  tcase_add_test(tc, salt_changes_the_order);
  tcase_add_test(tc, skip_equals_reading);
  tcase_add_test(tc, crop_in_range_and_covers_it);
  tcase_add_test(tc, split_loaded_once_freed_by_last);
  tcase_add_test(tc, failed_load_says_why);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
