/* test_shard_set.c — whether a split's TFRecord files are a whole set
 * (plugins/datasources/imagenet/shard_set.c): a whole set passes in silence; a deleted
 * shard, shards renamed to claim more than there are and an index beyond the count are
 * refused naming the missing shards and the flag, or read with the same words as a
 * warning under it; names disagreeing on the count are several sets, refused naming each
 * count, with or without the flag; files that are no shard (a converter's ".tmp") are
 * dropped and named. No file is opened: the check reads names only. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard_set.h"

/* A list of "D/<name>" as layout.c makes it (sorted, owned). */
static char **make_list(const char *const *names, size_t n) {
  char **files = calloc(n ? n : 1, sizeof *files);
  for (size_t i = 0; i < n; i++) {
    files[i] = malloc(strlen(names[i]) + 3);
    sprintf(files[i], "D/%s", names[i]);
  }
  return files;
}
static void free_list(char **files, size_t n) {
  for (size_t i = 0; i < n; i++) free(files[i]);
  free(files);
}

/* Runs the check on names; returns its result with warning and err filled. */
static int check(const char *const *names, size_t n, int allow, size_t *kept, char *warning,
                 char *err) {
  char **files = make_list(names, n);
  *kept = n;
  err[0] = '\0';
  int rc = shard_set_check("D", "train", files, kept, allow, warning, 2048, err, 2048);
  free_list(files, *kept);
  return rc;
}

START_TEST(whole_set_passes) {
  const char *names[] = {"train-00000-of-00003", "train-00001-of-00003", "train-00002-of-00003"};
  size_t kept;
  char warning[2048], err[2048];
  ck_assert_int_eq(check(names, 3, 0, &kept, warning, err), 0);
  ck_assert_uint_eq(kept, 3);
  ck_assert_str_eq(warning, "");
}
END_TEST

START_TEST(deleted_shard_refused_or_warned) {
  const char *names[] = {"train-00000-of-00004", "train-00002-of-00004", "train-00003-of-00004"};
  size_t kept;
  char warning[2048], err[2048];
  ck_assert_int_eq(check(names, 3, 0, &kept, warning, err), -1);
  ck_assert_msg(strstr(err, "1 of the 4 shards train-*-of-00004 is missing: train-00001-of-00004"),
                "%s", err);
  ck_assert_msg(strstr(err, "--allow_missing_shards"), "%s", err);
  ck_assert_int_eq(check(names, 3, 1, &kept, warning, err), 0);
  ck_assert_uint_eq(kept, 3);
  ck_assert_msg(strstr(warning, "train-00001-of-00004; reading the 3 that are there"), "%s",
                warning);
}
END_TEST

START_TEST(renamed_to_claim_more) {
  /* Two shards renamed -of-00005: three are missing, the last of them named too. */
  const char *names[] = {"train-00000-of-00005", "train-00001-of-00005"};
  size_t kept;
  char warning[2048], err[2048];
  ck_assert_int_eq(check(names, 2, 0, &kept, warning, err), -1);
  ck_assert_msg(strstr(err, "3 of the 5 shards train-*-of-00005 are missing: train-00002-of-00005, "
                            "train-00003-of-00005, train-00004-of-00005 ("),
                "%s", err);
  /* Many missing: the first five named, the rest counted. */
  const char *one[] = {"train-00003-of-00100"};
  ck_assert_int_eq(check(one, 1, 0, &kept, warning, err), -1);
  ck_assert_msg(strstr(err, "99 of the 100 shards"), "%s", err);
  ck_assert_msg(strstr(err, "train-00000-of-00100, train-00001-of-00100, train-00002-of-00100, "
                            "train-00004-of-00100, train-00005-of-00100 and 94 more"),
                "%s", err);
}
END_TEST

START_TEST(counts_disagree_or_index_beyond) {
  /* Three runs of a converter into one directory: 2, 3 and 4 shards, sorted by name. */
  const char *mixed[] = {"train-00000-of-00002", "train-00000-of-00003", "train-00000-of-00004",
                         "train-00001-of-00002", "train-00001-of-00003", "train-00001-of-00004",
                         "train-00002-of-00003", "train-00002-of-00004", "train-00003-of-00004"};
  size_t kept;
  char warning[2048], err[2048];
  ck_assert_int_eq(check(mixed, 9, 0, &kept, warning, err), -1);
  ck_assert_msg(strstr(err, "D holds 3 sets of train shards that differ in their count: "
                            "2 of train-*-of-00002, 3 of train-*-of-00003, 4 of train-*-of-00004; "
                            "read together they would count the same examples once per set"),
                "%s", err);
  /* No flag reads a mix: --allow_missing_shards would read every set, each example
   * once per set, so it is neither suggested nor obeyed. */
  ck_assert_msg(!strstr(err, "allow_missing_shards"), "%s", err);
  ck_assert_int_eq(check(mixed, 9, 1, &kept, warning, err), -1);
  ck_assert_msg(strstr(err, "holds 3 sets"), "%s", err);
  const char *beyond[] = {"train-00000-of-00001", "train-00001-of-00001"};
  ck_assert_int_eq(check(beyond, 2, 0, &kept, warning, err), -1);
  ck_assert_msg(strstr(err, "train-00001-of-00001 is numbered beyond its own count"), "%s", err);
  ck_assert_int_eq(check(beyond, 2, 1, &kept, warning, err), 0);
  ck_assert_msg(strstr(warning, "numbered beyond"), "%s", warning);
}
END_TEST

START_TEST(no_shard_names_dropped) {
  const char *names[] = {"train-00000-of-00001", "train-00000-of-00001.tmp", "train-x-of-y"};
  size_t kept;
  char warning[2048], err[2048];
  ck_assert_int_eq(check(names, 3, 0, &kept, warning, err), 0);
  ck_assert_uint_eq(kept, 1);
  ck_assert_msg(strstr(warning, "ignored as no shard (not named train-NNNNN-of-NNNNN): "
                                "train-00000-of-00001.tmp, train-x-of-y"),
                "%s", warning);
  /* Nothing left: no set, nothing to refuse (the layout then looks for folders). */
  ck_assert_int_eq(check(names + 1, 2, 0, &kept, warning, err), 0);
  ck_assert_uint_eq(kept, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("shard_set");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, whole_set_passes);
  tcase_add_test(tc, deleted_shard_refused_or_warned);
  tcase_add_test(tc, renamed_to_claim_more);
  tcase_add_test(tc, counts_disagree_or_index_beyond);
  tcase_add_test(tc, no_shard_names_dropped);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
