/* flags_agreement.c — the text the ranks of one job compare their flags by
 * (cnnb_flags_agreement_text, flags.h). Each value is written in one spelling, so
 * "--init_learning_rate=0.10" on one rank and "--init_learning_rate 0.1" on another agree,
 * while 0.1 and 0.1000001 do not. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "flags/flags_internal.h"

/* The fewest significant digits that read back as the same double (17 always do). */
static void write_float(FILE *out, double value) {
  char text[32];
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, value);
    if (strtod(text, NULL) == value) break;
  }
  fputs(text, out);
}

char *cnnb_flags_agreement_text(const cnnb_flags *flags, size_t *len) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (!out) return NULL;
  for (size_t k = 0; flags && k < flags->n; k++) {
    const cnnb_flag_entry *f = &flags->v[k];
    if (f->per_rank) continue;
    fprintf(out, "%s\t", f->name);
    switch (f->type) {
      case CNNB_FLAG_BOOL: fputs(f->b ? "true" : "false", out); break;
      case CNNB_FLAG_INT: fprintf(out, "%" PRId64, f->i); break;
      case CNNB_FLAG_FLOAT: write_float(out, f->f); break;
      case CNNB_FLAG_STRING: fputs(f->s ? f->s : "", out); break;
    }
    fputc('\n', out);
  }
  if (fclose(out) != 0) {
    free(text);
    return NULL;
  }
  if (len) *len = size;
  return text;
}
