/* test_loss_scale.c — fp16 loss scaling as tf_cnn_benchmarks does it: dynamic scaling
 * skips exactly the steps whose gradients hold inf/NaN, halves the scale on each of
 * them, and doubles it on the clean step after inc_every_n clean steps in a row; a
 * static scale never changes and never skips. */
#include <check.h>
#include <float.h>

#include "exec/loss_scale.h"

START_TEST(defaults) {
  cnnb_loss_scale ls;
  cnnb_loss_scale_init(&ls, 0.0f, true, 0);
  ck_assert_float_eq(ls.scale, 128.0f);
  ck_assert_int_eq(ls.inc_every_n, 1000);
  ck_assert(cnnb_loss_scale_needs_check(&ls));
  cnnb_loss_scale_init(&ls, 8.0f, false, 5);
  ck_assert_float_eq(ls.scale, 8.0f);
  ck_assert(!cnnb_loss_scale_needs_check(&ls));
}
END_TEST

START_TEST(static_never_skips) {
  cnnb_loss_scale ls;
  cnnb_loss_scale_init(&ls, 256.0f, false, 2);
  for (int i = 0; i < 10; ++i) {
    ck_assert(!cnnb_loss_scale_after_step(&ls, i % 3 != 0));
    ck_assert_float_eq(ls.scale, 256.0f);
  }
}
END_TEST

START_TEST(dynamic_sequence) {
  /* N = 3. Per step: gradients finite?, expected skip, scale after the step. */
  static const struct {
    bool finite, skip;
    float scale;
  } seq[] = {
      {true, false, 128}, /* clean 1 */
      {false, true, 64},  /* inf: skip, halve, reset */
      {true, false, 64},  /* clean 1 */
      {true, false, 64},  /* clean 2 */
      {true, false, 64},  /* clean 3 (counter reaches N) */
      {true, false, 128}, /* the next clean step doubles */
      {false, true, 64},  /* NaN */
      {false, true, 32},  /* again: halves again */
      {true, false, 32},  /* 1 */
      {true, false, 32},  /* 2 */
      {false, true, 16},  /* a bad step resets the count */
      {true, false, 16},  /* 1 */
      {true, false, 16},  /* 2 */
      {true, false, 16},  /* 3 */
      {true, false, 32},  /* doubles */
      {true, false, 32},  /* 1 again */
  };
  cnnb_loss_scale ls;
  cnnb_loss_scale_init(&ls, 128.0f, true, 3);
  int skipped = 0;
  for (size_t i = 0; i < sizeof seq / sizeof seq[0]; ++i) {
    bool skip = cnnb_loss_scale_after_step(&ls, seq[i].finite);
    ck_assert_msg(skip == seq[i].skip, "step %zu: skip %d, want %d", i, skip, seq[i].skip);
    ck_assert_msg(ls.scale == seq[i].scale, "step %zu: scale %g, want %g", i, ls.scale,
                  seq[i].scale);
    skipped += skip;
  }
  ck_assert_int_eq(skipped, 4);
}
END_TEST

START_TEST(doubling_never_overflows) {
  cnnb_loss_scale ls;
  cnnb_loss_scale_init(&ls, FLT_MAX / 1.5f, true, 1);
  ck_assert(!cnnb_loss_scale_after_step(&ls, true));
  ck_assert(!cnnb_loss_scale_after_step(&ls, true)); /* would double to inf */
  ck_assert_float_eq(ls.scale, FLT_MAX / 1.5f);
  ck_assert_int_eq(ls.normal_steps, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loss_scale");
  TCase *tc = tcase_create("loss_scale");
  tcase_add_test(tc, defaults);
  tcase_add_test(tc, static_never_skips);
  tcase_add_test(tc, dynamic_sequence);
  tcase_add_test(tc, doubling_never_overflows);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
