/* test_evaluation.c — the host's evaluation arithmetic, without a model: when an
 * evaluation during training is due (tf_cnn_benchmarks' steps for --eval_during_training_
 * every_n_steps / _every_n_epochs, worked out by hand), and the exact sum of counters
 * (hits, examples, skipped examples) over ranks through a strategy's allgather, faked
 * here as three ranks. The CLI side is tests/cli/eval.sh and eval_during_training.sh. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "run/evaluation.h"
#include "run/world.h"

/* ---- the schedule --------------------------------------------------------------------- */

static int64_t due_steps(const cnnb_eval_schedule *s, int64_t *steps, int64_t max) {
  int64_t n = 0;
  for (int64_t step = -1; step <= s->num_batches + 2; step++)
    if (cnnb_eval_schedule_due(s, step) && n < max) steps[n++] = step;
  return n;
}

START_TEST(every_n_steps_skips_the_last) {
  /* tf_cnn_benchmarks: local_step % n == 0 while not done; the last step is the final
   * evaluation's, which the run makes after its total. */
  cnnb_eval_schedule s = {.every_n_steps = 5, .num_batches = 12, .global_batch = 16};
  int64_t steps[16];
  ck_assert_int_eq(due_steps(&s, steps, 16), 2);
  ck_assert_int_eq(steps[0], 5);
  ck_assert_int_eq(steps[1], 10);
  s.num_batches = 10; /* 10 is the last step now */
  ck_assert_int_eq(due_steps(&s, steps, 16), 1);
  ck_assert_int_eq(steps[0], 5);
}
END_TEST

START_TEST(at_specified_steps_and_epochs_as_tf_cnn_benchmarks) {
  /* tf: the steps as given (a set: order and repeats do not matter), never the last;
   * epochs at int(e * examples + batch - 1) // batch: 0.001 and 0.003 of 50000 in steps
   * of 16 are 65 // 16 = 4 and 165 // 16 = 10. */
  static const int64_t at[] = {7, 3, 7, 12, 40};
  cnnb_eval_schedule s = {
      .num_batches = 12, .global_batch = 16, .at_steps = at, .at_steps_count = 5};
  int64_t steps[16];
  ck_assert_int_eq(due_steps(&s, steps, 16), 2);
  ck_assert_int_eq(steps[0], 3);
  ck_assert_int_eq(steps[1], 7);
  static const double epochs[] = {0.003, 0.001};
  cnnb_eval_schedule e = {.num_batches = 12,
                          .global_batch = 16,
                          .examples_per_epoch = 50000,
                          .at_epochs = epochs,
                          .at_epochs_count = 2};
  ck_assert_int_eq(due_steps(&e, steps, 16), 2);
  ck_assert_int_eq(steps[0], 4);
  ck_assert_int_eq(steps[1], 10);
  e.examples_per_epoch = 0; /* unknown: nothing is due */
  ck_assert_int_eq(due_steps(&e, steps, 16), 0);
}
END_TEST

START_TEST(every_n_epochs_as_tf_cnn_benchmarks) {
  /* 50000 examples an epoch, 16 a step, 12 steps = 0.00384 epochs; n = 0.001:
   * arange(0.001, 0.00384, 0.001) = 0.001, 0.002, 0.003, each at
   * int(e * 50000 + 15) // 16 = 65 // 16, 115 // 16, 165 // 16 = 4, 7, 10. */
  cnnb_eval_schedule s = {
      .every_n_epochs = 0.001, .examples_per_epoch = 50000, .global_batch = 16, .num_batches = 12};
  int64_t steps[16];
  ck_assert_int_eq(due_steps(&s, steps, 16), 3);
  ck_assert_int_eq(steps[0], 4);
  ck_assert_int_eq(steps[1], 7);
  ck_assert_int_eq(steps[2], 10);
  /* 10 steps = 0.0032 epochs: 0.003 is still below it, so step 10 would be due, but it
   * is the last step. */
  s.num_batches = 10;
  ck_assert_int_eq(due_steps(&s, steps, 16), 2);
  /* Every 1e-4 epochs is 5 examples: several multiples land in each step, which is due
   * once; steps 1..11 are all due (int(5k + 15) // 16 reaches every step). */
  s.every_n_epochs = 1e-4;
  s.num_batches = 12;
  ck_assert_int_eq(due_steps(&s, steps, 16), 11);
  for (int64_t i = 0; i < 11; i++) ck_assert_int_eq(steps[i], i + 1);
  /* An epoch longer than the run: never due before the final evaluation. */
  s.every_n_epochs = 1.0;
  ck_assert_int_eq(due_steps(&s, steps, 16), 0);
  /* Without the epoch's size there is nothing to count (setup refuses the flag). */
  s.every_n_epochs = 0.001;
  s.examples_per_epoch = 0;
  ck_assert_int_eq(due_steps(&s, steps, 16), 0);
}
END_TEST

START_TEST(every_n_epochs_far_into_a_run) {
  /* ImageNet, 256 a step, every 4 epochs over 90: 1281167 * 4 = 5124668 examples,
   * (5124668 + 255) // 256 = 20019 (20018.9...): due at 20019, not 20018 or 20020. */
  cnnb_eval_schedule s = {.every_n_epochs = 4,
                          .examples_per_epoch = 1281167,
                          .global_batch = 256,
                          .num_batches = 450410};
  ck_assert(cnnb_eval_schedule_due(&s, 20019));
  ck_assert(!cnnb_eval_schedule_due(&s, 20018));
  ck_assert(!cnnb_eval_schedule_due(&s, 20020));
  /* 88 epochs: (112742696 + 255) // 256 = 440402 (440401.15... rounded up); numpy's
   * arange and this agree on the whole set (checked once against tf_cnn_benchmarks'
   * expression in Python). */
  ck_assert(cnnb_eval_schedule_due(&s, 440402));
  ck_assert(!cnnb_eval_schedule_due(&s, 440401));
  ck_assert(!cnnb_eval_schedule_due(&s, 440403));
}
END_TEST

