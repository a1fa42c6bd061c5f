/* device_harness.c — see device_harness.h: finding the device under test by name through
 * the host's loader, learning which precisions it accepts here (in a child process), and
 * one device instance per test case. */
#define _POSIX_C_SOURCE 200809L
#include "device_harness.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device_harness_internal.h"
#include "flags/flags.h"
#include "loader/loader.h"

const uint32_t device_harness_low_precisions[2] = {CNNB_PRECISION_BF16, CNNB_PRECISION_FP16};

/* What create() said for one precision when the suite started. */
typedef struct probe {
  int32_t status;      /* cnnb_status */
  int32_t left_device; /* a refusal that still returned a device (a contract breach) */
  char message[512];   /* the refusal, or describe() on success */
} probe;

enum { NUM_PRECISIONS = 3 }; /* CNNB_PRECISION_FP32 .. CNNB_PRECISION_FP16 */

static struct {
  cnnb_ctx *log; /* the root every ctx of the suite descends from */
  cnnb_loader *loader;
  const char *name;
  const char *path;
  const cnnb_plugin *plugin;
  const cnnb_device_vtable *dv;
  probe probes[NUM_PRECISIONS];
} dut;

static void say(char *msg, size_t size, const char *fmt, ...) CNNB_PRINTF(3, 4);
static void say(char *msg, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
}

static int num_threads(void) {
  const char *threads = getenv("CNNB_TEST_THREADS");
  return threads && atoi(threads) > 0 ? atoi(threads) : 1;
}

/* One device per precision, in the child: creating it may initialise a GPU runtime,
 * which must not happen in the process Check forks each test from. */
