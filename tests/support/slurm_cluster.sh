# tests/support/slurm_cluster.sh — sourced by the tests that run cnnbench under a real
# Slurm: Debian's slurm-wlm (slurmctld + slurmd, 22.05) started on this machine for the
# test alone, with a slurm.conf generated here.
#
#   slurm_require          skips (exit 77, saying why) when not root or without Slurm's
#                          daemons and commands (scripts/install-deps.sh installs slurm-wlm)
#   slurm_up [HOSTS...]    starts slurmctld on loopback and one slurmd per node; with no
#                          argument one node, n1, on loopback; with arguments, one node per
#                          network namespace given (NAME=NETNS:ADDR, as tests/support/
#                          netns.sh makes them: each slurmd runs inside its namespace,
#                          under its own host name, the controller on the bridge's side
#                          must then be reachable: SLURM_CTLD_ADDR; no test uses
#                          namespaced nodes yet, so that path is untried). Waits (bounded) until
#                          every node is idle; skips (exit 77, with the daemons' last log
#                          lines) when Slurm cannot start here. Exports SLURM_CONF, so
#                          srun, sbatch, scancel, squeue, scontrol talk to this cluster.
#   slurm_mpi_pmix FILE    after slurm_up: `srun --mpi=list` into FILE (its failure fails
#                          the test, with the daemons' logs), a skip (77) without the pmix
#                          plugin, and the tasks' OpenMPI environment exported: as root,
#                          shared memory and loopback TCP only, as tests/support/mpi.sh
#                          gives mpirun (tasks and sbatch jobs inherit it)
#   slurm_down             stops the daemons by their pids and every job step they left
#                          (the exit trap calls it, also after HUP, INT or TERM; a test
#                          with its own EXIT trap calls it there)
#   slurm_job_state JOBID  the job's state as scontrol shows it (RUNNING, COMPLETED,
#                          FAILED, CANCELLED, ...), "" when unknown
#   slurm_job_field JOBID FIELD   one field of `scontrol show job` (ExitCode, ...)
#   slurm_wait_job JOBID SECS     waits until the job has ended (bounded); 1 on a timeout
#   slurm_logs             the daemons' last log lines, for a failure's message
#
# Nothing outside SLURM_DIR (a temporary directory removed by slurm_down) is written:
# StateSaveLocation, SlurmdSpoolDir, TmpFS, pid files and logs all live there; the ports are
# free ones picked at start. Authentication is auth/none (and cred/none): the daemons
# and the commands all run as root on this machine, so nothing needs munge.
# Source tests/support/mpi.sh first: the tasks, srun and the batch scripts carry its
# CNNB_MPI_JOB_TAG in their environment (srun and sbatch pass the caller's environment
# on). The daemons are stopped by their pid files' pids, a job step's slurmstepd (which
# clears its environment) by its working directory, SLURM_DIR, and the rest by the tag:
# never by name, so another test's cluster beside this one is left alone.

# shellcheck shell=bash disable=SC2034  # SLURM_* are for callers
SLURM_DIR="" SLURM_NODES=() SLURM_CTLD_PID="" SLURM_SLURMD_PIDS=() SLURM_CTLD_ADDR=""