/* ---- the sum over ranks ------------------------------------------------------------------ */

/* Three ranks; this process is `rank`, the others hold rank * 100 + k in counter k. */
typedef struct fake_world {
  int32_t rank, world;
  int calls;
  bool fail;
} fake_world;

static cnnb_status fake_allgather(void *strategy, const void *send, void *recv, int64_t bytes) {
  fake_world *w = strategy;
  w->calls++;
  if (w->fail) return CNNB_ECOMM;
  int64_t count = bytes / (int64_t)sizeof(int64_t);
  for (int32_t r = 0; r < w->world; r++) {
    int64_t *slot = (int64_t *)recv + (int64_t)r * count;
    if (r == w->rank) {
      memcpy(slot, send, (size_t)bytes);
    } else {
      for (int64_t k = 0; k < count; k++) slot[k] = r * 100 + k;
    }
  }
  return CNNB_OK;
}

static fake_world world;
static cnnb_strategy_vtable strategy_vt;
static cnnb_bound_plugin strategy;
static cnnb_world run_world;

static void setup_world(void) {
  world = (fake_world){.rank = 1, .world = 3};
  strategy_vt = (cnnb_strategy_vtable){.struct_size = sizeof strategy_vt,
                                       .allgather = fake_allgather};
  cnnb_ctx *ctx = cnnb_ctx_create("cnnbench", NULL);
  strategy = (cnnb_bound_plugin){.kind = CNNB_KIND_STRATEGY,
                                 .name = "fake",
                                 .label = "strategy plugin 'fake' (test)",
                                 .vt.strategy = &strategy_vt,
                                 .ctx = cnnb_ctx_create_child(ctx, "fake"),
                                 .state = &world};
  run_world = (cnnb_world){
      .rank = world.rank, .size = world.world, .strategy = &strategy, .ctx = ctx};
}

static void teardown_world(void) {
  cnnb_ctx_destroy(strategy.ctx);
  cnnb_ctx_destroy(run_world.ctx);
}

START_TEST(sum_over_ranks_is_exact) {
  /* Rank 1 holds 7 hits at 1, 9 at 5, 16 examples; ranks 0 and 2 hold (0, 1, 2) and
   * (200, 201, 202). Counters this large stay exact (no float on the way). */
  int64_t tally[3] = {7, 9, 16};
  ck_assert_int_eq(cnnb_world_sum(&run_world, tally, 3, "summing the accuracy"), CNNB_OK);
  ck_assert_int_eq(world.calls, 1);
  ck_assert_int_eq(tally[0], 0 + 7 + 200);
  ck_assert_int_eq(tally[1], 1 + 9 + 201);
  ck_assert_int_eq(tally[2], 2 + 16 + 202);
  int64_t big[1] = {(int64_t)1 << 53};
  ck_assert_int_eq(cnnb_world_sum(&run_world, big, 1, "summing"), CNNB_OK);
  ck_assert_int_eq(big[0], ((int64_t)1 << 53) + 0 + 200);
}
END_TEST

START_TEST(sum_in_a_world_of_one_is_local) {
  run_world.size = 1;
  run_world.rank = 0;
  int64_t tally[3] = {7, 9, 16};
  ck_assert_int_eq(cnnb_world_sum(&run_world, tally, 3, "summing the accuracy"), CNNB_OK);
  ck_assert_int_eq(world.calls, 0); /* no exchange at all */
  ck_assert_int_eq(tally[0], 7);
  ck_assert_int_eq(tally[2], 16);
}
END_TEST

START_TEST(sum_failure_names_the_exchange) {
  world.fail = true;
  int64_t tally[3] = {7, 9, 16};
  ck_assert_int_eq(cnnb_world_sum(&run_world, tally, 3, "summing the accuracy"), CNNB_ECOMM);
  const char *msg = cnnb_error_message(run_world.ctx);
  ck_assert_msg(strstr(msg, "summing the accuracy") != NULL, "%s", msg);
  strategy_vt.allgather = NULL; /* a 1.3 strategy reporting several ranks */
  ck_assert_int_eq(cnnb_world_sum(&run_world, tally, 3, "summing the accuracy"), CNNB_EUNSUPPORTED);
  msg = cnnb_error_message(run_world.ctx);
  ck_assert_msg(strstr(msg, "has no allgather") != NULL, "%s", msg);
}
END_TEST

int main(void) {
  Suite *s = suite_create("evaluation");
  TCase *tc = tcase_create("schedule");
  tcase_add_test(tc, every_n_steps_skips_the_last);
  tcase_add_test(tc, every_n_epochs_as_tf_cnn_benchmarks);
  tcase_add_test(tc, at_specified_steps_and_epochs_as_tf_cnn_benchmarks);
  tcase_add_test(tc, every_n_epochs_far_into_a_run);
  suite_add_tcase(s, tc);
  tc = tcase_create("world");
  tcase_add_checked_fixture(tc, setup_world, teardown_world);
  tcase_add_test(tc, sum_over_ranks_is_exact);
  tcase_add_test(tc, sum_in_a_world_of_one_is_local);
  tcase_add_test(tc, sum_failure_names_the_exchange);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
