/* test_loader.c — the plugin loader against the fixtures in $CNNB_BUILD_DIR/fixtures
 * (tests/fixtures/): every way a plugin can be broken gets its own message naming the
 * file, what is wrong and the fix; explicit --plugin files fail discovery while
 * discovered ones only warn; CNNB_PLUGIN_PATH order and duplicates; name resolution
 * (unknown names, wrong kind, rejected plugins); --list_plugins; plugin flags. */
#define _GNU_SOURCE
#include <check.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "config/core_flags.h"
#include "flags/flags.h"
#include "loader/loader.h"

/* The kind handed to the fixture models, which ignore it. */
enum { FIXTURE_DATASET = 1 };

static char err[8192];

static const char *fixture(const char *name) {
  static char paths[8][PATH_MAX];
  static int next;
  const char *build = getenv("CNNB_BUILD_DIR");
  ck_assert_msg(build != NULL, "CNNB_BUILD_DIR is not set (run through ctest)");
  char *p = paths[next++ % 8];
  snprintf(p, PATH_MAX, "%s/fixtures/%s", build, name);
  return p;
}

/* A loader that sees only what a test gives it: no install dir, no CNNB_PLUGIN_PATH. */
static cnnb_loader *isolated_loader(void) {
  unsetenv("CNNB_PLUGIN_PATH");
  cnnb_loader *l = cnnb_loader_create(NULL);
  ck_assert_ptr_nonnull(l);
  ck_assert_int_eq(cnnb_loader_set_install_dir(l, NULL), CNNB_OK);
  return l;
}

#define ck_assert_contains(haystack, needle)                                               \
  ck_assert_msg(strstr((haystack), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), \
                (haystack))

/* ---- stderr capture: the loader's warnings go to the log ------------------------ */

static int saved_stderr = -1;
static FILE *captured;

static void capture_begin(void) {
  fflush(stderr);
  captured = tmpfile();
  ck_assert_ptr_nonnull(captured);
  saved_stderr = dup(2);
  ck_assert_int_ge(saved_stderr, 0);
  ck_assert_int_ge(dup2(fileno(captured), 2), 0);
}

/* Returns what was logged since capture_begin (caller frees) and echoes it. */
static char *capture_end(void) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  long size = ftell(captured);
  ck_assert_int_ge(size, 0);
  char *text = calloc(1, (size_t)size + 1);
  ck_assert_ptr_nonnull(text);
  rewind(captured);
  size_t got = fread(text, 1, (size_t)size, captured);
  text[got] = '\0';
  fclose(captured);
  fputs(text, stderr);
  return text;
}

/* Temporary plugin directories, removed after each test (which runs in its own process). */
static char made_dirs[4][64];
static int num_made;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void remove_made_dirs(void) {
  for (int i = 0; i < num_made; i++) nftw(made_dirs[i], remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  num_made = 0;
}

/* A temporary plugin directory holding links to the named fixtures. */
static void make_dir(char *dir, size_t size, const char *const *fixtures) {
  snprintf(dir, size, "/tmp/cnnb_loader_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  if (num_made < 4) snprintf(made_dirs[num_made++], sizeof made_dirs[0], "%s", dir);
  for (size_t i = 0; fixtures && fixtures[i]; i++) {
    char link[PATH_MAX];
    const char *base = strrchr(fixtures[i], '/');
    snprintf(link, sizeof link, "%s/%s", dir, base ? base + 1 : fixtures[i]);
    ck_assert_int_eq(symlink(fixture(fixtures[i]), link), 0);
  }
}

/* ---- the good plugin --------------------------------------------------------------- */

START_TEST(good_plugin_loads_and_resolves) {
  cnnb_loader *l = isolated_loader();
  ck_assert_int_eq(cnnb_loader_discover(l, fixture("libfixture_good.so"), err, sizeof err),
                   CNNB_OK);
  ck_assert_str_eq(err, "");
  ck_assert_uint_eq(cnnb_loader_num_accepted(l), 1);
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), 0);
  const cnnb_plugin *p = NULL;
  const char *path = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_good", &p, &path, err, sizeof err),
                   CNNB_OK);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(path, fixture("libfixture_good.so"));
  ck_assert_str_eq(p->name, "fixture_good");
  ck_assert_str_eq(p->version, "1.0.0");
  ck_assert_uint_eq(p->kind, CNNB_KIND_MODEL);
  ck_assert_uint_eq(p->abi_major, CNNB_ABI_MAJOR);
  ck_assert_uint_eq(p->struct_size, sizeof(cnnb_plugin));
  const cnnb_model_vtable *vt = p->vtable;
  ck_assert_ptr_nonnull(vt);
  ck_assert_uint_eq(vt->struct_size, sizeof(cnnb_model_vtable));
  cnnb_model_info info = {.struct_size = sizeof info};
  ck_assert_int_eq(vt->describe(NULL, "fixture_good", FIXTURE_DATASET, &info), CNNB_OK);
  ck_assert_int_eq(info.image_size, 8);
  ck_assert_ptr_null(vt->learning_rate);
  ck_assert_ptr_nonnull(p->get_extension);
  const int *answer = p->get_extension("fixture.answer/1");
  ck_assert_ptr_nonnull(answer);
  ck_assert_int_eq(*answer, 42);
  ck_assert_ptr_null(p->get_extension("fixture.other/1"));
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(good_plugin_builds_a_graph) {
  cnnb_loader *l = isolated_loader();
  ck_assert_int_eq(cnnb_loader_discover(l, fixture("libfixture_good.so"), err, sizeof err),
                   CNNB_OK);
  const cnnb_plugin *p = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_good", &p, NULL, err, sizeof err),
                   CNNB_OK);
  cnnb_graph *g = cnnb_graph_create(2, 3, 8, 8, 10);
  ck_assert_ptr_nonnull(g);
  const cnnb_model_vtable *vt = p->vtable;
  ck_assert_int_eq(vt->build(NULL, "fixture_good", FIXTURE_DATASET, g), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_param_arena_count(g), 3 * 8 * 8 * 10 + 10);
  cnnb_graph_destroy(g);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- each broken plugin, given explicitly --------------------------------------- */

