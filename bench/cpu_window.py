#!/usr/bin/env python3
"""cpu_window.py: CPU seconds a program spends between two lines it prints.

    cpu_window.py --start=REGEX --end=REGEX -- COMMAND [ARGS...]

Runs COMMAND with its stdout and stderr merged and passed through, reads the process's
CPU time (user + system, all of its threads: /proc/PID/stat) when a line matching the
start REGEX appears and again at the first later line matching the end REGEX, and prints
at the end
    cpu_window: wall_s=W cpu_s=C
Why: on a machine shared with other work, images per CPU-second of a pinned process is
the per-core figure that the other work does not skew, and cnnbench reports only wall
time. input_pipeline.sh opens the window at cnnbench --input_only's first timed step line
and closes it at its last, so the window holds whole steps with the pipeline in its
steady state at both ends (neither the queue drained after the warm-up nor the batches
prefetched at the end that nobody takes fall in it). The exit status is COMMAND's.
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
    if (len(args) < 4 or not args[0].startswith("--start=") or
            not args[1].startswith("--end=") or args[2] != "--"):
        sys.exit("usage: cpu_window.py --start=REGEX --end=REGEX -- COMMAND [ARGS...]")
    start = re.compile(args[0][len("--start="):])
    end = re.compile(args[1][len("--end="):])
    proc = subprocess.Popen(args[3:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    t0 = c0 = t1 = c1 = None
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        if t0 is None and start.search(line):
            t0, c0 = time.monotonic(), cpu_of(proc.pid)
        elif t0 is not None and t1 is None and end.search(line):
            t1, c1 = time.monotonic(), cpu_of(proc.pid)
        sys.stdout.write(line)
    _, status, _ = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if t1 is None:
        print("cpu_window: no lines matched %r then %r" % (start.pattern, end.pattern))
    else:
        print("cpu_window: wall_s=%.3f cpu_s=%.3f" % (t1 - t0, c1 - c0))
    sys.stdout.flush()
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
