/* test_bad_tally.c — when the imagenet datasource's unreadable examples mean nothing more
 * can be read (plugins/datasources/imagenet/bad_tally.c, compiled in): a folder of 40
 * unreadable and 2 good images never stops, in any order (the old "in a row" count
 * stopped when an epoch ended and the next began with bad ones); a shard whose every
 * epoch holds the same examples stops once one whole epoch was unreadable, judged at
 * the next epoch's first example, never on the part of an epoch a resume starts in;
 * shuffled shards stop once every example of the split has been found unreadable,
 * counting each example once (or, for shards of a known size, each file once a whole
 * epoch that read it was unreadable); framing losses are summed. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bad_tally.h"

START_TEST(two_good_of_42_never_stop) {
  /* Epochs of 42 where the 2 good ones sit last in one epoch and first... anywhere: the
   * worst order puts 80 bad ones in a row across an epoch's end. */
  bad_tally t;
  ck_assert_int_eq(bad_tally_init(&t, true, 42, 42, false), 0);
  char why[256];
  for (int64_t epoch = 0; epoch < 6; epoch++)
    for (int64_t k = 0; k < 42; k++) {
      /* Even epochs: good ones first; odd: last. */
      int64_t unit = epoch % 2 ? 41 - k : k;
      ck_assert_int_eq(bad_tally_take(&t, epoch, unit, unit >= 2, 0, 0, why, sizeof why), 0);
    }
  bad_tally_free(&t);
}
END_TEST

START_TEST(same_share_stops_after_one_whole_epoch) {
  /* A shard's share of 5 examples of a split of 10 (units unknown here: no distinct count). */
  bad_tally t;
  ck_assert_int_eq(bad_tally_init(&t, true, 0, 0, false), 0);
  char why[256] = "";
  for (int k = 0; k < 5; k++) ck_assert_int_eq(bad_tally_take(&t, 0, -1, true, 0, 0, why, 256), 0);
  /* Judged when the next epoch begins. */
  ck_assert_int_eq(bad_tally_take(&t, 1, -1, true, 0, 0, why, sizeof why), 1);
  ck_assert_msg(strstr(why, "every one of the 5 examples of epoch 0 of this shard"), "%s", why);
  bad_tally_free(&t);
  /* One good example in the epoch: no stop. */
  ck_assert_int_eq(bad_tally_init(&t, true, 0, 0, false), 0);
  for (int k = 0; k < 5; k++)
    ck_assert_int_eq(bad_tally_take(&t, 0, -1, k != 3, 0, 0, why, 256), 0);
  ck_assert_int_eq(bad_tally_take(&t, 1, -1, true, 0, 0, why, sizeof why), 0);
  bad_tally_free(&t);
}
END_TEST

START_TEST(resumed_part_epoch_not_judged) {
  bad_tally t;
  ck_assert_int_eq(bad_tally_init(&t, true, 0, 0, false), 0);
  bad_tally_resumed(&t);
  char why[256];
  /* The resume starts late in epoch 3: its 2 bad examples are no whole epoch. */
  ck_assert_int_eq(bad_tally_take(&t, 3, -1, true, 0, 0, why, sizeof why), 0);
  ck_assert_int_eq(bad_tally_take(&t, 3, -1, true, 0, 0, why, sizeof why), 0);
  for (int k = 0; k < 4; k++) ck_assert_int_eq(bad_tally_take(&t, 4, -1, true, 0, 0, why, 256), 0);
  ck_assert_int_eq(bad_tally_take(&t, 5, -1, true, 0, 0, why, sizeof why), 1);
  ck_assert_msg(strstr(why, "4 examples of epoch 4"), "%s", why);
  bad_tally_free(&t);
}
END_TEST

