# tests/support/netns.sh — sourced by the tests and benchmarks that run MPI jobs across
# several "hosts" on this one machine: each host is a network namespace with its own
# address, joined to the others by a veth pair whose root-namespace end sits on a bridge
# (a switch), each link's rate shaped with tc, as a cluster's NICs would be.
#
#   netns_require          skips (exit 77, saying why, with the failing command's own
#                          error) when not root, without ip/tc/mpirun, or when a namespace
#                          cannot be created here (a chroot without /run or /sys mounted)
#   netns_up N RATE        creates N hosts (N >= 1) and shapes their links at RATE
#                          (tc's rate syntax: 1gbit, 10gbit, 500mbit; "none" leaves them
#                          unshaped); removes them all again when the shell exits, also
#                          on failure or a signal
#   netns_shape RATE       reshapes every link (egress of both veth ends: each host's
#                          link is RATE each way, full duplex)
#   netns_mpirun NP ARGS...            mpirun with NP ranks across the hosts, one per host
#                          in turn (rank r on host r mod N), from the root namespace
#   netns_mpirun_bounded SECS NP ARGS...   the same under `timeout -s KILL SECS` (a hang
#                          fails instead of holding CI; the ranks it leaves are killed
#                          with the namespaces)
#   netns_mpirun_argv NP   that mpirun command line, without the program, in the array
#                          NETNS_MPIRUN_ARGV (to run it under /usr/bin/time)
#   netns_sent_bytes       bytes the links' shapers have sent so far (all veth ends)
#   netns_qdiscs           `tc -s qdisc show` of every link, for logs
#   netns_down             removes everything now (the exit trap calls it)
# After netns_up: NETNS_NAMES[i] (namespace of host i), NETNS_ADDRS[i] (its address),
# NETNS_SUBNET (a.b.c.0/24), NETNS_RATE, NETNS_DIR (a private temporary directory, removed
# with the rest: callers keep their own files there, since the exit trap is netns_down's).
#
# Everything is named after this shell's pid ($$): namespaces cnnb-PID-hI, bridge cnbbPID,
# veth ends cnbPIDxIr (bridge side) and cnbPIDxIn (host side), so concurrent runs never
# collide and a leftover (a run killed with -9 skips its trap) never breaks the next one;
# netns_up also removes leftovers whose pid no longer exists. The subnet is the first free
# 10.213.X.0/24 (X from 1 to 254), chosen under a lock so two runs never pick the same
# (the lock's empty file, /run/cnnb-netns.lock, stays: removing it could let two runs
# lock different files).
# mpirun is given the hosts' addresses directly (a hostfile of IPs), so /etc/hosts is
# never touched; its rsh agent is a two-line script that runs the command under
# `ip netns exec` of the host the address belongs to.

# shellcheck shell=bash disable=SC2016,SC2034  # the agent is written in single quotes; NETNS_* are for callers
NETNS_TAG="cnnb-$$"
NETNS_NAMES=() NETNS_ADDRS=() NETNS_VETHS=()
NETNS_SUBNET="" NETNS_RATE="" NETNS_DIR="" NETNS_BRIDGE=""

netns_require() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: network namespaces need root (uid $(id -u))"; exit 77; }
  local tool
  for tool in ip tc mpirun flock timeout unshare hostname; do
    command -v "$tool" >/dev/null 2>&1 \
      || { echo "SKIP: $tool not found (scripts/install-deps.sh installs iproute2 and openmpi-bin; unshare, flock: util-linux; hostname: hostname)"; exit 77; }
  done
  # Creating one is the only real test: a chroot without /run, /sys or /proc mounted, or a
  # container without CAP_SYS_ADMIN, fails here.
  local probe="cnnb-$$-probe" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "SKIP: cannot create a network namespace here: 'ip netns add $probe': $err"; exit 77
  fi
  if ! err=$(ip netns exec "$probe" ip link set lo up 2>&1); then
    ip netns delete "$probe" 2>/dev/null
    echo "SKIP: cannot enter a network namespace here: 'ip netns exec $probe ip link set lo up': $err"
    exit 77
  fi
  ip netns delete "$probe"
}

# Leftovers of runs that died without their trap: ours by name, their pid gone.
netns_reap_stale() {
  local ns pid link
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^cnnb-([0-9]+)-(h[0-9]+|probe)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    [ "$pid" != $$ ] && ! kill -0 "$pid" 2>/dev/null && ip netns delete "$ns" 2>/dev/null
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ $link =~ ^cnb(b([0-9]+)|([0-9]+)x[0-9]+r)$ ]] || continue
    pid=${BASH_REMATCH[2]}${BASH_REMATCH[3]}
    [ "$pid" != $$ ] && ! kill -0 "$pid" 2>/dev/null && ip link delete "$link" 2>/dev/null
  done
  return 0
}

