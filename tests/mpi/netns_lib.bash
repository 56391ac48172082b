# Two "nodes" on this machine: network namespaces joined by a veth pair, with Open MPI's remote
# launcher replaced by `ip netns exec` (sourced by tests/mpi/netns_*.sh; no test of its own).
#
#   netns_require         exit 77 unless root with the ip command (netns_up checks it too)
#   netns_up WORKDIR      create node A (10.231.0.1) and node B (10.231.0.2), write the rsh
#                         agent, the hostfile (2 slots each; NETNS_B_FIRST=1: ranks 0-1 on B), the
#                         rank probe and an mpirun wrapper (WORKDIR/mpirun) into WORKDIR;
#                         exits 77 with the reason where namespaces cannot be made
#   netns_mpirun ARGS...  mpirun from node A across both nodes (TCP on the subnet only), with
#                         $NETNS_MPIRUN (default mpirun)
#   netns_check_spread N  each node ran N ranks (read from the probe's records)
#   netns_veth_bytes      bytes node B's end of the veth has received so far
#
# The addresses exist only inside the two namespaces, so no traffic can leave them; the names
# carry the PID and a random suffix, so parallel ctest runs do not collide. A trap removes both
# namespaces (which also destroys the veth pair) however the script ends.

NETNS_SUBNET=10.231.0.0/24
NETNS_ADDR_A=10.231.0.1
NETNS_ADDR_B=10.231.0.2

netns_skip() {
  echo "SKIP: $*" >&2
  exit 77
}

netns_down() {
  [ -n "${NETNS_A:-}" ] && ip netns delete "$NETNS_A" 2>/dev/null
  [ -n "${NETNS_B:-}" ] && ip netns delete "$NETNS_B" 2>/dev/null
  return 0
}

netns_require() {
  command -v ip >/dev/null || netns_skip "the ip command (iproute2) is not installed"
  [ "$(id -u)" -eq 0 ] || netns_skip "creating network namespaces needs root (running as uid $(id -u))"
}

netns_up() {
  NETNS_WORK=$1
  netns_require
  # Interface names are limited to 15 characters: "bmn" + 4 random hex + 5 PID digits + A/B.
  local tag
  tag=bmn$(printf '%04x' $RANDOM)$(($$ % 100000))
  NETNS_A=${tag}a
  NETNS_B=${tag}b
  trap netns_down EXIT
  local err
  if ! err=$(ip netns add "$NETNS_A" 2>&1); then
    NETNS_A=
    netns_skip "ip netns add refused (needs CAP_NET_ADMIN and CAP_SYS_ADMIN): $err"
  fi
  ip netns add "$NETNS_B" || netns_skip "ip netns add $NETNS_B failed"
  if ! err=$(ip link add "${tag}A" netns "$NETNS_A" type veth peer name "${tag}B" netns "$NETNS_B" 2>&1); then
    netns_skip "cannot create a veth pair: $err"
  fi
  NETNS_DEV_B=${tag}B
  ip -n "$NETNS_A" addr add "$NETNS_ADDR_A/24" dev "${tag}A"
  ip -n "$NETNS_B" addr add "$NETNS_ADDR_B/24" dev "${tag}B"
  # Open MPI talks to its own node's daemon and ranks over loopback too.
  local ns
  for ns in "$NETNS_A" "$NETNS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NETNS_A" link set "${tag}A" up
  ip -n "$NETNS_B" link set "${tag}B" up

  # The rsh agent: mpirun calls `agent HOST COMMAND...` to start orted on HOST, as it would ssh.
  # The command runs in the namespace owning HOST with a clean environment (like a fresh ssh
  # login), so a variable reaches remote ranks only when mpirun forwards it (-x).
  local mpi_bin
  mpi_bin=$(dirname "$(command -v "${NETNS_MPIRUN:-mpirun}")")
  cat >"$NETNS_WORK/rsh_agent.sh" <<EOF
#!/bin/bash
host=\$1
shift
case "\$host" in
  $NETNS_ADDR_A) ns=$NETNS_A ;;
  $NETNS_ADDR_B) ns=$NETNS_B ;;
  *) echo "rsh_agent: refusing unknown host '\$host'" >&2; exit 1 ;;
