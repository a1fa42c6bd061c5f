/* crash_guard.h — when a plugin crashes the process (a segfault in its entry, an abort
 * in a model's build, a bad write in a kernel), one line on stderr names the plugin, its
 * file and what it was doing, so the user knows which file to take off the plugin path.
 * The signal then proceeds as before (the default action, or a sanitizer's report).
 *
 * The host marks the calling thread before it calls into a plugin. A mark is two or three
 * pointers stored in a thread-local slot, cheap enough to set around every kernel call;
 * the strings must outlive the mark (a plugin label kept by the run, a literal, a node's
 * name). This thread-local slot, the saved signal actions and the handler's stack are
 * the core's only process-wide mutable state a signal handler reaches (SIGINT and
 * SIGTERM have no handler: interrupt.h). */
#ifndef CNNB_CRASH_GUARD_H
#define CNNB_CRASH_GUARD_H

typedef struct cnnb_crash_mark {
  const char *where;  /* "device plugin cpu (/usr/lib/cnnbench/plugins/libcnnb_device_cpu.so)" */
  const char *what;   /* "forward", "build", "cnnb_plugin_entry"; may be NULL */
  const char *detail; /* a node's name; may be NULL */
} cnnb_crash_mark;

/* Installs the handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT (and an alternate
 * stack for the calling thread, so a stack overflow is reported too). Call once, from
 * the main thread, before any plugin is loaded. */
void cnnb_crash_guard_install(void);

/* Marks the calling thread as inside `where` doing `what` (on `detail`) and returns the
 * previous mark, for cnnb_crash_leave. where NULL: not inside a plugin. */
cnnb_crash_mark cnnb_crash_enter(const char *where, const char *what, const char *detail);
void cnnb_crash_leave(cnnb_crash_mark previous);

/* Runs the statement that follows `detail` (one statement or a braced block; variadic
 * only so that its commas need no parentheses) marked as inside `where` doing `what` on
 * `detail`, then puts the previous mark back: the way host code calls into a plugin. The
 * statement must not return, break or goto out of the guard, or the mark would outlive
 * the call. Plugin calls that also name the plugin in a failure use CNNB_PLUGIN_CALL
 * (loader/bound_plugin.h). */
#define CNNB_GUARDED(where, what, detail, ...)                                       \
  do {                                                                               \
    cnnb_crash_mark cnnb_guard_outer_ = cnnb_crash_enter((where), (what), (detail)); \
    __VA_ARGS__;                                                                     \
    cnnb_crash_leave(cnnb_guard_outer_);                                             \
  } while (0)

/* Formats the line the handler writes for `signo` and mark `m` into buf (for tests);
 * returns its length. Async-signal-safe. */
int cnnb_crash_format(char *buf, int size, int signo, const cnnb_crash_mark *m);

#endif
