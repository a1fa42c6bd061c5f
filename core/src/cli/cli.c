/* cli.c — the cnnbench command line (cnnb_main, cnnb/main.h).
 *
 * Two passes over argv. The first reads only the core's flags, ignoring the rest, to learn
 * what the command needs: --version needs no plugin at all, so a broken plugin file can
 * never stop it; --plugin files and --log_level apply before plugins load. Then the
 * plugins are discovered and declare their flags, and the second pass parses the whole
 * command line strictly. The run configuration is read from it once (run_config.h).
 *
 * Exit statuses (also in --help and docs/running.md): 0 success; 2 bad input (flags, plugin
 * names, rejected --plugin files, a model / device / data combination that cannot run);
 * 1 a failure while running (out of memory, device or I/O error, divergence, a report
 * that cannot be written). A plugin that crashes the process gets one line naming it
 * (crash_guard.h) and the signal's own status. SIGINT, SIGTERM, SIGHUP, SIGUSR1 or SIGUSR2
 * during the steps stops the run after the step in progress, which saves and reports, then
 * ends by that signal (130, 143, 129, 138, 140 in a shell: base/interrupt.h,
 * run/interrupted.h). */
#define _POSIX_C_SOURCE 200809L /* strdup, open_memstream */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/dataset.h>
#include <cnnb/main.h>

#include "cli/cli.h"
#include "cli/openmp_env.h"
#include "base/crash_guard.h"
#include "base/interrupt.h"
#include "flags/flags.h"
#include "flags/flagfile.h"
#include "loader/loader.h"
#include "config/run_config.h"
#include "config/core_flags.h"
#include "config/tf_flags.h"
#include "run/benchmark.h"
#include "run/eval_watch.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_INPUT = 2 };
enum { ERR_SIZE = 8192 };

static int exit_code(cnnb_status st) {
  switch (st) {
    case CNNB_OK: return EXIT_OK;
    case CNNB_EINVAL:
    case CNNB_ENOTFOUND:
    case CNNB_EUNSUPPORTED:
    case CNNB_EDATA: return EXIT_INPUT;
    default: return EXIT_RUNTIME;
  }
}

static const char exit_status_help[] =
    "\nExit status: 0 success; 2 bad input (a flag, a plugin name, a rejected --plugin\n"
    "file, a model, device or dataset combination that cannot run); 1 a failure while\n"
    "running (out of memory, a device or I/O error, divergence, an unwritable report).\n"
    "SIGINT, SIGTERM, SIGHUP, SIGUSR1 or SIGUSR2 (a batch system's warning, as Slurm's\n"
    "scancel --signal=USR1): the step in progress finishes, --train_dir gets a checkpoint,\n"
    "then the process ends by the signal (130, 143, 129, 138, 140: 128 + its number);\n"
    "a second signal ends it at once.\n";

/* What the first pass learns: the core flags that decide what to load. */
typedef struct command {
  bool version, help, list_plugins;
  char *plugin_files; /* --plugin values joined by ':' (owned) */
  cnnb_log_level log_level;
  /* Each --flagfile's contents, read by this pass and reused by the strict one: a pipe,
   * /dev/stdin or a FIFO can be read only once (owned). */
  cnnb_flagfiles *files;
} command;

static cnnb_status read_command(int argc, char **argv, command *cmd) {
  cnnb_flags *core = cnnb_flags_create();
  cmd->files = cnnb_flagfiles_create();
  if (!core || !cmd->files || cnnb_flags_declare_core(core) != CNNB_OK) {
    cnnb_flags_destroy(core);
    return CNNB_ENOMEM;
  }
  /* Unknown names may be plugin flags: the second pass judges them. */
  cnnb_flags_parse_known_files(core, cmd->files, argc, argv);
  cmd->version = cnnb_flags_bool(core, "version");
  cmd->help = cnnb_flags_bool(core, "help");
  cmd->list_plugins = cnnb_flags_bool(core, "list_plugins");
  cmd->plugin_files = strdup(cnnb_flags_string(core, "plugin"));
  if (!cnnb_log_level_parse(cnnb_flags_string(core, "log_level"), &cmd->log_level))
    cmd->log_level = CNNB_LOG_INFO;
  cnnb_flags_destroy(core);
  return cmd->plugin_files ? CNNB_OK : CNNB_ENOMEM;
}

