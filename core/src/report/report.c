/* report.c — prints the console report of report.h in tf_cnn_benchmarks' exact layout
 * and computes its per-step statistics the way get_perf_timing() does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static const char *str_or_none(const char *s) { return s ? s : "None"; }

void cnnb_report_print_header(FILE *out, const cnnb_report_header *h) {
  if (!out || !h) return;
  /* Labels are padded to 13 columns, as "TensorFlow:  1.15" and print_info() are. */
  fprintf(out, "%-13s%s\n", "cnnbench:", str_or_none(h->version));
  fprintf(out, "Model:       %s\n", str_or_none(h->model));
  fprintf(out, "Dataset:     %s\n", str_or_none(h->dataset));
  fprintf(out, "Mode:        %s\n", str_or_none(h->mode));
  fprintf(out, "Batch size:  %lld global\n", (long long)h->global_batch);
  fprintf(out, "             %lld per device\n", (long long)h->per_device_batch);
  fprintf(out, "Num batches: %lld\n", (long long)h->num_batches);
  if (isfinite(h->num_epochs)) fprintf(out, "Num epochs:  %.2f\n", h->num_epochs);
  else fputs("Num epochs:  None\n", out); /* the datasource does not know its epoch */
  /* A Python list's repr, as tf_cnn_benchmarks prints its device list. */
  fputs("Devices:     [", out);
  for (size_t i = 0; i < h->num_devices; i++)
    fprintf(out, "%s'%s'", i ? ", " : "", h->devices ? str_or_none(h->devices[i]) : "None");
  fputs("]\n", out);
  if (h->device_description) fprintf(out, "             %s\n", h->device_description);
  fprintf(out, "Data format: %s\n", str_or_none(h->data_format));
  fprintf(out, "Optimizer:   %s\n", str_or_none(h->optimizer));
  fprintf(out, "Variables:   %s\n", str_or_none(h->variable_update));
  if (h->all_reduce) fprintf(out, "AllReduce:   %s\n", h->all_reduce[0] ? h->all_reduce : "None");
  fputs("==========\n", out);
}

/* ---- statistics ---------------------------------------------------------------- */

void cnnb_step_stats_init(cnnb_step_stats *s) {
  if (s) *s = (cnnb_step_stats){0};
}

void cnnb_step_stats_free(cnnb_step_stats *s) {
  if (!s) return;
  free(s->speeds);
  *s = (cnnb_step_stats){0};
}

cnnb_status cnnb_step_stats_add(cnnb_step_stats *s, double images_per_sec) {
  if (!s || !isfinite(images_per_sec) || images_per_sec <= 0) return CNNB_EINVAL;
  if (s->count == s->capacity) {
    size_t cap = s->capacity ? 2 * s->capacity : 128;
    double *v = realloc(s->speeds, cap * sizeof *v);
    if (!v) return CNNB_ENOMEM;
    s->speeds = v;
    s->capacity = cap;
  }
  s->speeds[s->count++] = images_per_sec;
  return CNNB_OK;
}

cnnb_status cnnb_step_stats_add_step(cnnb_step_stats *s, double images, double seconds) {
  if (!(seconds > 0)) return CNNB_EINVAL;
  return cnnb_step_stats_add(s, images / seconds);
}

double cnnb_step_stats_mean(const cnnb_step_stats *s) {
  if (!s || s->count == 0) return 0.0;
  /* batch / mean(time) with a fixed batch is n / sum(1 / speed): the harmonic mean. It
   * weighs slow steps by the time they really took, as the wall clock does. */
  double inv = 0.0, weights = 0.0;
  if (s->ewma > 0) {
    /* tf's weights np.logspace(n - 1, 0, n, base=1 - ewma): the newest step 1, each older
     * one (1 - ewma) times the next; the oldest underflow to 0, harmlessly. */
    double w = 1.0;
    for (size_t i = s->count; i-- > 0 && w > 0; w *= 1.0 - s->ewma) {
      inv += w / s->speeds[i];
      weights += w;
    }
    return inv > 0 ? weights / inv : 0.0;
  }
  for (size_t i = 0; i < s->count; i++) inv += 1.0 / s->speeds[i];
  return inv > 0 ? (double)s->count / inv : 0.0;
}