typedef struct bad_case {
  const char *file;
  const char *name;      /* what a user would ask for */
  const char *expect[4]; /* substrings of the message */
} bad_case;

static char small_desc_msg[128], small_vtable_msg[128];

static const bad_case bad_cases[] = {
    {"libfixture_abi99.so",
     "fixture_abi99",
     {"built for cnnbench ABI 99.0", "this host speaks 1.x", "rebuild it against the 1.x SDK"}},
    {"libfixture_noentry.so",
     "fixture_noentry",
     {"does not export cnnb_plugin_entry", "is it a cnnbench plugin?",
      "build it with cnnb_add_plugin()"}},
    {"libnotelf.so", "notelf", {"not a shared object (no ELF header)", "(dlopen: "}},
    {"libfixture_truncated.so",
     "fixture_truncated",
     {"truncated or corrupt ELF file (100 bytes", "rebuild or reinstall it", "(dlopen: "}},
    {"libfixture_unresolved.so",
     "fixture_unresolved",
     {"undefined symbol 'fixture_missing'", "linked without -Wl,-z,defs",
      "link the library that defines 'fixture_missing'", "(dlopen: "}},
    {"libfixture_newer_sdk.so",
     "fixture_newer_sdk",
     {"needs 'cnnb_future_service'", "built against a newer cnnbench SDK", "upgrade cnnbench",
      "(dlopen: "}},
    {"libfixture_null_entry.so",
     "fixture_null_entry",
     {"cnnb_plugin_entry returned NULL", "refused to load"}},
    {"libfixture_badkind.so", "fixture_badkind", {"declares kind 42", "does not know"}},
    {"libfixture_small_desc.so", "fixture_small_desc", {small_desc_msg, "CNNB_PLUGIN_HEAD()"}},
    {"libfixture_no_vtable.so",
     "fixture_no_vtable",
     {"model plugin without a vtable", ".vtable is NULL"}},
    {"libfixture_small_vtable.so",
     "fixture_small_vtable",
     {small_vtable_msg, "sizeof(cnnb_model_vtable)"}},
};
#define NUM_BAD (int)(sizeof bad_cases / sizeof bad_cases[0])

static void setup_messages(void) {
  snprintf(small_desc_msg, sizeof small_desc_msg,
           "descriptor is 40 bytes, ABI 1.0 needs at least %zu", sizeof(cnnb_plugin));
  snprintf(small_vtable_msg, sizeof small_vtable_msg,
           "cnnb_model_vtable is 16 bytes, ABI 1.0 needs at least %zu",
           offsetof(cnnb_model_vtable, learning_rate_at)); /* the 1.0 layout's end */
}

START_TEST(explicit_bad_plugin_is_an_error) {
  const bad_case *c = &bad_cases[_i];
  cnnb_loader *l = isolated_loader();
  const char *path = fixture(c->file);
  ck_assert_int_eq(cnnb_loader_discover(l, path, err, sizeof err), CNNB_EINVAL);
  /* "FILE: what is wrong: the fix" */
  ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
                "message does not start with the file: %s", err);
  for (int k = 0; k < 4 && c->expect[k]; k++) ck_assert_contains(err, c->expect[k]);
  ck_assert_uint_eq(cnnb_loader_num_accepted(l), 0);
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), 1);
  const char *rpath = NULL, *why = NULL;
  ck_assert(cnnb_loader_rejection(l, 0, &rpath, &why));
  ck_assert_str_eq(rpath, path);
  ck_assert_contains(why, c->expect[0]);
  ck_assert(!cnnb_loader_rejection(l, 1, NULL, NULL));
  /* Asking for it by name says why it is not there. */
  const cnnb_plugin *p = (const cnnb_plugin *)1;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, c->name, &p, NULL, err, sizeof err),
                   CNNB_EINVAL);
  ck_assert_ptr_null(p);
  ck_assert_contains(err, "--model=");
  ck_assert_contains(err, c->name);
  ck_assert_contains(err, "was rejected");
  ck_assert_contains(err, path);
  ck_assert_contains(err, c->expect[0]);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- the same files, discovered: warnings, and the run goes on ------------------- */