# tc's burst must hold the largest packet the stack hands it (veth passes 64 KiB GSO
# segments) and about a millisecond of the rate, or a fast link never reaches its rate;
# a short queue (latency 5ms) keeps acknowledgements from waiting behind a long backlog.
netns_tbf_args() {
  local rate=$1 bps
  case "$rate" in
    *gbit) bps=$(( ${rate%gbit} * 1000000000 )) ;;
    *mbit) bps=$(( ${rate%mbit} * 1000000 )) ;;
    *) echo "netns: rate '$rate' not understood (use Ngbit or Nmbit, or none)" >&2; return 2 ;;
  esac
  local burst=$(( bps / 8 / 1000 ))
  (( burst < 131072 )) && burst=131072
  echo "rate $rate burst $burst latency 5ms"
}

netns_shape() {
  local rate=$1 i args
  if [ "$rate" != none ]; then args=$(netns_tbf_args "$rate") || return 2; fi
  for i in "${!NETNS_NAMES[@]}"; do
    if [ "$rate" = none ]; then
      tc qdisc del dev "${NETNS_VETHS[i]}r" root 2>/dev/null
      ip netns exec "${NETNS_NAMES[i]}" tc qdisc del dev "${NETNS_VETHS[i]}n" root 2>/dev/null
    else
      # shellcheck disable=SC2086  # args is tc's word list
      tc qdisc replace dev "${NETNS_VETHS[i]}r" root tbf $args || return 1
      # shellcheck disable=SC2086
      ip netns exec "${NETNS_NAMES[i]}" tc qdisc replace dev "${NETNS_VETHS[i]}n" root tbf $args \
        || return 1
    fi
  done
  NETNS_RATE=$rate
}

# A free /24: none of this machine's addresses or routes in it. Called under the lock.
netns_pick_subnet() {
  local x used
  used=$(ip -4 -o addr show 2>/dev/null; ip -4 route show table all 2>/dev/null)
  for x in $(seq 1 254); do
    grep -q "10\.213\.$x\." <<<"$used" || { echo "10.213.$x"; return 0; }
  done
  echo "netns: no free 10.213.X.0/24 subnet" >&2
  return 1
}

netns_up() {
  local n=$1 rate=$2 i prefix
  netns_reap_stale
  trap 'netns_down' EXIT
  trap 'netns_down; exit 130' INT TERM
  NETNS_DIR=$(mktemp -d "/tmp/cnnb-netns.$$.XXXXXX") || return 1
  NETNS_BRIDGE="cnbb$$"
  # The lock spans picking the subnet and putting it on the bridge, so a run started at
  # the same moment sees the address and picks another.
  exec {netns_lock}>/run/cnnb-netns.lock
  flock "$netns_lock"
  prefix=$(netns_pick_subnet) \
    && ip link add "$NETNS_BRIDGE" type bridge \
    && ip addr add "$prefix.1/24" dev "$NETNS_BRIDGE" \
    && ip link set "$NETNS_BRIDGE" up
  local made=$?
  flock -u "$netns_lock"
  exec {netns_lock}>&-
  (( made == 0 )) || { echo "netns: cannot create the bridge $NETNS_BRIDGE" >&2; return 1; }
  NETNS_SUBNET="$prefix.0/24"
  for ((i = 0; i < n; i++)); do
    # veth ends: cnbPIDxI + r (bridge side) / n (host side): at most 15 characters
    local ns="$NETNS_TAG-h$((i + 1))" veth="cnb$$x$((i + 1))" addr="$prefix.$((i + 2))"
    NETNS_NAMES+=("$ns") NETNS_ADDRS+=("$addr") NETNS_VETHS+=("$veth")
    if ! { ip netns add "$ns" \
           && ip netns exec "$ns" ip link set lo up \
           && ip link add "${veth}r" type veth peer name "${veth}n" \
           && ip link set "${veth}n" netns "$ns" \
           && ip link set "${veth}r" master "$NETNS_BRIDGE" up \
           && ip netns exec "$ns" ip addr add "$addr/24" dev "${veth}n" \
           && ip netns exec "$ns" ip link set "${veth}n" up; }; then
      echo "netns: cannot create host $ns ($addr)" >&2
      return 1
    fi
  done
  netns_shape "$rate" || { echo "netns: cannot shape the links at $rate" >&2; return 1; }
  netns_write_launcher
}

# The rsh agent mpirun starts its daemons with: `agent HOST COMMAND...`, as it would call
# ssh, so the command is one shell line (ssh joins its arguments the same way). Each host
# also gets its own host name (a UTS namespace named like its network namespace): Open
# MPI names its session directories after the host name, and daemons of one job sharing a
# name raced creating them ("mkdir ... File exists", orte_init failed); it also lets each
# rank's log say which host it ran on.
netns_write_launcher() {
  local i
  {
    echo '#!/bin/sh'
    printf 'case "$1" in'
    for i in "${!NETNS_NAMES[@]}"; do printf ' %s) ns=%s ;;' "${NETNS_ADDRS[i]}" "${NETNS_NAMES[i]}"; done
    echo ' *) echo "netns agent: unknown host $1" >&2; exit 1 ;; esac; shift'
    echo 'exec ip netns exec "$ns" unshare --uts sh -c '"'"'hostname "$1" && exec sh -c "$2"'"'"' sh "$ns" "$*"'
  } > "$NETNS_DIR/agent"
  chmod +x "$NETNS_DIR/agent"
  for i in "${!NETNS_ADDRS[@]}"; do echo "${NETNS_ADDRS[i]} slots=1"; done > "$NETNS_DIR/hostfile"
}

