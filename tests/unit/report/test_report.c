/* test_report.c — the console report: statistics (harmonic mean, np.std-based uncertainty,
 * 1.4826 * MAD jitter) on inputs worked out by hand, and every printed line byte for byte
 * against tf_cnn_benchmarks' format. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

/* Runs `print` into a memory stream and returns what it wrote (caller frees). */
#define CAPTURE(text, stmt)                      \
  do {                                           \
    size_t size_ = 0;                            \
    FILE *out = open_memstream(&(text), &size_); \
    ck_assert_ptr_nonnull(out);                  \
    stmt;                                        \
    fclose(out);                                 \
  } while (0)

static void fill(cnnb_step_stats *s, const double *v, size_t n) {
  cnnb_step_stats_init(s);
  for (size_t i = 0; i < n; i++) ck_assert_int_eq(cnnb_step_stats_add(s, v[i]), CNNB_OK);
}

START_TEST(stats_odd_count) {
  /* speeds 100, 200, 400:
   *  mean   = 3 / (1/100 + 1/200 + 1/400) = 3 / 0.0175 = 171.428571...
   *  stderr = sqrt(((-133.3)^2 + (-33.3)^2 + 166.7^2) / 3) / sqrt(3)
   *         = sqrt(15555.56) / 1.73205 = 124.7219 / 1.73205 = 72.0082
   *  jitter = 1.4826 * median(|x - 200|) = 1.4826 * median(100, 0, 200) = 148.26 */
  static const double v[] = {100, 400, 200};
  cnnb_step_stats s;
  fill(&s, v, 3);
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 3.0 / 0.0175, 1e-9);
  ck_assert_double_eq_tol(cnnb_step_stats_stderr(&s), sqrt(140000.0 / 9) / sqrt(3.0), 1e-9);
  ck_assert_double_eq_tol(cnnb_step_stats_stderr(&s), 72.0082, 1e-4);
  ck_assert_double_eq_tol(cnnb_step_stats_jitter(&s), 148.26, 1e-9);
  /* The order they came in is kept (jitter sorts a copy). */
  ck_assert_double_eq(s.speeds[1], 400);
  cnnb_step_stats_free(&s);
  ck_assert_ptr_null(s.speeds);
  ck_assert_uint_eq(s.count, 0);
}
END_TEST

START_TEST(stats_even_count) {
  /* speeds 10, 20, 30, 100:
   *  mean   = 4 / (0.1 + 0.05 + 0.0333.. + 0.01) = 4 / 0.19333.. = 20.689655...
   *  stderr = sqrt((900 + 400 + 100 + 3600) / 4) / 2 = sqrt(1250) / 2 = 17.67767
   *  jitter = 1.4826 * median(|x - 25|) = 1.4826 * median(15, 5, 5, 75) = 1.4826 * 10 */
  static const double v[] = {30, 10, 100, 20};
  cnnb_step_stats s;
  fill(&s, v, 4);
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 4.0 / (0.1 + 0.05 + 1.0 / 30 + 0.01), 1e-9);
  ck_assert_double_eq_tol(cnnb_step_stats_stderr(&s), sqrt(1250.0) / 2, 1e-9);
  ck_assert_double_eq_tol(cnnb_step_stats_jitter(&s), 14.826, 1e-9);
  cnnb_step_stats_free(&s);
}
END_TEST

START_TEST(stats_edge_cases) {
  cnnb_step_stats s;
  cnnb_step_stats_init(&s);
  ck_assert_double_eq(cnnb_step_stats_mean(&s), 0.0);
  ck_assert_double_eq(cnnb_step_stats_stderr(&s), 0.0);
  ck_assert_double_eq(cnnb_step_stats_jitter(&s), 0.0);
  ck_assert_int_eq(cnnb_step_stats_add(&s, 0.0), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_step_stats_add(&s, -3.0), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_step_stats_add(&s, NAN), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_step_stats_add(&s, INFINITY), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_step_stats_add_step(&s, 32, 0.0), CNNB_EINVAL);
  ck_assert_uint_eq(s.count, 0);
  ck_assert_int_eq(cnnb_step_stats_add_step(&s, 32, 0.5), CNNB_OK);
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 64.0, 1e-12);
  ck_assert_double_eq(cnnb_step_stats_stderr(&s), 0.0);
  ck_assert_double_eq(cnnb_step_stats_jitter(&s), 0.0);
  /* Growing past the first allocation keeps every value. */
  for (int i = 0; i < 999; i++) ck_assert_int_eq(cnnb_step_stats_add(&s, 64.0), CNNB_OK);
  ck_assert_uint_eq(s.count, 1000);
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 64.0, 1e-9);
  ck_assert_double_eq_tol(cnnb_step_stats_stderr(&s), 0.0, 1e-9);
  cnnb_step_stats_free(&s);
}
END_TEST