START_TEST(discovered_bad_plugins_only_warn) {
  const char *files[NUM_BAD + 2];
  for (int i = 0; i < NUM_BAD; i++) files[i] = bad_cases[i].file;
  files[NUM_BAD] = "libfixture_good.so";
  files[NUM_BAD + 1] = NULL;
  char dir[64];
  make_dir(dir, sizeof dir, files);
  cnnb_loader *l = isolated_loader();
  setenv("CNNB_PLUGIN_PATH", dir, 1);
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, NULL, err, sizeof err);
  char *log = capture_end();
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_str_eq(err, "");
  ck_assert_uint_eq(cnnb_loader_num_accepted(l), 1);
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), NUM_BAD);
  for (int i = 0; i < NUM_BAD; i++) {
    char line[PATH_MAX + 64];
    snprintf(line, sizeof line, "loader: warning: %s/%s: ", dir, bad_cases[i].file);
    ck_assert_contains(log, line);
    ck_assert_contains(log, bad_cases[i].expect[0]);
  }
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_good", NULL, NULL, err,
                                    sizeof err),
                   CNNB_OK);
  /* The user asks for a rejected one: now it is an error, with the reason. */
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_abi99", NULL, NULL, err,
                                    sizeof err),
                   CNNB_EINVAL);
  ck_assert_contains(err, "--model=fixture_abi99: ");
  ck_assert_contains(err, "built for cnnbench ABI 99.0, this host speaks 1.x");
  free(log);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(discovered_then_explicit_is_an_error) {
  const char *files[] = {"libfixture_abi99.so", NULL};
  char dir[64], explicit_path[PATH_MAX];
  make_dir(dir, sizeof dir, files);
  snprintf(explicit_path, sizeof explicit_path, "%s/libfixture_abi99.so", dir);
  cnnb_loader *l = isolated_loader();
  setenv("CNNB_PLUGIN_PATH", dir, 1);
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, explicit_path, err, sizeof err);
  free(capture_end());
  ck_assert_int_eq(st, CNNB_EINVAL);
  ck_assert_contains(err, "libfixture_abi99.so: built for cnnbench ABI 99.0");
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), 1); /* one file, loaded once */
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(explicit_missing_file_and_directory) {
  cnnb_loader *l = isolated_loader();
  char list[PATH_MAX * 3];
  snprintf(list, sizeof list, "/nonexistent/libnothing.so:%s:%s", fixture("dup_a"),
           fixture("libfixture_noentry.so"));
  ck_assert_int_eq(cnnb_loader_discover(l, list, err, sizeof err), CNNB_EINVAL);
  ck_assert_contains(err, "/nonexistent/libnothing.so: no such file");
  ck_assert_contains(err, "dup_a: is a directory: --plugin takes a .so file");
  ck_assert_contains(err, "libfixture_noentry.so: does not export cnnb_plugin_entry");
  /* One line per rejected file. */
  int lines = 1;
  for (const char *c = err; *c; c++) lines += *c == '\n';
  ck_assert_int_eq(lines, 3);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- ABI minor newer than the host: accepted, the extra fields ignored ------------ */

START_TEST(newer_minor_is_accepted) {
  cnnb_loader *l = isolated_loader();
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, fixture("libfixture_newer.so"), err, sizeof err);
  char *log = capture_end();
  ck_assert_int_eq(st, CNNB_OK);
  char want[128];
  snprintf(want, sizeof want,
           "libfixture_newer.so: built for cnnbench ABI 1.99, newer than this host's %d.%d: loaded",
           CNNB_ABI_MAJOR, CNNB_ABI_MINOR);
  ck_assert_contains(log, want);
  ck_assert_contains(log, "ignored");
  const cnnb_plugin *p = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_newer", &p, NULL, err, sizeof err),
                   CNNB_OK);
  ck_assert_uint_eq(p->abi_minor, 99);
  /* The host's copy is the host's size, whatever the plugin appended. */
  ck_assert_uint_eq(p->struct_size, sizeof(cnnb_plugin));
  const cnnb_model_vtable *vt = p->vtable;
  ck_assert_uint_eq(vt->struct_size, sizeof(cnnb_model_vtable));
  ck_assert_ptr_null(vt->learning_rate);
  cnnb_model_info info = {.struct_size = sizeof info};
  ck_assert_int_eq(vt->describe(NULL, "fixture_newer", FIXTURE_DATASET, &info), CNNB_OK);
  ck_assert_int_eq(info.image_size, 8);
  ck_assert_ptr_null(p->register_flags);
  free(log);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- datasets: what datasources describe ------------------------------------------ */

/* The table holds what each datasource describes, numbered and in kind order; what it
 * cannot take is warned about by file and reason; a 1.12 datasource still loads and is
 * not asked; the loader's datasets leave with it. */
