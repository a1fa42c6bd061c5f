/* test_flags.c — the flag table: both spellings of values, bools (--x, --x=false, --nox),
 * errors that name the flag (unknown with "did you mean", bad int/float/choice, missing
 * value, stray arguments), the repeatable --plugin, plugin groups in --help, refused
 * duplicate declarations, getters through a ctx, walking every flag, and --flagfile
 * (absl's convention: comments, nesting with a depth limit, later flags win, errors that
 * name the file and line), and what the ranks of a job compare (flags marked per-rank
 * left out, one spelling per value). */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags/flags.h"
#include "base/names.h"
#include "config/core_flags.h"

static cnnb_flags *flags;
static char err[512];

static void setup(void) {
  flags = cnnb_flags_create();
  ck_assert_ptr_nonnull(flags);
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
  err[0] = '\0';
}

static void teardown(void) { cnnb_flags_destroy(flags); }

/* Parses a space-separated command line (argv[0] is supplied). */
static cnnb_status parse(const char *line) {
  char buf[1024];
  char *argv[64] = {"cnnbench"};
  int argc = 1;
  snprintf(buf, sizeof buf, "%s", line);
  for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
  return cnnb_flags_parse(flags, argc, argv, err, sizeof err);
}

START_TEST(defaults_follow_tf_cnn_benchmarks) {
  ck_assert_str_eq(cnnb_flags_string(flags, "model"), "trivial");
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 0);
  ck_assert_int_eq(cnnb_flags_int(flags, "num_batches"), 100);
  ck_assert_int_eq(cnnb_flags_int(flags, "display_every"), 10);
  ck_assert_int_eq(cnnb_flags_int(flags, "fp16_inc_loss_scale_every_n"), 1000);
  ck_assert_int_eq(cnnb_flags_int(flags, "seed"), 1234);
  ck_assert_double_eq_tol(cnnb_flags_float(flags, "momentum"), 0.9, 1e-12);
  ck_assert_double_eq_tol(cnnb_flags_float(flags, "weight_decay"), 4e-5, 1e-15);
  ck_assert_double_eq_tol(cnnb_flags_float(flags, "adam_epsilon"), 1e-8, 1e-20);
  ck_assert_double_eq_tol(cnnb_flags_float(flags, "rmsprop_epsilon"), 1.0, 1e-12);
  ck_assert_str_eq(cnnb_flags_string(flags, "optimizer"), "sgd");
  ck_assert_str_eq(cnnb_flags_string(flags, "precision"), "fp32");
  ck_assert_str_eq(cnnb_flags_string(flags, "data_format"), "NCHW");
  ck_assert_str_eq(cnnb_flags_string(flags, "device"), "cpu");
  ck_assert_str_eq(cnnb_flags_string(flags, "plugin"), "");
  ck_assert(!cnnb_flags_bool(flags, "forward_only"));
  ck_assert(!cnnb_flags_is_set(flags, "model"));
}
END_TEST

START_TEST(values_in_both_spellings) {
  ck_assert_int_eq(parse("--batch_size=32 --num_batches 7 -model=resnet50 --momentum 0.5 "
                         "--num_warmup_batches -3 --data_dir=/d"),
                   CNNB_OK);
  ck_assert_str_eq(err, "");
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 32);
  ck_assert_int_eq(cnnb_flags_int(flags, "num_batches"), 7);
  ck_assert_int_eq(cnnb_flags_int(flags, "num_warmup_batches"), -3);
  ck_assert_str_eq(cnnb_flags_string(flags, "model"), "resnet50");
  ck_assert_str_eq(cnnb_flags_string(flags, "data_dir"), "/d");
  ck_assert_double_eq_tol(cnnb_flags_float(flags, "momentum"), 0.5, 1e-12);
  ck_assert(cnnb_flags_is_set(flags, "model"));
  ck_assert(!cnnb_flags_is_set(flags, "optimizer"));
  /* A value that is itself '='-bearing stays whole. */
  ck_assert_int_eq(parse("--all_reduce_spec=pscpu:32k:xring"), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_string(flags, "all_reduce_spec"), "pscpu:32k:xring");
}
END_TEST