/* --display_perf_ewma: tf's get_perf_timing(ewma_alpha) gives 1 / the weighted mean of
 * the step times, weights np.logspace(n - 1, 0, n, base=1 - alpha), newest last. For
 * speeds 100, 200, 400 and alpha 0.5: times .01, .005, .0025, weights .25, .5, 1:
 * 1.75 / .0075 = 233.33 (unweighted: 171.43). alpha 1 is the newest step alone. */
START_TEST(stats_ewma_as_tf) {
  static const double v[] = {100, 200, 400};
  cnnb_step_stats s;
  fill(&s, v, 3);
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 3.0 / (0.01 + 0.005 + 0.0025), 1e-9);
  s.ewma = 0.5;
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 1.75 / 0.0075, 1e-9);
  s.ewma = 1.0;
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 400.0, 1e-9);
  s.ewma = 0.1; /* weights .81, .9, 1 */
  ck_assert_double_eq_tol(cnnb_step_stats_mean(&s), 2.71 / (0.0081 + 0.0045 + 0.0025), 1e-9);
  /* The spread columns stay every step's, as tf's. */
  ck_assert_double_eq_tol(cnnb_step_stats_jitter(&s), 148.26, 1e-9);
  char *text = NULL;
  s.ewma = 0.5;
  CAPTURE(text, cnnb_report_print_step(out, 3, &s, 1.0, NAN, NAN));
  ck_assert_str_eq(text, "3\timages/sec: 233.3 +/- 72.0 (jitter = 148.3)\t1.000\n");
  free(text);
  cnnb_step_stats_free(&s);
}
END_TEST

START_TEST(step_lines_exact) {
  static const double v[] = {100, 200, 400};
  cnnb_step_stats s;
  fill(&s, v, 3);
  char *text = NULL;
  CAPTURE(text, cnnb_report_print_step(out, 10, &s, 6.90123, NAN, NAN));
  ck_assert_str_eq(text, "10\timages/sec: 171.4 +/- 72.0 (jitter = 148.3)\t6.901\n");
  free(text);
  CAPTURE(text, cnnb_report_print_step(out, 20, &s, 0.5, 0.25, 0.75));
  ck_assert_str_eq(text, "20\timages/sec: 171.4 +/- 72.0 (jitter = 148.3)\t0.500\t0.250\t0.750\n");
  free(text);
  cnnb_step_stats_free(&s);

  cnnb_step_stats one;
  cnnb_step_stats_init(&one);
  ck_assert_int_eq(cnnb_step_stats_add(&one, 12.34), CNNB_OK);
  CAPTURE(text, cnnb_report_print_step(out, 1, &one, 7.0126, NAN, NAN));
  ck_assert_str_eq(text, "1\timages/sec: 12.3 +/- 0.0 (jitter = 0.0)\t7.013\n");
  free(text);
  cnnb_step_stats_free(&one);

  CAPTURE(text, cnnb_report_print_step_header(out, false));
  ck_assert_str_eq(text, "Step\tImg/sec\ttotal_loss\n");
  free(text);
  CAPTURE(text, cnnb_report_print_step_header(out, true));
  ck_assert_str_eq(text, "Step\tImg/sec\ttotal_loss\ttop_1_accuracy\ttop_5_accuracy\n");
  free(text);
}
END_TEST

START_TEST(total_exact) {
  char *text = NULL;
  CAPTURE(text, cnnb_report_print_total(out, 171.428571));
  ck_assert_str_eq(text, "----------------------------------------------------------------\n"
                         "total images/sec: 171.43\n"
                         "----------------------------------------------------------------\n");
  free(text);
}
END_TEST

START_TEST(display_schedule) {
  ck_assert(cnnb_report_should_display(1, 10));
  ck_assert(!cnnb_report_should_display(2, 10));
  ck_assert(!cnnb_report_should_display(9, 10));
  ck_assert(cnnb_report_should_display(10, 10));
  ck_assert(cnnb_report_should_display(20, 10));
  ck_assert(cnnb_report_should_display(3, 1));
  ck_assert(cnnb_report_should_display(1, 0));
  ck_assert(!cnnb_report_should_display(5, 0));
  ck_assert(!cnnb_report_should_display(0, 10));
}
END_TEST