START_TEST(datasources_describe_the_datasets) {
  cnnb_loader *l = isolated_loader();
  char files[3 * PATH_MAX + 3], first[PATH_MAX];
  snprintf(first, sizeof first, "%s", fixture("datasets/libfixture_datasets.so"));
  snprintf(files, sizeof files, "%s:%s:%s", first, fixture("datasets/libfixture_datasets_dup.so"),
           fixture("datasets/libfixture_datasets_old.so"));
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, files, err, sizeof err);
  char *log = capture_end();
  ck_assert_msg(st == CNNB_OK, "%s", err);

  const cnnb_dataset_info *d = cnnb_dataset_at(0);
  ck_assert_ptr_nonnull(d);
  ck_assert_str_eq(d->name, "fixture_pin1");
  ck_assert_uint_eq(d->kind, 1);
  d = cnnb_dataset_at(1);
  ck_assert_ptr_nonnull(d);
  ck_assert_str_eq(d->name, "fixture_set");
  ck_assert_uint_eq(d->kind, CNNB_DATASET_PINNED_KINDS + 1);
  ck_assert_int_eq(d->num_classes, 10);
  ck_assert_int_eq(d->channels, 1);
  ck_assert_int_eq(d->height, 12);
  ck_assert_int_eq(d->width, 12);
  ck_assert_int_eq(d->train_examples, 100);
  ck_assert_int_eq(d->eval_examples, 20);
  ck_assert_ptr_eq(cnnb_dataset_lookup(d->kind), d);
  ck_assert_ptr_eq(cnnb_dataset_find("fixture_set"), d);
  d = cnnb_dataset_at(2);
  ck_assert_ptr_nonnull(d);
  ck_assert_str_eq(d->name, "fixture_wide");
  ck_assert_uint_eq(d->kind, CNNB_DATASET_PINNED_KINDS + 2);
  ck_assert_int_eq(d->height, 0);
  ck_assert_ptr_null(cnnb_dataset_at(3));
  ck_assert_ptr_null(cnnb_dataset_find("fixture_never_read"));

  ck_assert_contains(log, "dataset 2 not offered: its name is not 1 to 64 lower-case");
  ck_assert_contains(log, "'fixture_pin9' pins kind 9, and only 1 to 3 are pinned");
  ck_assert_contains(log, "'fixture_halfsize' has 10 classes, 3 channels, 12x0 images");
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "'fixture_set' is already described by %s", first);
  ck_assert_contains(log, want);
  snprintf(want, sizeof want, "'fixture_pin1b' pins kind 1, which %s gives 'fixture_pin1'", first);
  ck_assert_contains(log, want);
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_DATASOURCE, "fixture_datasets_old", NULL, NULL,
                                    err, sizeof err),
                   CNNB_OK);
  free(log);
  cnnb_loader_destroy(l);
  ck_assert_ptr_null(cnnb_dataset_at(0));
  ck_assert_ptr_null(cnnb_dataset_find("fixture_set"));
}
END_TEST

/* ---- names: wrong kind, unknown, listing ------------------------------------------ */

START_TEST(wrong_kind_names_the_kind_and_file) {
  cnnb_loader *l = isolated_loader();
  ck_assert_int_eq(cnnb_loader_discover(l, fixture("libfixture_strategy.so"), err, sizeof err),
                   CNNB_OK);
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_strategy", NULL, NULL, err,
                                    sizeof err),
                   CNNB_EINVAL);
  char expect[PATH_MAX + 128];
  snprintf(expect, sizeof expect,
           "--model=fixture_strategy: 'fixture_strategy' is a strategy plugin (%s), not a model",
           fixture("libfixture_strategy.so"));
  ck_assert_contains(err, expect);
  ck_assert_contains(err, "--variable_update=fixture_strategy");
  const cnnb_plugin *p = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_STRATEGY, "fixture_strategy", &p, NULL, err,
                                    sizeof err),
                   CNNB_OK);
  ck_assert_uint_eq(p->kind, CNNB_KIND_STRATEGY);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(unknown_name_lists_the_known_ones) {
  cnnb_loader *l = isolated_loader();
  char list[PATH_MAX * 3];
  snprintf(list, sizeof list, "%s:%s:%s", fixture("libfixture_good.so"),
           fixture("libfixture_newer.so"), fixture("libfixture_strategy.so"));
  ck_assert_int_eq(cnnb_loader_discover(l, list, err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_godo", NULL, NULL, err,
                                    sizeof err),
                   CNNB_ENOTFOUND);
  ck_assert_contains(err, "--model=fixture_godo: no model plugin offers 'fixture_godo'");
  ck_assert_contains(err, "did you mean 'fixture_good'?");
  ck_assert_contains(err, "known names: fixture_good, fixture_newer");
  ck_assert_msg(strstr(err, "fixture_strategy") == NULL, "lists another kind: %s", err);
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_DEVICE, "tpu", NULL, NULL, err, sizeof err),
                   CNNB_ENOTFOUND);
  ck_assert_contains(err, "--device=tpu: no device plugin offers 'tpu'");
  ck_assert_contains(err, "no device plugin was found at all");

  const char *names[4] = {0};
  ck_assert_uint_eq(cnnb_loader_names(l, CNNB_KIND_MODEL, names, 4), 2);
  ck_assert_str_eq(names[0], "fixture_good");
  ck_assert_str_eq(names[1], "fixture_newer");
  ck_assert_uint_eq(cnnb_loader_names(l, CNNB_KIND_MODEL, names, 1), 2); /* total, not filled */
  ck_assert_uint_eq(cnnb_loader_names(l, CNNB_KIND_STRATEGY, NULL, 0), 1);
  ck_assert_uint_eq(cnnb_loader_names(l, CNNB_KIND_DATASOURCE, NULL, 0), 0);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(kind_flags) {
  ck_assert_str_eq(cnnb_loader_kind_flag(CNNB_KIND_MODEL), "model");
  ck_assert_str_eq(cnnb_loader_kind_flag(CNNB_KIND_DEVICE), "device");
  ck_assert_str_eq(cnnb_loader_kind_flag(CNNB_KIND_STRATEGY), "variable_update");
  ck_assert_str_eq(cnnb_loader_kind_flag(CNNB_KIND_DATASOURCE), "datasource");
}
END_TEST

/* ---- duplicates: the first on the path wins --------------------------------------- */