/* --help lists what is installed beside the flags that pick plugins. */
static void note_installed(const cnnb_loader *loader, cnnb_flags *flags) {
  static const struct {
    uint32_t kind;
    const char *flag;
  } pickers[] = {{CNNB_KIND_MODEL, "model"},
                 {CNNB_KIND_DEVICE, "device"},
                 {CNNB_KIND_STRATEGY, "variable_update"},
                 {CNNB_KIND_DATASOURCE, "datasource"}};
  for (size_t k = 0; k < sizeof pickers / sizeof pickers[0]; k++) {
    size_t count = cnnb_loader_names(loader, pickers[k].kind, NULL, 0);
    const char **names = calloc(count ? count : 1, sizeof *names);
    char *text = NULL;
    size_t len = 0;
    FILE *out = names ? open_memstream(&text, &len) : NULL;
    if (out) {
      cnnb_loader_names(loader, pickers[k].kind, names, count);
      fputs(count ? "Installed here:" : "No plugin of this kind is installed here.", out);
      for (size_t i = 0; i < count; i++) fprintf(out, "%s %s", i ? "," : "", names[i]);
      fputs(count ? "." : "", out);
      if (fclose(out) == 0 && text) cnnb_flags_append_help(flags, pickers[k].flag, text);
    }
    free(text);
    free(names);
  }
}

/* --data_name's help lists the datasets the loaded datasources describe (dataset.h). */
static void note_datasets(cnnb_flags *flags) {
  char text[512] = "Known here:";
  size_t len = strlen(text);
  const cnnb_dataset_info *d;
  for (uint32_t i = 0; (d = cnnb_dataset_at(i)) && len < sizeof text; i++)
    len += (size_t)snprintf(text + len, sizeof text - len, "%s %s", i ? "," : "", d->name);
  if (len == strlen("Known here:"))
    snprintf(text, sizeof text, "No datasource installed here describes a dataset.");
  else if (len + 1 < sizeof text) strcat(text, ".");
  cnnb_flags_append_help(flags, "data_name", text);
}

static void print_help(const cnnb_flags *flags) {
  printf("cnnbench %s: train and benchmark image-classification CNNs.\n"
         "Usage: cnnbench [--flag=value ...]\n\n",
         CNNB_VERSION_STRING);
  cnnb_flags_print_help(flags, stdout);
  fputs(exit_status_help, stdout);
}

/* The command after discovery: help, the plugin list, or a run. */
static int run_command(const command *cmd, cnnb_ctx *root, cnnb_flags *flags, cnnb_loader *loader,
                       cnnb_status discovered, const char *discover_err, int argc, char **argv,
                       const cnnb_run_hooks *hooks) {
  char *err = malloc(ERR_SIZE);
  if (!err) return EXIT_RUNTIME;
  int code = EXIT_OK;
  cnnb_status st = cnnb_flags_parse_files(flags, cmd->files, argc, argv, err, ERR_SIZE);
  if (st != CNNB_OK) {
    fprintf(stderr, "cnnbench: error: %s\n",
            err); /* names the flag; unknown ones point at --help */
    code = EXIT_INPUT;
  } else if (cmd->help) {
    print_help(flags);
  } else if (cmd->list_plugins && strcmp(cnnb_flags_string(flags, "list_format"), "json") == 0) {
    cnnb_status listed = cnnb_loader_print_json(loader, flags, stdout);
    /* A write that failed is check_output's to say, naming standard output. */
    if (listed != CNNB_OK && !ferror(stdout))
      fprintf(stderr, "cnnbench: error: making the plugin list as JSON failed: %s\n",
              cnnb_status_name(listed));
    if (listed != CNNB_OK) code = EXIT_RUNTIME;
  } else if (cmd->list_plugins) {
    cnnb_loader_print(loader, stdout);
  }
  if (code == EXIT_OK && discovered != CNNB_OK) {
    fprintf(stderr, "cnnbench: error: %s\n", discover_err);
    code = EXIT_INPUT;
  }
  if (code == EXIT_OK && !cmd->help && !cmd->list_plugins) {
    cnnb_run_config cfg;
    /* First: it may restart the process, and nothing is said or done before it twice. */
    const char *unrepeatable = cnnb_flagfiles_unrepeatable(cmd->files);
    char no_restart[512];
    snprintf(no_restart, sizeof no_restart, "--flagfile=%.400s is read once",
             unrepeatable ? unrepeatable : "");
    st = cnnb_openmp_env_apply(flags, argv, unrepeatable ? no_restart : NULL, err, ERR_SIZE);
    if (st == CNNB_OK) st = cnnb_tf_flags_check(flags, argc, argv, err, ERR_SIZE);
    if (st == CNNB_OK) st = cnnb_run_config_from_flags(flags, &cfg, err, ERR_SIZE);
    cfg.argc = argc;
    cfg.argv = argv;
    if (st == CNNB_OK && cfg.eval_interval_secs > 0)
      st = cnnb_eval_watch(&cfg, root, loader, stdout, err, ERR_SIZE, hooks);
    else if (st == CNNB_OK)
      st = cnnb_benchmark_run(&cfg, root, loader, stdout, err, ERR_SIZE, hooks);
    if (st != CNNB_OK) {
      fflush(stdout);
      cnnb_flags_locate_error(flags, err, ERR_SIZE); /* a flagfile's value: its FILE:LINE */
      if (*err) fprintf(stderr, "cnnbench: error: %s\n", err); /* empty: already said */
      code = exit_code(st);
    }
  }
  free(err);
  return code;
}