esac
echo "\$host \$ns" >>"$NETNS_WORK/agent.log"
exec env -i PATH="$mpi_bin:/usr/bin:/bin" HOME="\${HOME:-/root}" ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
  chmod +x "$NETNS_WORK/rsh_agent.sh"
  printf '%s slots=2\n%s slots=2\n' "$NETNS_ADDR_A" "$NETNS_ADDR_B" >"$NETNS_WORK/hostfile"
  # NETNS_B_FIRST=1: ranks 0-1 on node B, the node mpirun is not on (Open MPI fills mpirun's own
  # node first whatever the hostfile's order, so this takes a rankfile).
  local rankfile=
  if [ "${NETNS_B_FIRST:-0}" = 1 ]; then
    printf 'rank 0=%s slot=0\nrank 1=%s slot=1\nrank 2=%s slot=0\nrank 3=%s slot=1\n' \
      "$NETNS_ADDR_B" "$NETNS_ADDR_B" "$NETNS_ADDR_A" "$NETNS_ADDR_A" >"$NETNS_WORK/rankfile"
    rankfile="--rankfile $NETNS_WORK/rankfile"
  fi

  # The sanitizer build's options (tools/test.sh) reach the ranks on node B, which start with
  # a clean environment, only when forwarded like OMP_NUM_THREADS.
  local san_env="" v
  for v in ASAN_OPTIONS UBSAN_OPTIONS; do [ -z "${!v:-}" ] || san_env+=" -x $v"; done

  # mpirun as a command (WORKDIR/mpirun ARGS...), for scripts that take an mpirun: it runs on
  # node A, as a user would run it on the first node of an allocation.
  cat >"$NETNS_WORK/mpirun" <<EOF
#!/bin/bash
exec ip netns exec "$NETNS_A" "$(command -v "${NETNS_MPIRUN:-mpirun}")" --allow-run-as-root \\
  --hostfile "$NETNS_WORK/hostfile" \\
  --mca plm_rsh_agent "$NETNS_WORK/rsh_agent.sh" \\
  --mca btl tcp,self \\
  --mca btl_tcp_if_include "$NETNS_SUBNET" \\
  --mca oob_tcp_if_include "$NETNS_SUBNET" \\
  -x OMP_NUM_THREADS -x OMP_WAIT_POLICY$san_env $rankfile \\
  "\$@"
EOF
  chmod +x "$NETNS_WORK/mpirun"

  # The probe records which namespace each rank really ran in, then becomes the program.
  mkdir -p "$NETNS_WORK/placement"
  cat >"$NETNS_WORK/rank_probe.sh" <<EOF
#!/bin/bash
echo "\$(ip netns identify \$\$)" >"$NETNS_WORK/placement/rank\$OMPI_COMM_WORLD_RANK"
exec "\$@"
EOF
  chmod +x "$NETNS_WORK/rank_probe.sh"
  echo "netns: node A $NETNS_A ($NETNS_ADDR_A), node B $NETNS_B ($NETNS_ADDR_B)"
}

# The outer timeout (NETNS_TIMEOUT_S, default 150) only guards the test: braid's own
# communication timeouts end a hang first.
netns_mpirun() {
  timeout "${NETNS_TIMEOUT_S:-150}" "$NETNS_WORK/mpirun" "$@"
}

netns_check_spread() {
  local per_node=$1 a b
  a=$(grep -lx "$NETNS_A" "$NETNS_WORK"/placement/rank* 2>/dev/null | wc -l)
  b=$(grep -lx "$NETNS_B" "$NETNS_WORK"/placement/rank* 2>/dev/null | wc -l)
  echo "netns: $a ranks ran on node A, $b on node B"
  [ "$a" -eq "$per_node" ] && [ "$b" -eq "$per_node" ]
}

netns_veth_bytes() {
  # ip netns exec mounts the namespace's own /sys, where the device is visible.
  ip netns exec "$NETNS_B" cat "/sys/class/net/$NETNS_DEV_B/statistics/rx_bytes"
}