static void check_dup_order(const char *first, const char *second, const char *version) {
  cnnb_loader *l = isolated_loader();
  char path_list[PATH_MAX * 2];
  snprintf(path_list, sizeof path_list, "%s:%s", fixture(first), fixture(second));
  setenv("CNNB_PLUGIN_PATH", path_list, 1);
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, NULL, err, sizeof err);
  char *log = capture_end();
  ck_assert_int_eq(st, CNNB_OK);
  const cnnb_plugin *p = NULL;
  const char *path = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_dup", &p, &path, err, sizeof err),
                   CNNB_OK);
  ck_assert_str_eq(p->version, version);
  ck_assert_contains(path, first);
  char expect[PATH_MAX * 2 + 64];
  snprintf(expect, sizeof expect,
           "%s/libfixture_dup.so: offers 'fixture_dup' already offered by %s/libfixture_dup.so: "
           "ignored",
           fixture(second), fixture(first));
  ck_assert_contains(log, expect);
  ck_assert_uint_eq(cnnb_loader_num_accepted(l), 1);
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), 1);
  free(log);
  cnnb_loader_destroy(l);
}

START_TEST(duplicate_name_first_on_path_wins) {
  check_dup_order("dup_a", "dup_b", "1.0.0-a");
  check_dup_order("dup_b", "dup_a", "1.0.0-b");
}
END_TEST

