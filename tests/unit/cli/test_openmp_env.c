/* test_openmp_env.c — tf's --mkl settings as GNU OpenMP's variables (cli/openmp_env.h):
 * tf's defaults, each KMP_AFFINITY type, a blocktime from the measured spin rate, and the
 * refusals of what libgomp cannot express. (cli_tf_flags checks that libgomp itself reads
 * them, through its OMP_DISPLAY_ENV print.) */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cli/openmp_env.h"

/* The value the translation gives `name`: "-" when it unsets it, NULL when it leaves it. */
static const char *value_of(const cnnb_openmp_env *env, const char *name) {
  for (size_t i = 0; i < env->n; i++)
    if (strcmp(env->v[i].name, name) == 0) return env->v[i].unset ? "-" : env->v[i].value;
  return NULL;
}

static cnnb_openmp_env translate(long long blocktime, const char *affinity, long long settings,
                                 long long threads) {
  cnnb_openmp_env env;
  char err[512] = "";
  cnnb_status st = cnnb_openmp_env_from_tf(blocktime, affinity, settings, threads, 250000.0, &env,
                                           err, sizeof err);
  ck_assert_msg(st == CNNB_OK, "%s: %s", affinity, err);
  return env;
}

static void refused(long long blocktime, const char *affinity, const char *want) {
  cnnb_openmp_env env;
  char err[512] = "";
  cnnb_status st = cnnb_openmp_env_from_tf(blocktime, affinity, 1, 0, 250000.0, &env, err,
                                           sizeof err);
  ck_assert_int_eq(st, CNNB_EINVAL);
  ck_assert_msg(strstr(err, want) != NULL, "'%s': want '%s' in '%s'", affinity, want, err);
}

START_TEST(tf_defaults) {
  /* tf's --kmp_blocktime=0, --kmp_affinity=granularity=fine,verbose,compact,1,0, --kmp_settings=1
   */
  cnnb_openmp_env env = translate(0, "granularity=fine,verbose,compact,1,0", 1, 0);
  ck_assert_str_eq(value_of(&env, "OMP_WAIT_POLICY"), "PASSIVE");
  ck_assert_str_eq(value_of(&env, "GOMP_SPINCOUNT"), "0");
  ck_assert_str_eq(value_of(&env, "OMP_PROC_BIND"), "close");
  ck_assert_str_eq(value_of(&env, "OMP_PLACES"), "cores"); /* permute 1: cores first */
  ck_assert_str_eq(value_of(&env, "GOMP_CPU_AFFINITY"), "-");
  ck_assert_str_eq(value_of(&env, "OMP_DISPLAY_AFFINITY"), "TRUE");
  ck_assert_str_eq(value_of(&env, "OMP_DISPLAY_ENV"), "VERBOSE");
  ck_assert_ptr_null(value_of(&env, "OMP_NUM_THREADS")); /* --num_intra_threads=0: left be */
}
END_TEST

START_TEST(types_and_modifiers) {
  cnnb_openmp_env env = translate(0, "compact", 0, 2);
  ck_assert_str_eq(value_of(&env, "OMP_PROC_BIND"), "close");
  ck_assert_str_eq(value_of(&env, "OMP_PLACES"), "threads");
  ck_assert_str_eq(value_of(&env, "OMP_DISPLAY_AFFINITY"), "-");
  ck_assert_str_eq(value_of(&env, "OMP_DISPLAY_ENV"), "-");
  ck_assert_str_eq(value_of(&env, "OMP_NUM_THREADS"), "2");
  env = translate(0, "granularity=core,scatter", 1, 0);
  ck_assert_str_eq(value_of(&env, "OMP_PROC_BIND"), "spread");
  ck_assert_str_eq(value_of(&env, "OMP_PLACES"), "cores");
  env = translate(0, "noverbose,warnings,balanced,0", 1, 0);
  ck_assert_str_eq(value_of(&env, "OMP_PROC_BIND"), "spread");
  ck_assert_str_eq(value_of(&env, "OMP_PLACES"), "threads");
  for (size_t k = 0; k < 3; k++) {
    static const char *const off[] = {"none", "disabled", "granularity=fine,verbose"};
    env = translate(0, off[k], 1, 0);
    ck_assert_str_eq(value_of(&env, "OMP_PROC_BIND"), "false");
    ck_assert_str_eq(value_of(&env, "OMP_PLACES"), "-");
  }
  env = translate(0, "granularity=fine,proclist=[0,2,4-7],explicit", 1, 0);
  ck_assert_str_eq(value_of(&env, "GOMP_CPU_AFFINITY"), "0 2 4-7");
  ck_assert_str_eq(value_of(&env, "OMP_PROC_BIND"), "-");
}
END_TEST

START_TEST(blocktime_as_spins) {
  /* 250000 spins a millisecond (the test's rate): 3 ms are 750000 spins. */
  cnnb_openmp_env env = translate(3, "compact", 1, 0);
  ck_assert_str_eq(value_of(&env, "GOMP_SPINCOUNT"), "750000");
  ck_assert_str_eq(value_of(&env, "OMP_WAIT_POLICY"), "-");
  /* The measured rate is positive and finite (a pause a turn: between 1e3 and 1e9 a ms). */
  double rate = cnnb_openmp_spins_per_ms();
  ck_assert_msg(rate > 1e3 && rate < 1e9, "spins per ms %g", rate);
}
END_TEST

START_TEST(refusals) {
  refused(-1, "compact", "--kmp_blocktime=-1");
  refused(0, "compact,1,2", "an offset (2) has no GNU OpenMP spelling");
  refused(0, "explicit", "explicit needs proclist");
  refused(0, "proclist=[{0,1},2],explicit", "only processor numbers and ranges");
  refused(0, "compact,scatter", "two types");
  refused(0, "granularity=socket,compact", "granularity=socket");
  refused(0, "1,compact", "a number comes after the type");
  refused(0, "logical", "'logical' is not a KMP_AFFINITY word");
}
END_TEST

int main(void) {
  Suite *s = suite_create("openmp_env");
  TCase *tc = tcase_create("openmp_env");
  tcase_add_test(tc, tf_defaults);
  tcase_add_test(tc, types_and_modifiers);
  tcase_add_test(tc, blocktime_as_spins);
  tcase_add_test(tc, refusals);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