START_TEST(bools_tf_style) {
  ck_assert_int_eq(parse("--forward_only --eval=true --print_training_accuracy=1"), CNNB_OK);
  ck_assert(cnnb_flags_bool(flags, "forward_only"));
  ck_assert(cnnb_flags_bool(flags, "eval"));
  ck_assert(cnnb_flags_bool(flags, "print_training_accuracy"));
  ck_assert_int_eq(parse("--noforward_only --eval=false --print_training_accuracy=False"), CNNB_OK);
  ck_assert(!cnnb_flags_bool(flags, "forward_only"));
  ck_assert(cnnb_flags_is_set(flags, "forward_only"));
  ck_assert(!cnnb_flags_bool(flags, "eval"));
  ck_assert(!cnnb_flags_bool(flags, "print_training_accuracy"));
  /* A bare bool never swallows the next argument. */
  ck_assert_int_eq(parse("--use_fp16 --model=x"), CNNB_OK);
  ck_assert(cnnb_flags_bool(flags, "use_fp16"));
  ck_assert_str_eq(cnnb_flags_string(flags, "model"), "x");

  ck_assert_int_eq(parse("--eval=maybe"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --eval: 'maybe' is not a boolean (use true or false)");
  ck_assert_int_eq(parse("--noeval=true"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "flag --noeval takes no value"));
  /* --no only negates bools. */
  ck_assert_int_eq(parse("--nomodel"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "unknown flag --nomodel"));
}
END_TEST

START_TEST(unknown_flag_did_you_mean) {
  ck_assert_int_eq(parse("--batchsize=64"), CNNB_EINVAL);
  ck_assert_str_eq(err, "unknown flag --batchsize (did you mean --batch_size?)");
  ck_assert_int_eq(parse("--num_batchs 3"), CNNB_EINVAL);
  ck_assert_str_eq(err, "unknown flag --num_batchs (did you mean --num_batches?)");
  ck_assert_int_eq(parse("--noforwad_only"), CNNB_EINVAL);
  ck_assert_str_eq(err, "unknown flag --noforwad_only (did you mean --noforward_only?)");
  ck_assert_int_eq(parse("--qqqqqqqqqq=1"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "unknown flag --qqqqqqqqqq"));
  ck_assert_ptr_null(strstr(err, "did you mean"));
}
END_TEST

START_TEST(bad_values_name_the_flag) {
  ck_assert_int_eq(parse("--batch_size=abc"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --batch_size: 'abc' is not an integer");
  ck_assert_int_eq(parse("--batch_size 12x"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --batch_size: '12x' is not an integer");
  ck_assert_int_eq(parse("--batch_size=1.5"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --batch_size: '1.5' is not an integer");
  ck_assert_int_eq(parse("--num_batches=99999999999999999999"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --num_batches: '99999999999999999999' is out of range for a 64-bit "
                        "integer");
  ck_assert_int_eq(parse("--momentum=fast"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --momentum: 'fast' is not a number");
  ck_assert_int_eq(parse("--momentum=1e999"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "flag --momentum: '1e999' is out of range"));
  ck_assert_int_eq(parse("--momentum=nan"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "flag --momentum"));
  ck_assert_int_eq(parse("--optimizer=adamw"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --optimizer: 'adamw' is not one of sgd, momentum, rmsprop, adam "
                        "(did you mean adam?)");
  ck_assert_int_eq(parse("--precision=int8"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "flag --precision: 'int8' is not one of fp32, bf16, fp16"));
  ck_assert_int_eq(parse("--log_level=verbose"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "error, warn, info, debug"));
  /* The failed values left the earlier ones alone. */
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 0);
  ck_assert_str_eq(cnnb_flags_string(flags, "optimizer"), "sgd");
}
END_TEST

START_TEST(missing_value_and_strays) {
  ck_assert_int_eq(parse("--num_batches"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --num_batches: missing value (write --num_batches=VALUE)");
  ck_assert_int_eq(parse("--data_dir --model=x"), CNNB_EINVAL);
  ck_assert_str_eq(err, "flag --data_dir: missing value (write --data_dir=VALUE)");
  ck_assert_int_eq(parse("--model=x resnet50"), CNNB_EINVAL);
  ck_assert_str_eq(err, "unexpected argument 'resnet50': cnnbench takes only flags, written "
                        "--name=value");
  ck_assert_int_eq(parse("foo bar --model=x"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "unexpected arguments 'foo', 'bar'"));
  ck_assert_int_eq(parse("--model=x -- extra"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "'extra'"));
  ck_assert_int_eq(parse("--model=y --"), CNNB_OK);
}
END_TEST

START_TEST(repeatable_plugin_flag) {
  ck_assert_int_eq(parse("--plugin=./a.so --plugin /x/b.so --model=m --plugin=c.so"), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_string(flags, "plugin"), "./a.so:/x/b.so:c.so");
  ck_assert(cnnb_flags_is_set(flags, "plugin"));
  /* Other strings keep the last value, as absl does. */
  ck_assert_int_eq(parse("--model=a --model=b"), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_string(flags, "model"), "b");
}
END_TEST

START_TEST(alias_and_set) {
  ck_assert_int_eq(parse("--tf_random_seed=7"), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_int(flags, "seed"), 7);
  ck_assert_int_eq(cnnb_flags_set(flags, "batch_size", "16", err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 16);
  ck_assert_int_eq(cnnb_flags_set(flags, "batch_sise", "16", err, sizeof err), CNNB_EINVAL);
  ck_assert_str_eq(err, "unknown flag --batch_sise (did you mean --batch_size?)");
  ck_assert_int_eq(cnnb_flags_alias(flags, "model", "seed"), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flags_alias(flags, "x", "no_such_flag"), CNNB_EINVAL);
}
END_TEST

/* Where `needle` starts in `text`, or -1. */
static long offset_of(const char *text, const char *needle) {
  const char *at = strstr(text, needle);
  return at ? (long)(at - text) : -1;
}

/* --help into a memory stream; the caller frees *text. */
static void help_text(char **text) {
  size_t size = 0;
  FILE *out = open_memstream(text, &size);
  ck_assert_ptr_nonnull(out);
  cnnb_flags_print_help(flags, out);
  fclose(out);
}

START_TEST(plugin_flags_in_help) {
  cnnb_flag_registry *nccl = cnnb_flags_registry(flags, "nccl");
  ck_assert_ptr_nonnull(nccl);
  ck_assert_int_eq(cnnb_flag_declare(nccl, "nccl_streams", CNNB_FLAG_INT, "2",
                                     "NCCL streams per device."),
                   CNNB_OK);
  ck_assert_int_eq(cnnb_flag_declare(nccl, "nccl_fuse", CNNB_FLAG_BOOL, NULL, NULL), CNNB_OK);
  ck_assert_ptr_eq(cnnb_flags_registry(flags, "nccl"), nccl);
  char *text = NULL;
  help_text(&text);
  long general = offset_of(text, "\nGeneral:\n");
  long model = offset_of(text, "\nModel and data:\n");
  long devices = offset_of(text, "\nDevices:\n");
  long optim = offset_of(text, "\nOptimization:\n");
  long plugin = offset_of(text, "\nPlugin nccl:\n");
  long streams = offset_of(text,
                           "  --nccl_streams  (int, default 2)\n      NCCL streams per device.\n");
  ck_assert_int_ge(general, 0);
  ck_assert_int_ge(streams, 0);
  ck_assert(general < model && model < devices && devices < optim && optim < plugin);
  ck_assert(plugin < streams);
  ck_assert_ptr_nonnull(strstr(text, "  --[no]nccl_fuse  (bool, default false)\n"));
  ck_assert_ptr_nonnull(strstr(text, "  --batch_size  (int, default 0)\n"));
  ck_assert_ptr_nonnull(strstr(text,
                               "  --optimizer  (sgd|momentum|rmsprop|adam, default \"sgd\")\n"));
  ck_assert_ptr_nonnull(strstr(text, "  --seed, --tf_random_seed  (int, default 1234)\n"));
  ck_assert_ptr_nonnull(strstr(text, "  --plugin  (string, repeatable: values joined by ':')\n"));
  /* Help text is wrapped: no line runs past 80 columns. */
  for (const char *line = text; *line;) {
    size_t len = strcspn(line, "\n");
    ck_assert_msg(len <= 80, "help line of %zu columns: %.*s", len, (int)len, line);
    line += len + (line[len] == '\n');
  }
  free(text);
  /* The plugin's flag parses like any other. */
  ck_assert_int_eq(parse("--nccl_streams=4 --nccl_fuse"), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_int(flags, "nccl_streams"), 4);
  ck_assert(cnnb_flags_bool(flags, "nccl_fuse"));
}
END_TEST

START_TEST(duplicate_and_bad_declarations_refused) {
  cnnb_flag_registry *a = cnnb_flags_registry(flags, "alpha");
  cnnb_flag_registry *b = cnnb_flags_registry(flags, "beta");
  ck_assert_int_eq(cnnb_flag_declare(a, "batch_size", CNNB_FLAG_INT, "1", "mine"), CNNB_EINVAL);
  ck_assert_str_eq(cnnb_flags_error(flags),
                   "cannot declare flag --batch_size: the core (Model and data) already "
                   "declares it");
  ck_assert_int_eq(cnnb_flag_declare(a, "alpha_x", CNNB_FLAG_INT, "1", ""), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_error(flags), "");
  ck_assert_int_eq(cnnb_flag_declare(b, "alpha_x", CNNB_FLAG_FLOAT, "1", ""), CNNB_EINVAL);
  ck_assert_str_eq(cnnb_flags_error(flags),
                   "cannot declare flag --alpha_x: plugin alpha already declares it");
  ck_assert_int_eq(cnnb_flag_declare(b, "tf_random_seed", CNNB_FLAG_INT, "1", ""), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flag_declare(b, "beta_n", CNNB_FLAG_INT, "two", ""), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_flags_error(flags), "'two' is not an integer"));
  ck_assert_int_eq(cnnb_flag_declare(b, "--beta", CNNB_FLAG_INT, "1", ""), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flag_declare(b, "beta_t", (cnnb_flag_type)9, "1", ""), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flag_declare(NULL, "beta_u", CNNB_FLAG_INT, "1", ""), CNNB_EINVAL);
  static const char *const none[] = {NULL};
  ck_assert_int_eq(cnnb_flags_declare_choice(b, "beta_c", NULL, none, ""), CNNB_EINVAL);
  static const char *const ab[] = {"a", "b", NULL};
  ck_assert_int_eq(cnnb_flags_declare_choice(b, "beta_d", "c", ab, ""), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flags_declare_choice(b, "beta_e", NULL, ab, ""), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_string(flags, "beta_e"), "a");
  /* Refused declarations left nothing behind. */
  ck_assert_int_eq(parse("--beta_n=3"), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 0);
}
END_TEST

START_TEST(getters_through_ctx) {
  ck_assert_int_eq(parse("--batch_size=8 --model=lenet --use_fp16 --init_learning_rate=0.1"),
                   CNNB_OK);
  cnnb_ctx *ctx = cnnb_ctx_create("cpu", flags);
  ck_assert_ptr_nonnull(ctx);
  ck_assert_int_eq(cnnb_flag_int(ctx, "batch_size"), 8);
  ck_assert_str_eq(cnnb_flag_string(ctx, "model"), "lenet");
  ck_assert(cnnb_flag_bool(ctx, "use_fp16"));
  ck_assert_double_eq_tol(cnnb_flag_float(ctx, "init_learning_rate"), 0.1, 1e-12);
  ck_assert(cnnb_flag_is_set(ctx, "init_learning_rate"));
  ck_assert(!cnnb_flag_is_set(ctx, "momentum"));
  /* Undeclared or mistyped reads give zeros (and log). */
  ck_assert_int_eq(cnnb_flag_int(ctx, "no_such_flag"), 0);
  ck_assert_str_eq(cnnb_flag_string(ctx, "no_such_flag"), "");
  ck_assert_int_eq(cnnb_flag_int(ctx, "model"), 0);
  ck_assert(!cnnb_flag_bool(ctx, "batch_size"));
  ck_assert(!cnnb_flag_is_set(ctx, "no_such_flag"));
  /* Whether a flag exists at all, quietly: a harness's ctx has none. */
  ck_assert(cnnb_flag_declared(ctx, "batch_size"));
  ck_assert(cnnb_flag_declared(ctx, "tf_random_seed")); /* an alias */
  ck_assert(!cnnb_flag_declared(ctx, "no_such_flag"));
  ck_assert(!cnnb_flag_declared(ctx, NULL));
  cnnb_ctx_destroy(ctx);

  cnnb_ctx *bare = cnnb_ctx_create("test", NULL);
  ck_assert_int_eq(cnnb_flag_int(bare, "batch_size"), 0);
  ck_assert_double_eq(cnnb_flag_float(bare, "momentum"), 0.0);
  ck_assert(!cnnb_flag_bool(bare, "eval"));
  ck_assert_str_eq(cnnb_flag_string(bare, "model"), "");
  ck_assert(!cnnb_flag_is_set(bare, "model"));
  ck_assert(!cnnb_flag_declared(bare, "model"));
  cnnb_ctx_destroy(bare);
}
END_TEST

START_TEST(walk_every_flag) {
  cnnb_flag_registry *plugin = cnnb_flags_registry(flags, "cpu");
  ck_assert_int_eq(cnnb_flag_declare(plugin, "cpu_threads", CNNB_FLAG_INT, "2", ""), CNNB_OK);
  ck_assert_int_eq(parse("--batch_size=8 --cpu_threads=3 --use_fp16"), CNNB_OK);
  /* The ctx reaches the table its getters read. */
  cnnb_ctx *ctx = cnnb_ctx_create("cpu", flags);
  ck_assert_ptr_eq(cnnb_ctx_flags(ctx), flags);
  cnnb_ctx_destroy(ctx);
  size_t n = cnnb_flags_count(flags);
  ck_assert_uint_gt(n, 10);
  bool batch = false, threads = false, model = false;
  cnnb_flag_view f;
  for (size_t i = 0; i < n; i++) {
    ck_assert(cnnb_flags_at(flags, i, &f));
    ck_assert_ptr_nonnull(f.name);
    ck_assert_ptr_nonnull(f.group);
    if (strcmp(f.name, "batch_size") == 0) {
      batch = true;
      ck_assert(!f.plugin && f.is_set && f.type == CNNB_FLAG_INT && f.i == 8);
    } else if (strcmp(f.name, "cpu_threads") == 0) {
      threads = true;
      ck_assert(f.plugin && f.is_set && f.i == 3);
      ck_assert_str_eq(f.group, "cpu");
      ck_assert_uint_eq(i, n - 1); /* declared last */
    } else if (strcmp(f.name, "model") == 0) {
      model = true;
      ck_assert(!f.is_set && f.type == CNNB_FLAG_STRING);
      ck_assert_str_eq(f.s, "trivial");
    } else if (strcmp(f.name, "use_fp16") == 0) {
      ck_assert(f.is_set && f.type == CNNB_FLAG_BOOL && f.b);
    }
  }
  ck_assert(batch && threads && model);
  ck_assert(!cnnb_flags_at(flags, n, &f));
  ck_assert_uint_eq(cnnb_flags_count(NULL), 0);
}
END_TEST

START_TEST(edit_distance_known_values) {
  ck_assert_int_eq(cnnb_edit_distance("kitten", "sitting"), 3);
  ck_assert_int_eq(cnnb_edit_distance("", "abc"), 3);
  ck_assert_int_eq(cnnb_edit_distance("abc", ""), 3);
  ck_assert_int_eq(cnnb_edit_distance("batch_size", "batch_size"), 0);
  ck_assert_int_eq(cnnb_edit_distance("batchsize", "batch_size"), 1);
  ck_assert_int_eq(cnnb_edit_distance("resnet50", "resnet101"), 2);
  ck_assert_int_eq(cnnb_edit_distance(NULL, "ab"), 2);
  static const char *const models[] = {"alexnet", "resnet50", "resnet101", "inception3"};
  ck_assert_str_eq(cnnb_closest_name("resnet5", models, 4), "resnet50");
  ck_assert_str_eq(cnnb_closest_name("inceptionv3", models, 4), "inception3");
  ck_assert_ptr_null(cnnb_closest_name("vgg16", models, 4));
  ck_assert_ptr_null(cnnb_closest_name("x", models, 0));
}
END_TEST

/* Writes `text` to a fresh file under /tmp and returns its path (static buffer per slot). */
static const char *flagfile(int slot, const char *text) {
  static char paths[4][64];
  snprintf(paths[slot], sizeof paths[slot], "/tmp/test_flags_%d_%d.flags", (int)getpid(), slot);
  FILE *f = fopen(paths[slot], "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return paths[slot];
}

START_TEST(flagfile_reads_flags_and_later_ones_win) {
  const char *inner = flagfile(1, "--momentum=0.5\n");
  char text[512];
  snprintf(text, sizeof text,
           "# the winner of a search\n"
           "\n"
           "  --model=resnet20   \n"
           "// an absl comment\n"
           "--batch_size=64\r\n"
           "--use_fp16\n"
           "--flagfile=%s\n"
           "--num_batches=9\n",
           inner);
  const char *outer = flagfile(0, text);
  char line[256];
  snprintf(line, sizeof line, "--num_batches=3 --flagfile=%s --batch_size=32", outer);
  ck_assert_int_eq(parse(line), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_string(flags, "model"), "resnet20");
  ck_assert(cnnb_flags_is_set(flags, "model"));
  ck_assert(cnnb_flags_bool(flags, "use_fp16"));
  ck_assert_double_eq_tol(cnnb_flags_float(flags, "momentum"), 0.5, 1e-12); /* nested */
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 32); /* the command line after it */
  ck_assert_int_eq(cnnb_flags_int(flags, "num_batches"), 9); /* the file after the line */
  /* The spelling with a space works too, and the file is recorded. */
  snprintf(line, sizeof line, "--flagfile %s", inner);
  ck_assert_int_eq(parse(line), CNNB_OK);
  ck_assert_ptr_nonnull(strstr(cnnb_flags_string(flags, "flagfile"), "test_flags_"));
  unlink(inner);
  unlink(outer);
}
END_TEST

START_TEST(flagfile_errors_name_file_and_line) {
  char line[256], where[128];
  const char *bad = flagfile(0, "--model=lenet\n# fine\n--batch_sise=4\n");
  snprintf(line, sizeof line, "--flagfile=%s", bad);
  ck_assert_int_eq(parse(line), CNNB_EINVAL);
  snprintf(where, sizeof where, "%s:3: unknown flag --batch_sise (did you mean --batch_size?)",
           bad);
  ck_assert_str_eq(err, where);

  const char *stray = flagfile(1, "--model=lenet\nresnet50\n");
  snprintf(line, sizeof line, "--flagfile=%s", stray);
  ck_assert_int_eq(parse(line), CNNB_EINVAL);
  snprintf(where, sizeof where, "%s:2: 'resnet50' is not a flag", stray);
  ck_assert_ptr_nonnull(strstr(err, where));

  const char *value = flagfile(2, "--batch_size=many\n");
  snprintf(line, sizeof line, "--flagfile=%s", value);
  ck_assert_int_eq(parse(line), CNNB_EINVAL);
  snprintf(where, sizeof where, "%s:1: ", value);
  ck_assert_ptr_eq(strstr(err, where), err);
  ck_assert_ptr_nonnull(strstr(err, "--batch_size"));

  ck_assert_int_eq(parse("--flagfile=/nonexistent/x.flags"), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.flags: cannot open"));
  ck_assert_int_eq(parse("--flagfile="), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "missing value"));

  /* A file that names itself stops at the depth limit instead of recursing forever. */
  char self[128];
  snprintf(self, sizeof self, "/tmp/test_flags_%d_3.flags", (int)getpid());
  char text[192];
  snprintf(text, sizeof text, "--flagfile=%s\n", self);
  flagfile(3, text);
  snprintf(line, sizeof line, "--flagfile=%s", self);
  ck_assert_int_eq(parse(line), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "nested more than 8 deep"));

  /* The first, forgiving pass skips what it cannot read and keeps what it can. */
  const char *mixed = flagfile(2, "--plugin_flag_unknown=1\n--list_plugins\n");
  snprintf(line, sizeof line, "--flagfile=%s --flagfile=/nonexistent/y", mixed);
  char buf[256], *argv[4] = {"cnnbench", buf, "--flagfile=/nonexistent/y", NULL};
  snprintf(buf, sizeof buf, "--flagfile=%s", mixed);
  cnnb_flags_parse_known(flags, 3, argv);
  ck_assert(cnnb_flags_bool(flags, "list_plugins"));
  unlink(bad);
  unlink(stray);
  unlink(value);
  unlink(self);
  unlink(mixed);
}
END_TEST

/* The text ranks compare: one spelling per value, per-rank flags left out, and a plugin
 * may mark only its own flags per-rank. */
static char *agreement(void) {
  char *text = cnnb_flags_agreement_text(flags, NULL);
  ck_assert_ptr_nonnull(text);
  return text;
}

static void declare_alpha(void) {
  cnnb_flag_registry *alpha = cnnb_flags_registry(flags, "alpha");
  ck_assert_int_eq(cnnb_flag_declare(alpha, "alpha_file", CNNB_FLAG_STRING, "", NULL), CNNB_OK);
  ck_assert_int_eq(cnnb_flag_declare(alpha, "alpha_rate", CNNB_FLAG_FLOAT, "0.5", NULL), CNNB_OK);
  ck_assert_int_eq(cnnb_flag_mark_per_rank(alpha, "alpha_file"), CNNB_OK);
  /* Another component's flag, and one nobody declared, cannot be loosened. */
  ck_assert_int_eq(cnnb_flag_mark_per_rank(alpha, "init_learning_rate"), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_flag_mark_per_rank(alpha, "alpha_nothing"), CNNB_EINVAL);
}

START_TEST(agreement_text_compares_values_not_spellings) {
  declare_alpha();
  ck_assert_int_eq(parse("--init_learning_rate=0.10 --seed 7 --alpha_file=a --log_level=warn"),
                   CNNB_OK);
  char *first = agreement();
  ck_assert_ptr_nonnull(strstr(first, "\ninit_learning_rate\t0.1\n"));
  ck_assert_ptr_nonnull(strstr(first, "\nseed\t7\n"));
  ck_assert_ptr_nonnull(strstr(first, "\nalpha_rate\t0.5\n"));
  ck_assert_ptr_nonnull(strstr(first, "\nforward_only\tfalse\n"));
  ck_assert_ptr_null(strstr(first, "alpha_file"));
  ck_assert_ptr_null(strstr(first, "log_level"));
  ck_assert_ptr_null(strstr(first, "\ntrace_file\t"));
  /* The same values spelled otherwise, and other per-rank values: the same text. */
  cnnb_flags_destroy(flags);
  setup();
  declare_alpha();
  ck_assert_int_eq(parse("--init_learning_rate 1e-1 --tf_random_seed=7 --alpha_file=b "
                         "--alpha_rate=.5 --display_every=3"),
                   CNNB_OK);
  char *second = agreement();
  ck_assert_str_eq(first, second);
  /* A value that differs in its last digit does not agree. */
  ck_assert_int_eq(parse("--init_learning_rate=0.1000000001"), CNNB_OK);
  char *third = agreement();
  ck_assert_str_ne(first, third);
  ck_assert_ptr_nonnull(strstr(third, "\ninit_learning_rate\t0.1000000001\n"));
  free(first);
  free(second);
  free(third);
}
END_TEST

int main(void) {
  Suite *s = suite_create("flags");
  TCase *tc = tcase_create("flags");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, defaults_follow_tf_cnn_benchmarks);
  tcase_add_test(tc, values_in_both_spellings);
  tcase_add_test(tc, bools_tf_style);
  tcase_add_test(tc, unknown_flag_did_you_mean);
  tcase_add_test(tc, bad_values_name_the_flag);
  tcase_add_test(tc, missing_value_and_strays);
  tcase_add_test(tc, repeatable_plugin_flag);
  tcase_add_test(tc, alias_and_set);
  tcase_add_test(tc, plugin_flags_in_help);
  tcase_add_test(tc, duplicate_and_bad_declarations_refused);
  tcase_add_test(tc, getters_through_ctx);
  tcase_add_test(tc, walk_every_flag);
  tcase_add_test(tc, edit_distance_known_values);
  tcase_add_test(tc, flagfile_reads_flags_and_later_ones_win);
  tcase_add_test(tc, flagfile_errors_name_file_and_line);
  tcase_add_test(tc, agreement_text_compares_values_not_spellings);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
