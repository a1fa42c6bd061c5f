/* cli.c — the cnnbench command line (cnnb_main, cnnb/main.h): declare flags, discover
 * plugins (whose flags join the table), parse, then list, describe or benchmark.
 *
 * Exit codes: 0 success; 2 bad input (flags, plugin names, rejected --plugin files, data
 * the run cannot use); 1 a failure while running (out of memory, device or I/O error). */
#include <stdio.h>
#include <string.h>

#include <cnnb/main.h>

#include "benchmark.h"
#include "host.h"
#include "loader.h"

enum { EXIT_INPUT = 2, EXIT_RUNTIME = 1 };

static int exit_code(cnnb_status st) {
  switch (st) {
    case CNNB_OK: return 0;
    case CNNB_EINVAL:
    case CNNB_ENOTFOUND:
    case CNNB_EUNSUPPORTED:
    case CNNB_EDATA: return EXIT_INPUT;
    default: return EXIT_RUNTIME;
  }
}

/* --plugin files must be known before parsing: their flags are part of the table. So
 * they are picked out of argv first (both spellings), joined with ':'. */
static void collect_plugin_files(int argc, char **argv, char *out, size_t size) {
  out[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *value = NULL;
    if (strncmp(argv[i], "--plugin=", 9) == 0) value = argv[i] + 9;
    else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) value = argv[++i];
    if (!value) continue;
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%s", used ? ":" : "", value);
  }
}

/* --log_level must apply before discovery logs its warnings. */
static void apply_early_log_level(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *value = NULL;
    if (strncmp(argv[i], "--log_level=", 12) == 0) value = argv[i] + 12;
    else if (strcmp(argv[i], "--log_level") == 0 && i + 1 < argc) value = argv[i + 1];
    cnnb_log_level level;
    if (value && cnnb_log_level_parse(value, &level)) cnnb_log_set_level(level);
  }
}

int cnnb_main(int argc, char **argv) {
  static char err[8192];
  static char plugin_files[8192];
  int code = 0;
  cnnb_flags *flags = cnnb_flags_create();
  cnnb_loader *loader = cnnb_loader_create();
  if (!flags || !loader || cnnb_flags_declare_core(flags) != CNNB_OK) {
    fprintf(stderr, "cnnbench: error: out of memory while starting\n");
    return EXIT_RUNTIME;
  }
  apply_early_log_level(argc, argv);
  collect_plugin_files(argc, argv, plugin_files, sizeof plugin_files);
  cnnb_status discovered = cnnb_loader_discover(loader, plugin_files, err, sizeof err);
  char discover_err[sizeof err];
  snprintf(discover_err, sizeof discover_err, "%s", err);
  cnnb_loader_register_flags(loader, flags);

  cnnb_status st = cnnb_flags_parse(flags, argc, argv, err, sizeof err);
  if (st != CNNB_OK) {
    fprintf(stderr, "cnnbench: error: %s\n", err); /* the message names the flag; unknown ones point at --help */
    code = EXIT_INPUT;
  } else if (cnnb_flags_bool(flags, "help")) {
    printf("cnnbench %s: train and benchmark image-classification CNNs.\n"
           "Usage: cnnbench [--flag=value ...]\n\n",
           CNNB_VERSION_STRING);
    cnnb_flags_print_help(flags, stdout);
  } else if (cnnb_flags_bool(flags, "version")) {
    printf("cnnbench %s (plugin ABI %d.%d)\n", CNNB_VERSION_STRING, CNNB_ABI_MAJOR, CNNB_ABI_MINOR);
  } else if (cnnb_flags_bool(flags, "list_plugins")) {
    cnnb_loader_print(loader, stdout);
    if (discovered != CNNB_OK) {
      fprintf(stderr, "cnnbench: error: %s\n", discover_err);
      code = EXIT_INPUT;
    }
  } else if (discovered != CNNB_OK) {
    fprintf(stderr, "cnnbench: error: %s\n", discover_err);
    code = EXIT_INPUT;
  } else {
    cnnb_log_level level;
    if (cnnb_log_level_parse(cnnb_flags_string(flags, "log_level"), &level)) cnnb_log_set_level(level);
    st = cnnb_benchmark_run(flags, loader, stdout, err, sizeof err);
    fflush(stdout);
    if (st != CNNB_OK) {
      fprintf(stderr, "cnnbench: error: %s\n", err);
      code = exit_code(st);
    }
  }
  cnnb_loader_destroy(loader);
  cnnb_flags_destroy(flags);
  return code;
}