/* A run that stopped for a signal (base/interrupt.h; or finished before it could) ends by that
 * signal once everything is written and taken apart, as a shell expects of a command it
 * interrupted: a script's loop stops at Ctrl-C, and the status is 130 / 143. A failure
 * keeps its own status and message. */
static int end_by_signal(int code) {
  int signo = cnnb_interrupt_signal();
  if (!signo || code != EXIT_OK) return code;
  if (!cnnb_interrupt_stopped())
    fprintf(stderr, "cnnbench: %s after the run's last step: it had finished; stopping\n",
            cnnb_interrupt_name(signo));
  fflush(stderr);
  return cnnb_interrupt_exit(signo);
}

/* A report that could not be written (a full disk, a closed pipe) is a failure, not a
 * success with nothing to show. */
static int check_output(int code) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return code;
  fprintf(stderr, "cnnbench: error: writing to standard output failed: %s\n",
          errno ? strerror(errno) : "I/O error");
  return code == EXIT_OK ? EXIT_RUNTIME : code;
}

int cnnb_cli_main(int argc, char **argv, const cnnb_run_hooks *hooks) {
  cnnb_crash_guard_install();
  cnnb_interrupt_prepare(); /* before any thread: every one inherits the blocked signals */
  command cmd = {0};
  if (read_command(argc, argv, &cmd) != CNNB_OK) {
    free(cmd.plugin_files);
    cnnb_flagfiles_destroy(cmd.files);
    fprintf(stderr, "cnnbench: error: out of memory while starting\n");
    return EXIT_RUNTIME;
  }
  if (cmd.version) {
    free(cmd.plugin_files);
    cnnb_flagfiles_destroy(cmd.files);
    printf("cnnbench %s (plugin ABI %d.%d)\n", CNNB_VERSION_STRING, CNNB_ABI_MAJOR, CNNB_ABI_MINOR);
    return check_output(EXIT_OK);
  }

  /* Every ctx of this command descends from `root`: one flag table, one log level. */
  cnnb_flags *flags = cnnb_flags_create();
  cnnb_ctx *root = flags ? cnnb_ctx_create("cnnbench", flags) : NULL;
  if (root) cnnb_ctx_set_log_level(root, cmd.log_level);
  cnnb_loader *loader = root ? cnnb_loader_create(root) : NULL;
  char *discover_err = malloc(ERR_SIZE);
  int code = EXIT_RUNTIME;
  if (!loader || !discover_err || cnnb_flags_declare_core(flags) != CNNB_OK) {
    fprintf(stderr, "cnnbench: error: out of memory while starting\n");
  } else {
    cnnb_status discovered = cnnb_loader_discover(loader, cmd.plugin_files, discover_err, ERR_SIZE);
    cnnb_loader_register_flags(loader, flags);
    if (cnnb_tf_flags_declare_unserved(flags) != CNNB_OK)
      fprintf(stderr, "cnnbench: error: %s\n", cnnb_flags_error(flags));
    note_installed(loader, flags);
    note_datasets(flags);
    code = run_command(&cmd, root, flags, loader, discovered, discover_err, argc, argv, hooks);
  }
  free(discover_err);
  free(cmd.plugin_files);
  cnnb_flagfiles_destroy(cmd.files);
  cnnb_loader_destroy(loader);
  cnnb_ctx_destroy(root);
  cnnb_flags_destroy(flags);
  return end_by_signal(check_output(code));
}

int cnnb_main(int argc, char **argv) { return cnnb_cli_main(argc, argv, NULL); }