START_TEST(header_exact) {
  static const char *const devs[] = {"/cpu:0"};
  cnnb_report_header h = {.version = "0.1.0",
                          .model = "trivial",
                          .dataset = "imagenet (synthetic)",
                          .mode = "training",
                          .global_batch = 32,
                          .per_device_batch = 32,
                          .num_batches = 100,
                          .num_epochs = 0.0025,
                          .devices = devs,
                          .num_devices = 1,
                          .data_format = "NCHW",
                          .optimizer = "sgd",
                          .variable_update = "independent",
                          .all_reduce = NULL};
  char *text = NULL;
  CAPTURE(text, cnnb_report_print_header(out, &h));
  ck_assert_str_eq(text, "cnnbench:    0.1.0\nModel:       trivial\n"
                         "Dataset:     imagenet (synthetic)\nMode:        training\n"
                         "Batch size:  32 global\n             32 per device\nNum batches: 100\n"
                         "Num epochs:  0.00\nDevices:     ['/cpu:0']\nData format: NCHW\n"
                         "Optimizer:   sgd\nVariables:   independent\n==========\n");
  free(text);

  static const char *const two[] = {"/cuda:0", "/cuda:1"};
  h.devices = two;
  h.num_devices = 2;
  h.global_batch = 128;
  h.per_device_batch = 64;
  h.num_epochs = 1.5;
  h.variable_update = "replicated";
  h.all_reduce = "";
  h.optimizer = NULL;
  CAPTURE(text, cnnb_report_print_header(out, &h));
  ck_assert_ptr_nonnull(strstr(text, "Batch size:  128 global\n             64 per device\n"));
  ck_assert_ptr_nonnull(strstr(text, "Num epochs:  1.50\n"));
  ck_assert_ptr_nonnull(strstr(text, "Devices:     ['/cuda:0', '/cuda:1']\n"));
  ck_assert_ptr_nonnull(strstr(text, "Optimizer:   None\n"));
  ck_assert_ptr_nonnull(strstr(text, "Variables:   replicated\nAllReduce:   None\n==========\n"));
  free(text);
  h.all_reduce = "nccl";
  CAPTURE(text, cnnb_report_print_header(out, &h));
  ck_assert_ptr_nonnull(strstr(text, "AllReduce:   nccl\n"));
  free(text);
}
END_TEST

START_TEST(accuracy_and_skipped_lines_exact) {
  char *text = NULL;
  /* tf_cnn_benchmarks: 'Accuracy @ 1 = %.4f Accuracy @ 5 = %.4f [%d examples]'. */
  CAPTURE(text, cnnb_report_print_accuracy(out, 6, 7, 8));
  ck_assert_str_eq(text, "Accuracy @ 1 = 0.7500 Accuracy @ 5 = 0.8750 [8 examples]\n");
  free(text);
  CAPTURE(text, cnnb_report_print_accuracy(out, 1, 2, 3));
  ck_assert_str_eq(text, "Accuracy @ 1 = 0.3333 Accuracy @ 5 = 0.6667 [3 examples]\n");
  free(text);
  /* tf's get_evaluation_outputs_from_logs splits this line into exactly 12 fields. */
  CAPTURE(text, cnnb_report_print_accuracy(out, 0, 0, 0));
  ck_assert_str_eq(text, "Accuracy @ 1 = 0.0000 Accuracy @ 5 = 0.0000 [0 examples]\n");
  free(text);
  CAPTURE(text, cnnb_report_print_accuracy(out, 50000, 50000, 50000));
  ck_assert_str_eq(text, "Accuracy @ 1 = 1.0000 Accuracy @ 5 = 1.0000 [50000 examples]\n");
  free(text);
  /* tf's _eval_once: '%i\t%.1f examples/sec'. */
  CAPTURE(text, cnnb_report_print_eval_step(out, 20, 1234.56));
  ck_assert_str_eq(text, "20\t1234.6 examples/sec\n");
  free(text);
  CAPTURE(text, cnnb_report_print_skipped(out, 0));
  ck_assert_str_eq(text, "");
  free(text);
  CAPTURE(text, cnnb_report_print_skipped(out, 12));
  ck_assert_str_eq(text, "skipped 12 unreadable examples\n");
  free(text);
}
END_TEST

START_TEST(input_only_lines_exact) {
  static const double v[] = {100, 400, 200};
  cnnb_step_stats s;
  fill(&s, v, 3);
  char *text = NULL;
  CAPTURE(text, cnnb_report_print_input_step_header(out));
  ck_assert_str_eq(text, "Step\tImg/sec\n");
  free(text);
  CAPTURE(text, cnnb_report_print_input_step(out, 10, &s));
  ck_assert_str_eq(text, "10\timages/sec: 171.4 +/- 72.0 (jitter = 148.3)\n");
  free(text);
  cnnb_step_stats_free(&s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_test(tc, stats_odd_count);
  tcase_add_test(tc, stats_even_count);
  tcase_add_test(tc, stats_edge_cases);
  tcase_add_test(tc, stats_ewma_as_tf);
  tcase_add_test(tc, step_lines_exact);
  tcase_add_test(tc, total_exact);
  tcase_add_test(tc, display_schedule);
  tcase_add_test(tc, accuracy_and_skipped_lines_exact);
  tcase_add_test(tc, input_only_lines_exact);
  tcase_add_test(tc, header_exact);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