START_TEST(shuffled_shares_stop_when_all_found) {
  /* Shares change each epoch (not the same share): a wholly bad epoch alone is no
   * proof; every one of the 6 units found unreadable is, each counted once. */
  /* A counted split of 5 records in 3 files, the second file's framing lost: slots 0-4
   * are the records, 5-7 the files' tails, of which only 6 exists. */
  bad_tally t;
  ck_assert_int_eq(bad_tally_init(&t, false, 8, 6, false), 0);
  char why[256];
  int64_t epochs[][3] = {{0, 1, 6}, {0, 1, 6}, {6, 3, 1}, {4, 0, 3}};
  for (int e = 0; e < 4; e++)
    for (int k = 0; k < 3; k++)
      ck_assert_int_eq(bad_tally_take(&t, e, epochs[e][k], true, 0, 0, why, sizeof why), 0);
  ck_assert_int_eq(t.found_count, 5);
  ck_assert_int_eq(bad_tally_take(&t, 4, 4, true, 0, 0, why, sizeof why), 0); /* again: once */
  ck_assert_int_eq(bad_tally_take(&t, 4, 2, true, 0, 0, why, sizeof why), 1);
  ck_assert_msg(strstr(why, "every one of the 6 examples of the split"), "%s", why);
  bad_tally_free(&t);
}
END_TEST

START_TEST(file_units_found_through_whole_epochs) {
  /* Shards of a known size read by file, 3 files: a file counts as unreadable only once a
   * whole epoch that read it was; a good example anywhere in the epoch clears nothing
   * but marks none of its files. */
  bad_tally t;
  ck_assert_int_eq(bad_tally_init(&t, false, 3, 3, true), 0);
  char why[256];
  /* Epoch 0 reads files 0 and 1, one good example: no file found. */
  int64_t e0[][2] = {{0, 1}, {0, 1}, {1, 0}};
  for (int k = 0; k < 3; k++)
    ck_assert_int_eq(bad_tally_take(&t, 0, e0[k][0], e0[k][1], 0, 0, why, sizeof why), 0);
  /* Epoch 1: files 0 and 1, all bad. Epoch 2: file 2, all bad. Judged at epoch 3's start. */
  ck_assert_int_eq(bad_tally_take(&t, 1, 0, true, 0, 0, why, sizeof why), 0);
  ck_assert_int_eq(bad_tally_take(&t, 1, 1, true, 0, 0, why, sizeof why), 0);
  ck_assert_int_eq(bad_tally_take(&t, 2, 2, true, 0, 0, why, sizeof why), 0);
  ck_assert_int_eq(t.found_count, 2);
  ck_assert_int_eq(bad_tally_take(&t, 3, 0, true, 0, 0, why, sizeof why), 1);
  ck_assert_msg(strstr(why, "every one of the 3 files of the split"), "%s", why);
  bad_tally_free(&t);
}
END_TEST

START_TEST(framing_losses_summed) {
  bad_tally t;
  ck_assert_int_eq(bad_tally_init(&t, false, 0, 0, false), 0);
  char why[256];
  ck_assert_int_eq(bad_tally_take(&t, 0, -1, true, 1000, 9, why, sizeof why), 0);
  ck_assert_int_eq(bad_tally_take(&t, 0, -1, true, 500, -1, why, sizeof why), 0);
  ck_assert_int_eq(bad_tally_take(&t, 0, -1, true, 0, 0, why, sizeof why), 0);
  ck_assert_int_eq(t.framing_losses, 2);
  ck_assert_uint_eq(t.lost_bytes, 1500);
  ck_assert_int_eq(t.lost_records, 9);
  ck_assert_int_eq(t.unknown_records, 1);
  bad_tally_free(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bad_tally");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, two_good_of_42_never_stop);
  tcase_add_test(tc, same_share_stops_after_one_whole_epoch);
  tcase_add_test(tc, resumed_part_epoch_not_judged);
  tcase_add_test(tc, shuffled_shares_stop_when_all_found);
  tcase_add_test(tc, file_units_found_through_whole_epochs);
  tcase_add_test(tc, framing_losses_summed);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
