/* cpu_harness_main.c — the shared main() of the Check tests that need the cpu plugin.
 * Apart from cpu_harness.c because Check's header defines a fail() macro. */
#include <check.h>
#include <stdio.h>

#include "cpu_harness.h"
#include "host.h"

int cpu_harness_main(const char *test, cpu_harness *h, Suite *(*make_suite)(void)) {
  int rc = cpu_harness_load(h);
  if (rc == 1) {
    printf("%s: skipped: %s\n", test, h->error);
    return 0;
  }
  if (rc != 0) {
    fprintf(stderr, "%s: could not load the cpu device plugin: %s\n", test, h->error);
    return 1;
  }
  cnnb_log_set_level(CNNB_LOG_WARN);
  SRunner *sr = srunner_create(make_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cpu_harness_close(h);
  return failed != 0;
}
