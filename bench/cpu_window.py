#!/usr/bin/env python3
"""cpu_window.py: CPU seconds a program spends after a line it prints (to its exit).

    cpu_window.py --start=REGEX -- COMMAND [ARGS...]

Runs COMMAND with its stdout and stderr merged and passed through, reads the process's
CPU time (user + system, all of its threads: /proc/PID/stat) when a line matching REGEX
appears, and again at its exit (wait4's rusage), and prints at the end
    cpu_window: wall_s=W cpu_s=C
Why: on a machine shared with other work, images per CPU-second of a pinned process is
the per-core figure that the other work does not skew, and cnnbench reports only wall
time. With --start='Done warm up' the window is cnnbench --input_only's timed steps plus
its exit; batches its threads prefetched but nobody took are paid in it and not counted,
so the figure errs low, not high. The exit status is COMMAND's.
"""
import os
import re
import subprocess
import sys
import time


def cpu_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime of the whole group


def main():
    args = sys.argv[1:]
    if len(args) < 3 or not args[0].startswith("--start=") or args[1] != "--":
        sys.exit("usage: cpu_window.py --start=REGEX -- COMMAND [ARGS...]")
    start = re.compile(args[0][len("--start="):])
    proc = subprocess.Popen(args[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    t0 = c0 = None
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        sys.stdout.write(line)
        if t0 is None and start.search(line):
            t0, c0 = time.monotonic(), cpu_of(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    t1 = time.monotonic()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if t0 is None:
        print("cpu_window: no line matched %r" % start.pattern)
    else:
        print("cpu_window: wall_s=%.3f cpu_s=%.3f" %
              (t1 - t0, usage.ru_utime + usage.ru_stime - c0))
    sys.stdout.flush()
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