START_TEST(partly_shadowed_plugin_keeps_its_other_names) {
  cnnb_loader *l = isolated_loader();
  char list[PATH_MAX * 2];
  snprintf(list, sizeof list, "%s:%s", fixture("libfixture_good.so"),
           fixture("libfixture_multi.so"));
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, list, err, sizeof err);
  char *log = capture_end();
  ck_assert_int_eq(st, CNNB_OK); /* explicit, but still useful: not an error */
  char expect[PATH_MAX * 2 + 64];
  snprintf(expect, sizeof expect, "%s offers 'fixture_good' already offered by %s: ignored",
           fixture("libfixture_multi.so"), fixture("libfixture_good.so"));
  ck_assert_contains(log, expect);
  const char *path = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_good", NULL, &path, err,
                                    sizeof err),
                   CNNB_OK);
  ck_assert_str_eq(path, fixture("libfixture_good.so"));
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_multi", NULL, &path, err,
                                    sizeof err),
                   CNNB_OK);
  ck_assert_str_eq(path, fixture("libfixture_multi.so"));
  const char *names[4] = {0};
  ck_assert_uint_eq(cnnb_loader_names(l, CNNB_KIND_MODEL, names, 4), 2);
  ck_assert_str_eq(names[1], "fixture_multi");
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), 0);
  free(log);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(install_dir_comes_before_plugin_path_and_explicit) {
  cnnb_loader *l = isolated_loader();
  ck_assert_int_eq(cnnb_loader_set_install_dir(l, fixture("dup_b")), CNNB_OK);
  ck_assert_str_eq(cnnb_loader_install_dir(l), fixture("dup_b"));
  setenv("CNNB_PLUGIN_PATH", fixture("dup_a"), 1);
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, NULL, err, sizeof err);
  free(capture_end());
  ck_assert_int_eq(st, CNNB_OK);
  const cnnb_plugin *p = NULL;
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_dup", &p, NULL, err, sizeof err),
                   CNNB_OK);
  ck_assert_str_eq(p->version, "1.0.0-b");
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(explicit_duplicate_is_an_error) {
  cnnb_loader *l = isolated_loader();
  setenv("CNNB_PLUGIN_PATH", fixture("dup_a"), 1);
  char explicit_path[PATH_MAX];
  snprintf(explicit_path, sizeof explicit_path, "%s/libfixture_dup.so", fixture("dup_b"));
  ck_assert_int_eq(cnnb_loader_discover(l, explicit_path, err, sizeof err), CNNB_EINVAL);
  ck_assert_contains(err, explicit_path);
  ck_assert_contains(err, "offers 'fixture_dup' already offered by");
  ck_assert_contains(err, "dup_a/libfixture_dup.so");
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- directories: what is searched, what is ignored -------------------------------- */

START_TEST(plugin_path_entries_and_files) {
  const char *files[] = {"libfixture_good.so", NULL};
  char dir[64], path[PATH_MAX];
  make_dir(dir, sizeof dir, files);
  /* Not *.so: ignored without a word, even when it is a good plugin. */
  snprintf(path, sizeof path, "%s/libfixture_newer.so.1", dir);
  ck_assert_int_eq(symlink(fixture("libfixture_newer.so"), path), 0);
  snprintf(path, sizeof path, "%s/README.txt", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("not a plugin\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/subdir.so", dir);
  ck_assert_int_eq(mkdir(path, 0700), 0);

  cnnb_loader *l = isolated_loader();
  char list[PATH_MAX];
  /* Empty entries are skipped; the same dir twice loads its plugins once. */
  snprintf(list, sizeof list, "::/nonexistent/cnnb_plugins:%s:%s/:", dir, dir);
  setenv("CNNB_PLUGIN_PATH", list, 1);
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, fixture("libfixture_good.so"), err, sizeof err);
  char *log = capture_end();
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_contains(log, "CNNB_PLUGIN_PATH entry '/nonexistent/cnnb_plugins' does not exist: "
                          "ignored");
  ck_assert_msg(strstr(log, "fixture_good") == NULL, "loaded twice? %s", log);
  ck_assert_uint_eq(cnnb_loader_num_accepted(l), 1);
  ck_assert_uint_eq(cnnb_loader_num_rejected(l), 0);
  ck_assert_int_eq(cnnb_loader_find(l, CNNB_KIND_MODEL, "fixture_newer", NULL, NULL, err,
                                    sizeof err),
                   CNNB_ENOTFOUND);
  free(log);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(missing_install_dir_is_silent) {
  cnnb_loader *l = isolated_loader();
  ck_assert_int_eq(cnnb_loader_set_install_dir(l, "/nonexistent/cnnbench/plugins"), CNNB_OK);
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, NULL, err, sizeof err);
  char *log = capture_end();
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_str_eq(log, "");
  ck_assert_uint_eq(cnnb_loader_num_accepted(l) + cnnb_loader_num_rejected(l), 0);
  free(log);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(default_install_dir_is_the_build_tree) {
  const char *plugin_dir = getenv("CNNB_PLUGIN_DIR");
  ck_assert_ptr_nonnull(plugin_dir);
  cnnb_loader *l = cnnb_loader_create(NULL);
  ck_assert_ptr_nonnull(l);
  ck_assert_ptr_nonnull(cnnb_loader_install_dir(l));
  ck_assert_str_eq(cnnb_loader_install_dir(l), plugin_dir);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- --list_plugins ------------------------------------------------------------------ */

/* Column of `word` in the first line of `text` that contains `row` (-1: none). */
static long column_of(const char *text, const char *row, const char *word) {
  const char *at = strstr(text, row);
  if (!at) return -1;
  const char *start = at;
  while (start > text && start[-1] != '\n') start--;
  const char *end = strchr(at, '\n');
  const char *w = strstr(start, word);
  if (!w || (end && w > end)) return -1;
  return (long)(w - start);
}

START_TEST(list_plugins_shows_accepted_and_rejected) {
  const char *files[] = {"libfixture_abi99.so", NULL};
  char dir[64];
  make_dir(dir, sizeof dir, files);
  cnnb_loader *l = isolated_loader();
  setenv("CNNB_PLUGIN_PATH", dir, 1);
  char list[PATH_MAX * 3];
  snprintf(list, sizeof list, "%s:%s", fixture("libfixture_strategy.so"),
           fixture("libfixture_good.so"));
  capture_begin();
  cnnb_status st = cnnb_loader_discover(l, list, err, sizeof err);
  free(capture_end());
  ck_assert_int_eq(st, CNNB_OK);

  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(out);
  cnnb_loader_print(l, out);
  fclose(out);
  fputs(text, stdout);
  ck_assert_contains(text, "Plugins (2):");
  ck_assert_contains(text, "KIND");
  ck_assert_contains(text, "NAMES");
  ck_assert_contains(text, fixture("libfixture_good.so"));
  ck_assert_contains(text, fixture("libfixture_strategy.so"));
  ck_assert_contains(text, "Rejected (1):");
  ck_assert_contains(text, "built for cnnbench ABI 99.0, this host speaks 1.x");
  ck_assert_contains(text, dir);
  /* Models come before strategies, whatever the discovery order. */
  const char *model_row = strstr(text, "fixture_good");
  const char *strategy_row = strstr(text, "fixture_strategy");
  ck_assert(model_row && strategy_row && model_row < strategy_row);
  /* Aligned: each column starts where its header does. */
  long version_col = column_of(text, "KIND", "VERSION");
  ck_assert_int_gt(version_col, 0);
  ck_assert_int_eq(column_of(text, "fixture_good ", "1.0.0"), version_col);
  ck_assert_int_eq(column_of(text, "fixture_strategy ", "1.0.0"), version_col);
  long file_col = column_of(text, "KIND", "FILE");
  ck_assert_int_eq(column_of(text, "fixture_good ", "/"), file_col);
  char abi[16];
  snprintf(abi, sizeof abi, "%d.%d ", CNNB_ABI_MAJOR, CNNB_ABI_MINOR); /* fixture_good's */
  ck_assert_int_eq(column_of(text, "fixture_good ", abi), column_of(text, "KIND", "ABI"));
  long why_col = column_of(text, "FILE  ", "WHY");
  ck_assert_int_eq(column_of(text, "libfixture_abi99.so", "built for"), why_col);
  free(text);
  cnnb_loader_destroy(l);
}
END_TEST

START_TEST(list_plugins_with_nothing_found) {
  cnnb_loader *l = isolated_loader();
  ck_assert_int_eq(cnnb_loader_discover(l, NULL, err, sizeof err), CNNB_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  cnnb_loader_print(l, out);
  fclose(out);
  ck_assert_contains(text, "No plugins found.");
  ck_assert_msg(strstr(text, "Rejected") == NULL, "%s", text);
  free(text);
  cnnb_loader_destroy(l);
}
END_TEST

/* --list_plugins --list_format=json: what tools read instead of the table. */
START_TEST(list_plugins_as_json) {
  const char *files[] = {"libfixture_abi99.so", NULL};
  char dir[64];
  make_dir(dir, sizeof dir, files);
  cnnb_loader *l = isolated_loader();
  setenv("CNNB_PLUGIN_PATH", dir, 1);
  char list[PATH_MAX * 3];
  snprintf(list, sizeof list, "%s:%s", fixture("libfixture_strategy.so"),
           fixture("libfixture_good.so"));
  capture_begin();
  ck_assert_int_eq(cnnb_loader_discover(l, list, err, sizeof err), CNNB_OK);
  free(capture_end());
  cnnb_flags *flags = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
  cnnb_loader_register_flags(l, flags);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  ck_assert_int_eq(cnnb_loader_print_json(l, flags, out), CNNB_OK);
  fclose(out);
  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  ck_assert_msg(root != NULL, "not JSON (%s): %s", jerr.text, text);
  char abi[16];
  snprintf(abi, sizeof abi, "%d.%d", CNNB_ABI_MAJOR, CNNB_ABI_MINOR);
  ck_assert_str_eq(json_string_value(json_object_get(root, "abi")), abi);
  /* The core's flags with type, default and allowed values. */
  json_t *precision = NULL, *batch = NULL, *plugin_flag = NULL, *f;
  size_t i;
  json_array_foreach(json_object_get(root, "core_flags"), i, f) {
    const char *name = json_string_value(json_object_get(f, "name"));
    if (strcmp(name, "precision") == 0) precision = f;
    if (strcmp(name, "batch_size") == 0) batch = f;
    ck_assert_msg(strcmp(name, "fixture_good_depth") != 0, "a plugin flag among the core's");
  }
  ck_assert_ptr_nonnull(precision);
  ck_assert_str_eq(json_string_value(json_object_get(precision, "type")), "string");
  ck_assert_str_eq(json_string_value(json_object_get(precision, "default")), "fp32");
  json_t *allowed = json_object_get(precision, "allowed");
  ck_assert_uint_eq(json_array_size(allowed), 3);
  ck_assert_str_eq(json_string_value(json_array_get(allowed, 1)), "bf16");
  ck_assert_ptr_nonnull(batch);
  ck_assert_str_eq(json_string_value(json_object_get(batch, "type")), "int");
  ck_assert(json_is_integer(json_object_get(batch, "default")));
  ck_assert_ptr_null(json_object_get(batch, "allowed"));
  /* Plugins by kind, each with its own flags; the rejected file with why. */
  json_t *plugins = json_object_get(root, "plugins"), *p;
  ck_assert_uint_eq(json_array_size(plugins), 2);
  bool model = false, strategy = false;
  json_array_foreach(plugins, i, p) {
    const char *kind = json_string_value(json_object_get(p, "kind"));
    const char *name = json_string_value(json_object_get(p, "name"));
    ck_assert(json_is_true(json_object_get(p, "available")));
    if (strcmp(kind, "model") == 0 && strcmp(name, "fixture_good") == 0) {
      model = true;
      ck_assert_str_eq(json_string_value(json_array_get(json_object_get(p, "names"), 0)),
                       "fixture_good");
      ck_assert_str_eq(json_string_value(json_object_get(p, "path")),
                       fixture("libfixture_good.so"));
      plugin_flag = json_array_get(json_object_get(p, "flags"), 0);
    }
    if (strcmp(kind, "strategy") == 0) strategy = true;
  }
  ck_assert(model && strategy);
  ck_assert_ptr_nonnull(plugin_flag);
  ck_assert_str_eq(json_string_value(json_object_get(plugin_flag, "name")), "fixture_good_depth");
  ck_assert_str_eq(json_string_value(json_object_get(plugin_flag, "group")), "fixture_good");
  json_t *rejected = json_object_get(root, "rejected");
  ck_assert_uint_eq(json_array_size(rejected), 1);
  ck_assert_contains(json_string_value(json_object_get(json_array_get(rejected, 0), "why")),
                     "ABI 99.0");
  json_decref(root);
  free(text);
  cnnb_flags_destroy(flags);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- plugin flags ------------------------------------------------------------------- */

START_TEST(plugin_flags_are_registered_under_the_plugin) {
  cnnb_loader *l = isolated_loader();
  char list[PATH_MAX * 2];
  snprintf(list, sizeof list, "%s:%s", fixture("libfixture_good.so"),
           fixture("libfixture_strategy.so"));
  ck_assert_int_eq(cnnb_loader_discover(l, list, err, sizeof err), CNNB_OK);
  cnnb_flags *flags = cnnb_flags_create();
  ck_assert_ptr_nonnull(flags);
  cnnb_loader_register_flags(l, flags);
  char *argv[] = {"cnnbench", "--fixture_good_depth=3", NULL};
  ck_assert_int_eq(cnnb_flags_parse(flags, 2, argv, err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_int(flags, "fixture_good_depth"), 3);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  cnnb_flags_print_help(flags, out);
  fclose(out);
  ck_assert_contains(text, "fixture_good");
  ck_assert_contains(text, "--fixture_good_depth");
  free(text);
  cnnb_flags_destroy(flags);
  cnnb_loader_destroy(l);
}
END_TEST

/* ---- slot tags: the headers and the loader agree ---------------------------------- */

/* Reads sdk/include/cnnb/<file> and, inside `struct_name`'s braces, pairs every function
 * pointer "(*name)" with the tag line before it. Fails the test for a slot without both
 * a [required]/[optional] tag and a thread tag. Fills required[] with the [required]
 * ones, in order; returns how many slots there are. */
static size_t read_slot_tags(const char *file, const char *struct_name, const char **required,
                             size_t *num_required, char *storage, size_t storage_size) {
  const char *src = getenv("CNNB_SOURCE_DIR");
  ck_assert_msg(src != NULL, "CNNB_SOURCE_DIR is not set (run through ctest)");
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/sdk/include/cnnb/%s", src, file);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot read %s", path);
  static char text[1 << 16];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = '\0';
  char open_marker[128];
  snprintf(open_marker, sizeof open_marker, "typedef struct %s {", struct_name);
  const char *p = strstr(text, open_marker);
  ck_assert_msg(p != NULL, "%s: no '%s'", file, open_marker);
  char close_marker[128];
  snprintf(close_marker, sizeof close_marker, "} %s;", struct_name);
  const char *end = strstr(p, close_marker);
  ck_assert_msg(end != NULL, "%s: no '%s'", file, close_marker);
  size_t slots = 0, used = 0;
  *num_required = 0;
  const char *tag = NULL; /* the latest [required]/[optional] since the last slot */
  bool thread = false;
  for (const char *q = p; q < end; q++) {
    if (strncmp(q, "[required]", 10) == 0 || strncmp(q, "[optional]", 10) == 0) {
      tag = q;
      thread = false;
    } else if (tag &&
               (strncmp(q, "[main-thread]", 13) == 0 || strncmp(q, "[step-thread]", 13) == 0 ||
                strncmp(q, "[input-thread]", 14) == 0 || strncmp(q, "[any-thread]", 12) == 0)) {
      thread = true;
    } else if (strncmp(q, "(*", 2) == 0) {
      const char *name = q + 2;
      size_t n = strcspn(name, ")");
      ck_assert_msg(tag != NULL, "%s: slot %.*s of %s has no [required]/[optional] tag", file,
                    (int)n, name, struct_name);
      ck_assert_msg(thread, "%s: slot %.*s of %s has no thread tag", file, (int)n, name,
                    struct_name);
      if (strncmp(tag, "[required]", 10) == 0) {
        ck_assert(used + n + 1 <= storage_size);
        memcpy(storage + used, name, n);
        storage[used + n] = '\0';
        required[(*num_required)++] = storage + used;
        used += n + 1;
      }
      slots++;
      tag = NULL;
    }
  }
  return slots;
}

START_TEST(slot_tags_match_the_loader) {
  static const struct {
    uint32_t kind;
    const char *file, *vtable;
  } kinds[] = {{CNNB_KIND_MODEL, "model.h", "cnnb_model_vtable"},
               {CNNB_KIND_DEVICE, "device.h", "cnnb_device_vtable"},
               {CNNB_KIND_STRATEGY, "strategy.h", "cnnb_strategy_vtable"},
               {CNNB_KIND_DATASOURCE, "datasource.h", "cnnb_datasource_vtable"}};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    const char *tagged[64], *loader[64];
    size_t num_tagged = 0;
    char storage[2048];
    size_t slots = read_slot_tags(kinds[k].file, kinds[k].vtable, tagged, &num_tagged, storage,
                                  sizeof storage);
    ck_assert_msg(slots >= 3, "%s: only %zu slots found", kinds[k].vtable, slots);
    size_t num_loader = cnnb_loader_required_slots(kinds[k].kind, loader, 64);
    ck_assert_msg(num_loader == num_tagged,
                  "%s: the header tags %zu slots [required], the loader checks %zu",
                  kinds[k].vtable, num_tagged, num_loader);
    for (size_t i = 0; i < num_tagged; i++)
      ck_assert_msg(strcmp(tagged[i], loader[i]) == 0,
                    "%s: slot %zu is %s in the header, %s in the loader", kinds[k].vtable, i,
                    tagged[i], loader[i]);
  }
  /* The descriptor's function pointers are tagged too (both optional). */
  const char *tagged[8];
  size_t num_tagged = 0;
  char storage[256];
  ck_assert_uint_eq(read_slot_tags("abi.h", "cnnb_plugin", tagged, &num_tagged, storage,
                                   sizeof storage),
                    2);
  ck_assert_uint_eq(num_tagged, 0);
}
END_TEST

int main(void) {
  setup_messages();
  Suite *s = suite_create("loader");
  TCase *tc = tcase_create("loader");
  tcase_add_checked_fixture(tc, NULL, remove_made_dirs);
  tcase_add_test(tc, good_plugin_loads_and_resolves);
  tcase_add_test(tc, good_plugin_builds_a_graph);
  tcase_add_loop_test(tc, explicit_bad_plugin_is_an_error, 0, NUM_BAD);
  tcase_add_test(tc, discovered_bad_plugins_only_warn);
  tcase_add_test(tc, discovered_then_explicit_is_an_error);
  tcase_add_test(tc, explicit_missing_file_and_directory);
  tcase_add_test(tc, newer_minor_is_accepted);
  tcase_add_test(tc, datasources_describe_the_datasets);
  tcase_add_test(tc, wrong_kind_names_the_kind_and_file);
  tcase_add_test(tc, unknown_name_lists_the_known_ones);
  tcase_add_test(tc, kind_flags);
  tcase_add_test(tc, duplicate_name_first_on_path_wins);
  tcase_add_test(tc, partly_shadowed_plugin_keeps_its_other_names);
  tcase_add_test(tc, install_dir_comes_before_plugin_path_and_explicit);
  tcase_add_test(tc, explicit_duplicate_is_an_error);
  tcase_add_test(tc, plugin_path_entries_and_files);
  tcase_add_test(tc, missing_install_dir_is_silent);
  tcase_add_test(tc, default_install_dir_is_the_build_tree);
  tcase_add_test(tc, list_plugins_shows_accepted_and_rejected);
  tcase_add_test(tc, list_plugins_with_nothing_found);
  tcase_add_test(tc, list_plugins_as_json);
  tcase_add_test(tc, plugin_flags_are_registered_under_the_plugin);
  tcase_add_test(tc, slot_tags_match_the_loader);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