# Why each flag:
#  --bind-to none: each host's daemon believes it has the whole machine and binds its
#    rank to core 0, so every rank shared one core (8 ms per 4 KiB allreduce, scheduler
#    ticks, instead of 30 us);
#  mpi_yield_when_idle 1: the ranks poll while they wait; on 2 cores shared with other
#    work, a polling rank that does not yield holds the core its peer needs;
#  btl_tcp_flags send: OB1's default pipeline protocol for large messages ("put") sends its
#    control messages on the same socket as the bulk data, so with both directions busy
#    (every allreduce) they wait behind the other side's backlog: a shaped 1 Gbit/s link
#    carried 0.53 Gbit/s each way in MPI_Sendrecv, and 0.955 with plain sends;
#  rtc_hwloc_vmhole none: several daemons on one machine each map a shared topology
#    segment into a "hole" of their address space, and an orted crashed in
#    hwloc_shmem_topology_write (SIGSEGV) doing it; "none" skips the sharing.
# shellcheck disable=SC2054  # "tcp,self" is one argument
NETNS_MPI_FLAGS=(--allow-run-as-root --oversubscribe --bind-to none --map-by node
                 --mca btl tcp,self --mca mpi_yield_when_idle 1 --mca btl_tcp_flags send
                 --mca rtc_hwloc_vmhole none)
netns_mpirun() { netns_mpirun_bounded 0 "$@"; }
netns_mpirun_bounded() {
  local secs=$1 np=$2 bound=()
  shift 2
  (( secs > 0 )) && bound=(timeout -s KILL "$secs")
  netns_mpirun_argv "$np"
  "${bound[@]}" "${NETNS_MPIRUN_ARGV[@]}" "$@"
}
# netns_mpirun_argv NP: the mpirun command line (without the program) in the array
# NETNS_MPIRUN_ARGV, for callers that run it under another program (/usr/bin/time).
netns_mpirun_argv() {
  NETNS_MPIRUN_ARGV=(mpirun "${NETNS_MPI_FLAGS[@]}" --hostfile "$NETNS_DIR/hostfile"
    --mca plm_rsh_agent "$NETNS_DIR/agent"
    --mca btl_tcp_if_include "$NETNS_SUBNET" --mca oob_tcp_if_include "$NETNS_SUBNET" -np "$1")
}

netns_sent_bytes() {
  local i total=0 b
  for i in "${!NETNS_NAMES[@]}"; do
    for b in $(tc -s qdisc show dev "${NETNS_VETHS[i]}r" | awk '/^ Sent/ {print $2}') \
             $(ip netns exec "${NETNS_NAMES[i]}" tc -s qdisc show dev "${NETNS_VETHS[i]}n" | awk '/^ Sent/ {print $2}'); do
      total=$((total + b))
    done
  done
  echo "$total"
}

netns_qdiscs() {
  local i
  for i in "${!NETNS_NAMES[@]}"; do
    echo "${NETNS_NAMES[i]} (${NETNS_ADDRS[i]}), ${NETNS_VETHS[i]}r (into the host):"
    tc -s qdisc show dev "${NETNS_VETHS[i]}r"
    echo "${NETNS_NAMES[i]} (${NETNS_ADDRS[i]}), ${NETNS_VETHS[i]}n (out of the host):"
    ip netns exec "${NETNS_NAMES[i]}" tc -s qdisc show dev "${NETNS_VETHS[i]}n"
  done
}

netns_down() {
  local - i pid
  set +e   # a trap under set -e: a name already gone must not stop the rest
  # Processes still inside a namespace (a rank a timeout left behind) would keep it alive.
  for i in "${!NETNS_NAMES[@]}"; do
    for pid in $(ip netns pids "${NETNS_NAMES[i]}" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns delete "${NETNS_NAMES[i]}" 2>/dev/null
    # Deleting the namespace deletes its veth end, and with it the pair.
    ip link delete "${NETNS_VETHS[i]}r" 2>/dev/null
  done
  [ -n "$NETNS_BRIDGE" ] && ip link delete "$NETNS_BRIDGE" 2>/dev/null
  [ -n "$NETNS_DIR" ] && rm -rf "$NETNS_DIR"
  NETNS_NAMES=() NETNS_ADDRS=() NETNS_VETHS=() NETNS_BRIDGE="" NETNS_DIR=""
  return 0
}