double cnnb_step_stats_stderr(const cnnb_step_stats *s) {
  if (!s || s->count == 0) return 0.0;
  double n = (double)s->count, mean = 0.0, ss = 0.0;
  for (size_t i = 0; i < s->count; i++) mean += s->speeds[i];
  mean /= n;
  for (size_t i = 0; i < s->count; i++) ss += (s->speeds[i] - mean) * (s->speeds[i] - mean);
  /* np.std divides by n (not n - 1); tf_cnn_benchmarks' "+/-" is that over sqrt(n). */
  return sqrt(ss / n) / sqrt(n);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n), sorting v in place; the mean of the middle two when n is even. */
static double median_sorting(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double cnnb_step_stats_jitter(const cnnb_step_stats *s) {
  if (!s || s->count == 0) return 0.0;
  double *v = malloc(s->count * sizeof *v);
  if (!v) return NAN; /* printed as "nan": visibly unknown rather than a wrong zero */
  memcpy(v, s->speeds, s->count * sizeof *v);
  double med = median_sorting(v, s->count);
  for (size_t i = 0; i < s->count; i++) v[i] = fabs(v[i] - med);
  /* 1.4826 * MAD estimates the standard deviation of normal data, robust to outliers. */
  double mad = median_sorting(v, s->count);
  free(v);
  return 1.4826 * mad;
}

/* ---- lines ------------------------------------------------------------------------ */

void cnnb_report_print_step_header(FILE *out, bool with_accuracy) {
  if (!out) return;
  fputs(with_accuracy ? "Step\tImg/sec\ttotal_loss\ttop_1_accuracy\ttop_5_accuracy\n"
                      : "Step\tImg/sec\ttotal_loss\n",
        out);
}

void cnnb_report_print_step(FILE *out, int64_t step, const cnnb_step_stats *stats, double loss,
                            double top1, double top5) {
  if (!out) return;
  fprintf(out, "%lld\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f", (long long)step,
          cnnb_step_stats_mean(stats), cnnb_step_stats_stderr(stats), cnnb_step_stats_jitter(stats),
          loss);
  if (!isnan(top1) && !isnan(top5)) fprintf(out, "\t%.3f\t%.3f", top1, top5);
  fputc('\n', out);
}

void cnnb_report_print_input_step_header(FILE *out) {
  if (out) fputs("Step\tImg/sec\n", out);
}

void cnnb_report_print_input_step(FILE *out, int64_t step, const cnnb_step_stats *stats) {
  if (!out) return;
  fprintf(out, "%lld\timages/sec: %.1f +/- %.1f (jitter = %.1f)\n", (long long)step,
          cnnb_step_stats_mean(stats), cnnb_step_stats_stderr(stats),
          cnnb_step_stats_jitter(stats));
}

void cnnb_report_print_accuracy(FILE *out, int64_t top1_hits, int64_t top5_hits, int64_t examples) {
  if (!out) return;
  /* tf_cnn_benchmarks averages per-batch fractions over equal batches: the same as the
   * hits over the examples, which is exact here. */
  double n = examples > 0 ? (double)examples : 1.0;
  fprintf(out, "Accuracy @ 1 = %.4f Accuracy @ 5 = %.4f [%lld examples]\n", (double)top1_hits / n,
          (double)top5_hits / n, (long long)examples);
}

void cnnb_report_print_eval_step(FILE *out, int64_t step, double examples_per_sec) {
  if (out) fprintf(out, "%lld\t%.1f examples/sec\n", (long long)step, examples_per_sec);
}

void cnnb_report_print_progress(FILE *out, const cnnb_ctx *log_ctx, const char *line) {
  if (out) {
    fprintf(out, "%s\n", line);
    fflush(out);
  } else if (log_ctx) {
    cnnb_log(log_ctx, CNNB_LOG_INFO, "%s", line);
  }
}

void cnnb_report_print_skipped(FILE *out, int64_t skipped) {
  if (out && skipped > 0) fprintf(out, "skipped %lld unreadable examples\n", (long long)skipped);
}

bool cnnb_report_should_display(int64_t step, int64_t display_every) {
  if (step == 1) return true;
  return display_every > 0 && step > 0 && step % display_every == 0;
}

void cnnb_report_print_total(FILE *out, double images_per_sec) {
  cnnb_report_print_total_note(out, images_per_sec, NULL);
}

void cnnb_report_print_total_note(FILE *out, double images_per_sec, const char *note) {
  if (!out) return;
  static const char dashes[] = "----------------------------------------------------------------";
  _Static_assert(sizeof dashes - 1 == 64, "tf_cnn_benchmarks frames the total with 64 dashes");
  fprintf(out, "%s\ntotal images/sec: %.2f%s%s%s\n%s\n", dashes, images_per_sec, note ? " (" : "",
          note ? note : "", note ? ")" : "", dashes);
}