static void probe_child(int fd) {
  probe probes[NUM_PRECISIONS];
  memset(probes, 0, sizeof probes);
  for (uint32_t p = 0; p < NUM_PRECISIONS; p++) {
    cnnb_ctx *ctx = cnnb_ctx_create_child(dut.log, dut.name);
    cnnb_device_config cfg = {.struct_size = sizeof cfg,
                              .num_threads = 1,
                              .precision = CNNB_PRECISION_FP32 + p,
                              .training = 1,
                              .seed = 1};
    void *dev = NULL;
    cnnb_status st = ctx ? dut.dv->create(ctx, dut.name, &cfg, &dev) : CNNB_ENOMEM;
    probes[p].status = (int32_t)st;
    if (st != CNNB_OK) {
      snprintf(probes[p].message, sizeof probes[p].message, "%s",
               ctx ? cnnb_error_message(ctx) : "out of memory");
      probes[p].left_device = dev != NULL;
    } else {
      const char *desc = dut.dv->describe ? dut.dv->describe(dev) : NULL;
      snprintf(probes[p].message, sizeof probes[p].message, "%s", desc ? desc : "");
      dut.dv->destroy(dev);
    }
    cnnb_ctx_destroy(ctx);
  }
  const char *at = (const char *)probes;
  size_t left = sizeof probes;
  while (left > 0) {
    ssize_t n = write(fd, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(2);
    at += n;
    left -= (size_t)n;
  }
  _exit(0);
}

static int probe_device(char *msg, size_t size) {
  int fds[2];
  if (pipe(fds) != 0) return say(msg, size, "pipe: %s", strerror(errno)), -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return say(msg, size, "fork: %s", strerror(errno)), -1;
  }
  if (pid == 0) {
    close(fds[0]);
    probe_child(fds[1]);
  }
  close(fds[1]);
  char *at = (char *)dut.probes;
  size_t got = 0;
  while (got < sizeof dut.probes) {
    ssize_t n = read(fds[0], at + got, sizeof dut.probes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (got < sizeof dut.probes || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    if (WIFSIGNALED(wstatus))
      say(msg, size, "creating a '%s' device (fp32, bf16, fp16) crashed: signal %d", dut.name,
          WTERMSIG(wstatus));
    else
      say(msg, size, "creating a '%s' device (fp32, bf16, fp16) failed: the probe exited %d",
          dut.name, WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    return -1;
  }
  return 0;
}

/* What each precision did, as a verdict: 0 usable, DEVICE_HARNESS_SKIP when fp32 is
 * refused (the device cannot run here), -1 when a refusal broke device.h's contract. */
static int judge_probes(char *msg, size_t size) {
  for (uint32_t p = 0; p < NUM_PRECISIONS; p++) {
    const probe *pr = &dut.probes[p];
    const char *pname = test_precision_name(CNNB_PRECISION_FP32 + p);
    if (pr->status == CNNB_OK) continue;
    if (pr->left_device)
      return say(msg, size, "create(%s) refused (%s) but returned a device", pname,
                 cnnb_status_name((cnnb_status)pr->status)),
             -1;
    if (pr->status != CNNB_EUNSUPPORTED)
      return say(msg, size,
                 "create(%s) failed: %s (%s); a device that cannot run here, or "
                 "cannot do a precision, refuses with CNNB_EUNSUPPORTED",
                 pname, pr->message, cnnb_status_name((cnnb_status)pr->status)),
             -1;
    if (!pr->message[0]) return say(msg, size, "create(%s) refused without a message", pname), -1;
  }
  if (dut.probes[0].status != CNNB_OK)
    return say(msg, size, "device '%s' cannot run here: %s", dut.name, dut.probes[0].message),
           DEVICE_HARNESS_SKIP;
  return 0;
}

int device_harness_init(const char *device, char *msg, size_t size) {
  msg[0] = '\0';
  dut.name = device;
  /* Discovery warns about rejected plugins; info lines from every plugin would drown the
   * test's own output. Every ctx of the suite descends from this one. */
  dut.log = cnnb_ctx_create("device_harness", NULL);
  if (dut.log) cnnb_ctx_set_log_level(dut.log, CNNB_LOG_WARN);
  dut.loader = dut.log ? cnnb_loader_create(dut.log) : NULL;
  if (!dut.loader) return say(msg, size, "out of memory"), -1;
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (dir && *dir && cnnb_loader_set_install_dir(dut.loader, dir) != CNNB_OK)
    return say(msg, size, "out of memory"), -1;
  char err[2048];
  cnnb_status st = cnnb_loader_discover(dut.loader, NULL, err, sizeof err);
  if (st != CNNB_OK) return say(msg, size, "discovering plugins: %s", err), -1;
  st = cnnb_loader_find(dut.loader, CNNB_KIND_DEVICE, device, &dut.plugin, &dut.path, err,
                        sizeof err);
  if (st == CNNB_ENOTFOUND)
    return say(msg, size, "device '%s' is not built or installed here: %s", device, err),
           DEVICE_HARNESS_SKIP;
  if (st != CNNB_OK) return say(msg, size, "%s", err), -1;
  dut.dv = dut.plugin->vtable;
  if (probe_device(msg, size) != 0) return -1;
  return judge_probes(msg, size);
}

void device_harness_fini(void) {
  cnnb_loader_destroy(dut.loader);
  cnnb_ctx_destroy(dut.log);
  memset(&dut, 0, sizeof dut);
}

void device_harness_print(const char *test, FILE *out) {
  fprintf(out, "%s: device '%s' (plugin %s %s, %s)", test, dut.name, dut.plugin->name,
          dut.plugin->version ? dut.plugin->version : "", dut.path);
  if (dut.probes[0].message[0]) fprintf(out, ": %s", dut.probes[0].message);
  fputc('\n', out);
  for (uint32_t p = 0; p < NUM_PRECISIONS; p++) {
    const probe *pr = &dut.probes[p];
    const char *pname = test_precision_name(CNNB_PRECISION_FP32 + p);
    if (pr->status == CNNB_OK) fprintf(out, "  %s: runs\n", pname);
    else fprintf(out, "  %s: refused, its cases are skipped: %s\n", pname, pr->message);
  }
}

const char *device_harness_name(void) { return dut.name; }
const cnnb_plugin *device_harness_plugin(void) { return dut.plugin; }
const cnnb_device_vtable *device_harness_vtable(void) { return dut.dv; }
const char *device_harness_path(void) { return dut.path; }

bool device_harness_can(uint32_t precision, const char **why) {
  if (!dut.dv || precision < CNNB_PRECISION_FP32 || precision > CNNB_PRECISION_FP16) {
    if (why) *why = "not a precision this harness knows";
    return false;
  }
  const probe *pr = &dut.probes[precision - CNNB_PRECISION_FP32];
  if (why) *why = pr->status == CNNB_OK ? "" : pr->message;
  return pr->status == CNNB_OK;
}

bool device_harness_has_extension(void *dev, const char *id) {
  if (!dut.dv) return false;
  if (dev && dut.dv->get_extension && dut.dv->get_extension(dev, id)) return true;
  return dut.plugin->get_extension && dut.plugin->get_extension(id);
}

/* ---- instances ---------------------------------------------------------------------- */

int device_harness_load(device_harness *h) {
  memset(h, 0, sizeof *h);
  if (!dut.dv) {
    snprintf(h->error, sizeof h->error, "no device loaded (device_harness_main was not run)");
    return -1;
  }
  h->name = dut.name;
  h->plugin = dut.plugin;
  h->dv = dut.dv;
  h->ctx = cnnb_ctx_create_child(dut.log, dut.name);
  if (!h->ctx) {
    snprintf(h->error, sizeof h->error, "out of memory");
    return -1;
  }
  return 0;
}

int device_harness_open(device_harness *h, uint32_t precision, int training, uint32_t seed) {
  int rc = device_harness_load(h);
  if (rc) return rc;
  h->precision = precision;
  const char *why = NULL;
  if (!device_harness_can(precision, &why)) {
    snprintf(h->error, sizeof h->error, "%s", why);
    return DEVICE_HARNESS_REFUSED;
  }
  cnnb_device_config cfg = {.struct_size = sizeof cfg,
                            .device_index = 0,
                            .num_threads = num_threads(),
                            .precision = precision,
                            .training = training,
                            .seed = seed};
  cnnb_status st = h->dv->create(h->ctx, h->name, &cfg, &h->dev);
  if (st != CNNB_OK) {
    snprintf(h->error, sizeof h->error, "create(%s, %s): %s (%s)", test_precision_name(precision),
             training ? "training" : "inference", cnnb_error_message(h->ctx), cnnb_status_name(st));
    return -1;
  }
  return 0;
}

void device_harness_close(device_harness *h) {
  if (h->dev) h->dv->destroy(h->dev);
  if (h->ctx) cnnb_ctx_destroy(h->ctx);
  memset(h, 0, sizeof *h);
}