slurm_require() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: the test's Slurm runs its daemons as root (uid $(id -u))"; exit 77; }
  local tool
  for tool in slurmctld slurmd slurmstepd srun sbatch scancel squeue scontrol sinfo timeout; do
    PATH="$PATH:/usr/sbin" command -v "$tool" >/dev/null 2>&1 \
      || { echo "SKIP: $tool not found (scripts/install-deps.sh installs slurm-wlm)"; exit 77; }
  done
  PATH="$PATH:/usr/sbin"
  local plugdir
  for plugdir in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/*/slurm-wlm /usr/lib/slurm; do
    [ -e "$plugdir/auth_none.so" ] && return 0
  done
  echo "SKIP: Slurm's auth/none plugin (auth_none.so) not found: this Slurm cannot run without munge"
  exit 77
}

# A TCP port nobody listens on or uses now (/proc/net/tcp*, read with no Python: a
# minimal Debian root has none), below Linux's ephemeral range (32768-60999), so that no
# outgoing connection takes it meanwhile; good enough for a test.
slurm_free_port() {
  local port hex
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 12000))
    printf -v hex ':%04X ' "$port"
    grep -qF "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$port"; return 0; }
  done
  echo "$port"
}

slurm_logs() {
  local f
  for f in "$SLURM_DIR"/*.log; do
    [ -e "$f" ] || continue
    echo "--- $f (last lines)"
    tail -n 15 "$f"
  done
}

# slurm_skip REASON: the cluster cannot start here: stop what started, skip the test.
slurm_skip() {
  echo "SKIP: Slurm cannot start here: $1"
  slurm_logs | sed 's/^/  /'
  slurm_down
  exit 77
}

slurm_up() {
  SLURM_DIR=$(mktemp -d /tmp/cnnb-slurm.XXXXXX)
  chmod 755 "$SLURM_DIR"
  mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/tmp"
  local host ctld_port slurmd_port
  host=$(hostname -s)
  ctld_port=$(slurm_free_port)
  slurmd_port=$(slurm_free_port)
  [ "$slurmd_port" != "$ctld_port" ] || slurmd_port=$((ctld_port + 1))
  local cpus=4 mem=2000
  SLURM_NODES=()
  local nodes_conf="" spec name ns addr
  if [ $# -eq 0 ]; then
    SLURM_CTLD_ADDR=127.0.0.1
    SLURM_NODES=(n1)
    # NodeHostname is this machine's name, so that slurmd -N n1 on it is that node.
    nodes_conf="NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  else
    : "${SLURM_CTLD_ADDR:?slurm_up with namespaces needs SLURM_CTLD_ADDR}"
    for spec in "$@"; do
      name=${spec%%=*} ns=${spec#*=} addr=${ns#*:} ns=${ns%%:*}
      SLURM_NODES+=("$name:$ns")
      nodes_conf+="NodeName=$name NodeHostname=$name NodeAddr=$addr CPUs=$cpus RealMemory=$mem State=UNKNOWN"$'\n'
    done
  fi
  local names
  names=$(for spec in "${SLURM_NODES[@]}"; do printf '%s,' "${spec%%:*}"; done)
  names=${names%,}
  cat >"$SLURM_DIR/slurm.conf" <<EOF
# Generated by tests/support/slurm_cluster.sh for one test: everything under $SLURM_DIR.
ClusterName=cnnbtest
SlurmctldHost=$host($SLURM_CTLD_ADDR)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
# A requeued job may start again cred_expire + 1 seconds after its requeue (default 120).
AuthInfo=cred_expire=5
StateSaveLocation=$SLURM_DIR/state
# srun --mpi=pmix's per-step directories (spmix_appdir_*), /tmp otherwise.
TmpFS=$SLURM_DIR/tmp
SlurmdSpoolDir=$SLURM_DIR/spool-%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$SLURM_DIR/jobcomp.txt
SchedulerType=sched/builtin
# The main scheduler every second (default 60 s): a requeued job starts as soon as it
# may, not up to a minute later.
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
# A signalled step has KillWait seconds between SIGTERM and SIGKILL (a time limit, scancel
# without --signal): enough for a small model to save.
KillWait=30
MinJobAge=600
InactiveLimit=0
SlurmdTimeout=30
MessageTimeout=20
$nodes_conf
PartitionName=test Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  # slurmd 22.05 loads a cgroup plugin whatever the other plugins are, and its default
  # (autodetect) stops slurmd where /sys/fs/cgroup holds no cgroup file system (a chroot
  # with a fresh /sys, as .ci/fresh-debian.sh makes) or the machine mixes cgroup
  # versions. cgroup/v1 only loads: with linuxproc and task/none nothing makes a cgroup.
  echo "CgroupPlugin=cgroup/v1" >"$SLURM_DIR/cgroup.conf"
  export SLURM_CONF="$SLURM_DIR/slurm.conf"
  # The commands must not pick up a job of the caller's (a test run inside an allocation).
  unset SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_STEPID SLURM_NTASKS SLURM_PROCID SLURM_NODELIST
  trap slurm_down EXIT
  # Stopped by a signal (Ctrl-C, a harness's TERM), the test still stops its cluster.
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local out
  if ! out=$(slurmctld -f "$SLURM_CONF" -i 2>&1); then
    slurm_skip "slurmctld -f $SLURM_CONF failed: $out"
  fi
  for _ in $(seq 100); do
    SLURM_CTLD_PID=$(cat "$SLURM_DIR/slurmctld.pid" 2>/dev/null) && [ -n "$SLURM_CTLD_PID" ] && break
    sleep 0.1
  done
  [ -n "$SLURM_CTLD_PID" ] || slurm_skip "slurmctld wrote no pid file"
  local pid
  for spec in "${SLURM_NODES[@]}"; do
    name=${spec%%:*} ns=${spec#*:}
    mkdir -p "$SLURM_DIR/spool-$name" # slurmd makes its sockets there before it makes it
    if [ "$name" = "$ns" ]; then
      out=$(slurmd -f "$SLURM_CONF" -N "$name" 2>&1) || slurm_skip "slurmd -N $name failed: $out"
    else
      # Its own UTS namespace too: the node's host name is its NodeName.
      out=$(ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' \
        sh "$name" "$SLURM_CONF" 2>&1) || slurm_skip "slurmd -N $name in $ns failed: $out"
    fi
    pid=""
    for _ in $(seq 100); do
      pid=$(cat "$SLURM_DIR/slurmd-$name.pid" 2>/dev/null) && [ -n "$pid" ] && break
      sleep 0.1
    done
    [ -n "$pid" ] || slurm_skip "slurmd -N $name wrote no pid file"
    SLURM_SLURMD_PIDS+=("$pid")
  done
  # Bounded: every node idle within 60 s (a loaded machine registers slowly).
  local states
  for _ in $(seq 120); do
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null)
    if [ -n "$states" ] && ! grep -qv ' idle$' <<<"$states"; then return 0; fi
    kill -0 "$SLURM_CTLD_PID" 2>/dev/null || slurm_skip "slurmctld exited"
    sleep 0.5
  done
  slurm_skip "the nodes are not idle after 60 s: ${states:-sinfo answered nothing}"
}

slurm_mpi_pmix() {
  if ! srun --mpi=list >"$1" 2>&1; then
    echo "FAIL: srun --mpi=list: $(cat "$1")"
    slurm_logs
    exit 1
  fi
  grep -qw pmix "$1" || { echo "SKIP: this Slurm has no pmix plugin: $(tr '\n' ' ' <"$1")"; exit 77; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
}

slurm_down() {
  [ -n "$SLURM_DIR" ] || { mpi_cleanup; return 0; }
  local pid alive
  for pid in "${SLURM_SLURMD_PIDS[@]}" $SLURM_CTLD_PID; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${SLURM_SLURMD_PIDS[@]}" $SLURM_CTLD_PID; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  # A step's slurmstepd outlives slurmd and clears its environment (no tag): it is found
  # by the working directory slurmd gave it, SLURM_DIR, as a daemon that did not stop is.
  local p left=()
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/cwd" 2>/dev/null)" = "$SLURM_DIR" ] && left+=("${p#/proc/}")
  done
  if ((${#left[@]})); then
    echo "slurm_cluster.sh: killing what the cluster left running: ${left[*]}" >&2
    kill -KILL "${left[@]}" 2>/dev/null
  fi
  # The tasks, srun, sbatch's scripts carry this test's tag in their environment: killed
  # by pid (tests/support/mpi.sh).
  mpi_cleanup
  [ -n "${SLURM_KEEP_DIR:-}" ] || rm -rf "$SLURM_DIR"
  SLURM_DIR="" SLURM_SLURMD_PIDS=() SLURM_CTLD_PID=""
}

slurm_job_field() {
  scontrol show job "$1" 2>/dev/null | grep -oP "(^|\s)$2=\K\S+" | head -n 1
}
slurm_job_state() { slurm_job_field "$1" JobState; }

slurm_wait_job() {
  local id=$1 secs=$2 state
  for _ in $(seq $((secs * 2))); do
    state=$(slurm_job_state "$id")
    case $state in
      PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | "") ;;
      *) return 0 ;;
    esac
    sleep 0.5
  done
  return 1
}
