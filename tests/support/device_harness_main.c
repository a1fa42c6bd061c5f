/* device_harness_main.c — the shared main() of the device suites (see device_harness.h).
 * Apart from device_harness.c because Check's header defines a fail() macro. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_harness.h"
#include "device_harness_internal.h"
#include "flags/flags.h"

int device_harness_main(const char *test, const char *device, Suite *(*make_suite)(void)) {
  char msg[2048];
  int rc = device_harness_init(device, msg, sizeof msg);
  if (rc == DEVICE_HARNESS_SKIP) {
    printf("%s: skipped: %s\n", test, msg);
    device_harness_fini();
    return DEVICE_HARNESS_SKIP;
  }
  if (rc != 0) {
    fprintf(stderr, "%s: device '%s': %s\n", test, device, msg);
    device_harness_fini();
    return 1;
  }
  device_harness_print(test, stdout);
  fflush(stdout);
  SRunner *sr = srunner_create(make_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  device_harness_fini();
  return failed != 0;
}

int device_harness_run(int argc, char **argv, const char *test, Suite *(*make_suite)(void)) {
  const char *env = getenv("CNNB_TEST_DEVICE");
  if (env && !*env) env = NULL;
  const char *device = argc > 1 && argv[1][0] ? argv[1] : env ? env : "cpu";
  if (env && strcmp(env, device) != 0) {
    printf("%s: skipped: CNNB_TEST_DEVICE=%s selects another device than this run's '%s' "
           "(run `%s %s` to test it directly)\n",
           test, env, device, argv[0], env);
    return DEVICE_HARNESS_SKIP;
  }
  return device_harness_main(test, device, make_suite);
}
