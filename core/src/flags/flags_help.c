/* flags_help.c — --help: the core's theme groups in the order declared, then one group
 * per plugin under "Plugin <name>". Each flag shows its spelling, type (or allowed
 * values), default and its help text wrapped to 80 columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags_internal.h"

#define WRAP_COLUMN 80
#define HELP_INDENT 6

static void print_wrapped(FILE *out, const char *text) {
  const char *p = text;
  while (*p) {
    /* Honour the help's own line breaks; otherwise break at the last space that fits. */
    size_t room = WRAP_COLUMN - HELP_INDENT;
    size_t len = strcspn(p, "\n");
    size_t take = len;
    if (len > room) {
      take = room;
      while (take > 0 && p[take] != ' ') take--;
      if (take == 0) take = room; /* one long word: cut it */
    }
    fprintf(out, "%*s%.*s\n", HELP_INDENT, "", (int)take, p);
    p += take;
    while (*p == ' ') p++;
    if (*p == '\n') p++;
  }
}

static void print_flag(FILE *out, const cnnb_flags *flags, size_t index) {
  const cnnb_flag_entry *f = &flags->v[index];
  /* absl's spelling for a bool that also takes --noname. */
  fprintf(out, "  --%s%s", f->type == CNNB_FLAG_BOOL ? "[no]" : "", f->name);
  for (size_t a = 0; a < flags->naliases; a++)
    if (flags->aliases[a].target == index) fprintf(out, ", --%s", flags->aliases[a].alias);
  fputs("  (", out);
  if (f->choices) {
    for (char **c = f->choices; *c; c++) fprintf(out, "%s%s", c == f->choices ? "" : "|", *c);
  } else {
    fputs(cnnb_flag_type_name(f->type), out);
  }
  if (f->separator) fprintf(out, ", repeatable: values joined by '%c'", f->separator);
  else if (f->type == CNNB_FLAG_STRING) fprintf(out, ", default \"%s\"", f->default_text);
  else fprintf(out, ", default %s", f->default_text);
  fputs(")\n", out);
  if (!f->per_rank) {
    if (f->help[0]) print_wrapped(out, f->help);
    return;
  }
  /* The ranks of a job compare every other flag before the first step (run/world.c). */
  static const char per_rank[] = "May differ per rank.";
  size_t size = strlen(f->help) + sizeof per_rank + 1;
  char *text = malloc(size);
  if (!text) return;
  snprintf(text, size, "%s%s%s", f->help, f->help[0] ? " " : "", per_rank);
  print_wrapped(out, text);
  free(text);
}

static void print_group(FILE *out, const cnnb_flags *flags, size_t group) {
  const cnnb_flag_group *g = &flags->groups[group];
  bool any = false;
  for (size_t i = 0; i < flags->n && !any; i++) any = flags->v[i].group == group;
  if (!any) return;
  fprintf(out, "\n%s%s:\n", g->theme ? "" : "Plugin ", g->name);
  for (size_t i = 0; i < flags->n; i++)
    if (flags->v[i].group == group) print_flag(out, flags, i);
}

void cnnb_flags_print_help(const cnnb_flags *flags, FILE *out) {
  if (!flags || !out) return;
  for (size_t g = 0; g < flags->ngroups; g++)
    if (flags->groups[g].theme) print_group(out, flags, g);
  for (size_t g = 0; g < flags->ngroups; g++)
    if (!flags->groups[g].theme) print_group(out, flags, g);
}
