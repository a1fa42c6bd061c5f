/* dir_lock.h — one writer per directory: an advisory lock (flock(2)) on "<dir>/cnnbench.lock",
 * held from before a run's first write into the directory until it ends. Two runs saving
 * into one --train_dir would interleave their checkpoints and rotate each other's files
 * away; the second is refused at once instead, told who holds the directory.
 *
 * The lock file says who holds it ("pid=<pid> host=<host>"). The kernel drops a flock when
 * its holder ends, however it ends, so a lock file left by a run killed with -9 is taken
 * over by the next run, with a line naming the run that left it; a run that ends normally
 * removes the file. flock works across hosts on NFS (Linux maps it to fcntl locks there),
 * so a directory shared by several machines still has one writer. Host-internal. */
#ifndef CNNB_DIR_LOCK_H
#define CNNB_DIR_LOCK_H

#include <cnnb/ctx.h>

#define CNNB_DIR_LOCK_FILE "cnnbench.lock"

typedef struct cnnb_dir_lock cnnb_dir_lock;

/* Takes dir's lock (the directory must exist), or fails at once: CNNB_EIO naming
 * `flag_name` ("--train_dir"), the directory, and, when another process holds it, that
 * process's pid and host. */
cnnb_status cnnb_dir_lock_take(cnnb_ctx *ctx, const char *flag_name, const char *dir,
                               cnnb_dir_lock **out);

/* Removes the lock file and releases the lock; NULL is fine. */
void cnnb_dir_lock_release(cnnb_dir_lock *lock);

#endif
