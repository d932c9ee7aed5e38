# shellcheck shell=bash
# testbed/lib.sh: the psp testbed topology, sourced by demo.sh, compare.sh and the Rust
# integration tests (psp-gateway/tests/common/mod.rs). Run as root. Needs iproute2 and procps
# (testbed/install-deps.sh installs everything).
#
#               vm1-$SFX                 vm2-$SFX                 (vm3-$SFX)
#     10.77.0.1/24 psp0 (TAP)   10.77.0.2/24 psp0 (TAP)   10.77.0.3/24 psp0 (TAP)
#     02:50:53:00:00:01         02:50:53:00:00:02         02:50:53:00:00:03
#             |  psp-gateway            |  psp-gateway            |  psp-gateway
#            up0 02:50:53:00:01:01     up0 02:50:53:00:01:02     up0 02:50:53:00:01:03
#   (udp mode: 192.168.50.1/24)   (192.168.50.2/24)         (192.168.50.3/24)
#             |                         |                         |
#   +---------vm1-----------------------vm2------------------------vm3-------eve----+
#   |  lan-$SFX: bridge br0, ageing_time 0 (a hub: every port sees every frame),    |
#   |  STP off, no addresses, IPv6 off                                              |
#   +-------------------------------------------------------------------------+----+
#                                                                              |
#                                                        eve-$SFX: up0 02:50:53:00:01:ee
#                                                        promiscuous, no address, IPv6 off
#                                                        (captures, injects; sends nothing
#                                                        on its own)
#
# Protected traffic (10.77.0.0/24) exists only on the TAPs; the uplinks (up0) carry PSP frames
# only: EtherType 0x1982 in raw mode, UDP port 5198 datagrams in udp mode. In raw mode up0 has no
# address and IPv6 is off on it, so the kernel sends nothing else there. In udp mode up0 has
# 192.168.50.N/24 and static neighbour entries, so no ARP either. IPv6 is off in every namespace
# unless TB_IPV6=1 (then it stays on for the TAPs only).
#
# ---------------------------------------------------------------------------------------------
# API (stable: compare.sh and the Rust tests use it). Every function works in a fresh shell that
# has sourced this file with the same TB_SFX and TB_DIR exported: all state lives in namespaces
# named *-$TB_SFX and in files under $TB_DIR.
#
# Variables (set them before calling, or let tb_init choose):
#   TB_SFX    unique suffix of this run's namespace names (default: this shell's pid)
#   TB_DIR    per-run temp dir: configs, keys, logs, pid files, captures (tb_init: mktemp -d;
#             tb_teardown removes it only if tb_init created it)
#   TB_BIN    the psp-gateway binary (default: $TB_ROOT/target/release/psp-gateway)
#   TB_ROOT   the repository root (set by this file)
#   TB_IPV6   1 = keep IPv6 on the TAPs (default 0: IPv6 off in every namespace)
#   TB_READY_TIMEOUT  seconds tb_gw_start waits for the status socket (default 10)
#
# Functions (all return non-zero with a message on stderr on failure):
#   tb_init                        choose TB_SFX/TB_DIR if unset, export them, create TB_DIR
#   tb_trap                        install tb_teardown on EXIT, INT and TERM
#   tb_ns NAME                     print the namespace of NAME (vm1|vm2|vm3|eve|lan): NAME-$TB_SFX
#   tb_x NAME CMD...               run CMD inside NAME's namespace (ip netns exec)
#   tb_up NHOSTS UPLINK            build lan, eve and vm1..vmNHOSTS (NHOSTS 2|3, UPLINK raw|udp)
#   tb_uplink_addrs                give every up0 192.168.50.N/24 + static neighbours (tb_up
#                                  calls it in udp mode; compare.sh may call it in raw mode)
#   tb_hosts                       print the host numbers, e.g. "1 2"
#   tb_mac N | tb_up_mac N | tb_ip N | tb_up_ip N    addresses of vmN (TAP MAC, up0 MAC,
#                                  protected IP, uplink IP); tb_up_mac eve = eve's MAC
#   tb_keys SUITE                  write $TB_DIR/group.key and a key per host pair
#                                  ($TB_DIR/vmA-vmB.key, A<B), mode 0600, via `psp-gateway keygen`
#   tb_config N SUITE UPLINK       write $TB_DIR/vmN.toml (peers: every other host); extra
#                                  [defaults] lines from $TB_DEFAULTS_EXTRA, extra tables at the
#                                  end from $TB_CONFIG_EXTRA
#   tb_path2                       a second path: bridge br1 in lan, veth up1 in every vm and eve
#                                  (eve's up1 promiscuous); after tb_up (raw uplinks only)
#   tb_identities                  `keygen --identity` per host: $TB_DIR/vmN.id (0600), .pub
#   Sessions in tb_config: TB_SESSION=1 writes [session] (peers without key_file), with
#   TB_PATHS=2 two [[uplink]] (up0, up1), TB_SMKEX (prefer|require|off, default prefer),
#   TB_IDENTITY=1 (identity_file + every peer pinned), TB_SESSION_EXTRA (more [session] lines)
#   tb_sock N                      print vmN's status socket path ($TB_DIR/vmN.sock)
#   tb_gw_start N [ARGS...]        start `psp-gateway run --config $TB_DIR/vmN.toml ARGS` in vmN
#                                  (background, log $TB_DIR/vmN.log, pid $TB_DIR/vmN.pid) and
#                                  wait until the status socket answers; on timeout or early
#                                  exit print the log and fail
#   tb_gw_stop N                   SIGTERM, wait (5 s, then SIGKILL); returns the exit status
#   tb_status N [--json]           `psp-gateway status --socket ...` for vmN
#   tb_bg NAME LOG CMD...          run CMD in NAME's namespace in the background, output to LOG;
#                                  records the pid (killed by tb_teardown); sets TB_LAST_PID
#   tb_kill PID                    SIGTERM a pid started by tb_bg / tb_gw_start, wait for it
#   tb_tcpdump NAME LOG ARGS...    tcpdump ARGS in NAME's namespace in the background (tb_bg)
#                                  and wait until it is capturing; sets TB_LAST_PID
#   tb_iperf3 N DST SECONDS [ARGS...]  iperf3 -c DST from vmN (-J, retried while the server
#                                  starts); prints the received rate in Mbit/s (one decimal)
#   tb_sshd N [ADDR]               start sshd in vmN on ADDR:22 (default tb_ip N): root login
#                                  with a fresh key pair only, files in $TB_DIR/ssh; sets the
#                                  array TB_SSH_OPTS (the client's -F/-i/-o options)
#   tb_ssh_wait N ADDR             from vmN, retry `ssh root@ADDR true` for 5 s
#   tb_pair UPLINK SUITE           tb_init, tb_trap, tb_up 2 UPLINK, tb_keys SUITE and both
#                                  configs: the two-gateway set-up of ab.sh and latency.sh
#   tb_teardown                    kill everything started in this run's namespaces, delete
#                                  the namespaces and TB_DIR; idempotent, keeps $? intact
# ---------------------------------------------------------------------------------------------

TB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TB_BIN=${TB_BIN:-$TB_ROOT/target/release/psp-gateway}
TB_IPV6=${TB_IPV6:-0}
TB_READY_TIMEOUT=${TB_READY_TIMEOUT:-10}
TB_PORT=5198

tb_die() {
    echo "testbed: error: $*" >&2
    return 1
}

tb_init() {
    TB_SFX=${TB_SFX:-$$}
    if [[ -z ${TB_DIR:-} ]]; then
        TB_DIR=$(mktemp -d "/tmp/psp-tb-$TB_SFX.XXXXXX") || tb_die "mktemp failed" || return 1
        : >"$TB_DIR/.tb-created"
    fi
    mkdir -p "$TB_DIR" && chmod 700 "$TB_DIR"
    export TB_SFX TB_DIR TB_BIN TB_IPV6
}

tb_trap() {
    trap 'tb_teardown' EXIT
    trap 'tb_teardown; trap - EXIT; exit 130' INT
    trap 'tb_teardown; trap - EXIT; exit 143' TERM
}

tb_ns() { echo "$1-$TB_SFX"; }

tb_x() {
    local ns
    ns=$(tb_ns "$1")
    shift
    ip netns exec "$ns" "$@"
}

tb_mac() { printf '02:50:53:00:00:%02x\n' "$1"; }
tb_up_mac() {
    if [[ $1 == eve ]]; then echo 02:50:53:00:01:ee; else printf '02:50:53:00:01:%02x\n' "$1"; fi
}
tb_ip() { echo "10.77.0.$1"; }
tb_up_ip() { echo "192.168.50.$1"; }
tb_sock() { echo "$TB_DIR/vm$1.sock"; }

tb_hosts() {
    if [[ -f $TB_DIR/hosts ]]; then cat "$TB_DIR/hosts"; else echo "1 2"; fi
}

# Creates a namespace with loopback up and (unless TB_IPV6=1 for vm hosts) IPv6 off.
tb__netns() {
    local name=$1 keep6=${2:-0} ns
    ns=$(tb_ns "$name")
    ip netns add "$ns" || tb_die "ip netns add $ns failed" || return 1
    ip -n "$ns" link set lo up
    if [[ $keep6 != 1 ]]; then
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
            net.ipv6.conf.default.disable_ipv6=1 >/dev/null
    fi
}

tb_up() {
    local n=${1:-2} uplink=${2:-raw} lan i keep6=0
    [[ $n == 2 || $n == 3 ]] || tb_die "tb_up: NHOSTS must be 2 or 3, got '$n'" || return 1
    [[ $uplink == raw || $uplink == udp ]] ||
        tb_die "tb_up: UPLINK must be raw or udp, got '$uplink'" || return 1
    [[ -n ${TB_SFX:-} && -d ${TB_DIR:-} ]] || tb_init || return 1
    [[ $TB_IPV6 == 1 ]] && keep6=1
    seq -s ' ' 1 "$n" >"$TB_DIR/hosts"
    echo "$uplink" >"$TB_DIR/uplink"

    tb__netns lan || return 1
    lan=$(tb_ns lan)
    # ageing_time 0: the bridge forgets every address at once, so it floods every frame to
    # every port (a hub); eve sees unicast between the hosts too. No STP, no snooping.
    ip -n "$lan" link add br0 type bridge ageing_time 0 stp_state 0 mcast_snooping 0 ||
        tb_die "cannot create the bridge" || return 1
    ip -n "$lan" link set br0 up

    for i in $(seq 1 "$n"); do
        tb__netns "vm$i" "$keep6" || return 1
        tb__port "vm$i" "$(tb_up_mac "$i")" || return 1
        # Raw mode: no address and no IPv6 on up0, so nothing but PSP leaves it.
        ip netns exec "$(tb_ns "vm$i")" sysctl -qw net.ipv6.conf.up0.disable_ipv6=1 >/dev/null
    done
    tb__netns eve || return 1
    tb__port eve "$(tb_up_mac eve)" || return 1
    ip -n "$(tb_ns eve)" link set up0 promisc on
    if [[ $uplink == udp ]]; then
        tb_uplink_addrs || return 1
    fi
}

# A veth from NAME's up0 (with MAC) into the bridge; the bridge-side end is named NAME.
tb__port() {
    local name=$1 mac=$2 lan ns
    lan=$(tb_ns lan)
    ns=$(tb_ns "$name")
    ip -n "$lan" link add "$name" type veth peer name up0 netns "$ns" ||
        tb_die "cannot create the veth for $name" || return 1
    ip -n "$lan" link set "$name" master br0
    ip -n "$lan" link set "$name" up
    ip -n "$ns" link set up0 address "$mac"
    ip -n "$ns" link set up0 up
}

tb_uplink_addrs() {
    local i j ns
    for i in $(tb_hosts); do
        ns=$(tb_ns "vm$i")
        ip -n "$ns" addr replace "$(tb_up_ip "$i")/24" dev up0 || return 1
        for j in $(tb_hosts); do
            [[ $i == "$j" ]] && continue
            ip -n "$ns" neigh replace "$(tb_up_ip "$j")" lladdr "$(tb_up_mac "$j")" \
                dev up0 nud permanent || return 1
        done
    done
}

tb_path2() {
    local i lan ns
    lan=$(tb_ns lan)
    ip -n "$lan" link add br1 type bridge ageing_time 0 stp_state 0 mcast_snooping 0 ||
        tb_die "cannot create the second bridge" || return 1
    ip -n "$lan" link set br1 up
    for i in $(tb_hosts) eve; do
        ns=$(tb_ns "vm$i")
        [[ $i == eve ]] && ns=$(tb_ns eve)
        ip -n "$lan" link add "p2-$i" type veth peer name up1 netns "$ns" ||
            tb_die "cannot create the path-2 veth for $i" || return 1
        ip -n "$lan" link set "p2-$i" master br1
        ip -n "$lan" link set "p2-$i" up
        if [[ $i == eve ]]; then
            ip -n "$ns" link set up1 address 02:50:53:00:02:ee
            ip -n "$ns" link set up1 promisc on
        else
            ip -n "$ns" link set up1 address "$(printf '02:50:53:00:02:%02x' "$i")"
            ip netns exec "$ns" sysctl -qw net.ipv6.conf.up1.disable_ipv6=1 >/dev/null
        fi
        ip -n "$ns" link set up1 up
    done
}

tb_identities() {
    local i
    for i in $(tb_hosts); do
        rm -f "$TB_DIR/vm$i.id"
        "$TB_BIN" keygen --identity "$TB_DIR/vm$i.id" >"$TB_DIR/vm$i.pub" ||
            tb_die "keygen --identity failed" || return 1
    done
}

tb_keys() {
    local suite=${1:-bf-cbc-hmac-sha1} i j
    [[ -x $TB_BIN ]] || tb_die "no psp-gateway binary at $TB_BIN (build it first)" || return 1
    (umask 077 && "$TB_BIN" keygen --suite "$suite" >"$TB_DIR/group.key") ||
        tb_die "keygen --suite $suite failed" || return 1
    for i in $(tb_hosts); do
        for j in $(tb_hosts); do
            ((i < j)) || continue
            (umask 077 && "$TB_BIN" keygen --suite "$suite" >"$TB_DIR/vm$i-vm$j.key") || return 1
        done
    done
    chmod 600 "$TB_DIR"/*.key
}

tb_config() {
    local n=$1 suite=${2:-bf-cbc-hmac-sha1} uplink=${3:-raw} j a b file
    file=$TB_DIR/vm$n.toml
    {
        echo "# vm$n, written by testbed/lib.sh"
        echo "[interface]"
        echo "name = \"psp0\""
        echo "mac = \"$(tb_mac "$n")\""
        echo "addresses = [\"$(tb_ip "$n")/24\"]"
        echo
        if [[ ${TB_PATHS:-1} == 2 ]]; then
            printf '[[uplink]]\nkind = "raw"\ninterface = "up0"\n\n[[uplink]]\nkind = "raw"\ninterface = "up1"\n'
        else
            echo "[uplink]"
            if [[ $uplink == udp ]]; then
                echo "kind = \"udp\""
                echo "listen = \"$(tb_up_ip "$n"):$TB_PORT\""
            else
                echo "kind = \"raw\""
                echo "interface = \"up0\""
            fi
        fi
        if [[ ${TB_SESSION:-0} == 1 ]]; then
            echo
            echo "[session]"
            echo "smkex = \"${TB_SMKEX:-prefer}\""
            if [[ ${TB_IDENTITY:-0} == 1 ]]; then echo "identity_file = \"vm$n.id\""; fi
            if [[ -n ${TB_SESSION_EXTRA:-} ]]; then echo "$TB_SESSION_EXTRA"; fi
        fi
        echo
        echo "[daemon]"
        echo "status_socket = \"$(tb_sock "$n")\""
        echo "state_directory = \"$TB_DIR/vm$n.state\""
        echo
        echo "[defaults]"
        echo "suite = \"$suite\""
        if [[ -n ${TB_DEFAULTS_EXTRA:-} ]]; then echo "$TB_DEFAULTS_EXTRA"; fi
        echo
        echo "[group]"
        echo "key_file = \"group.key\""
        for j in $(tb_hosts); do
            [[ $j == "$n" ]] && continue
            a=$((n < j ? n : j))
            b=$((n < j ? j : n))
            echo
            echo "[[peer]]"
            echo "name = \"vm$j\""
            echo "mac = \"$(tb_mac "$j")\""
            if [[ ${TB_SESSION:-0} == 1 ]]; then
                echo "address = \"$(tb_ip "$j")\""
                if [[ ${TB_IDENTITY:-0} == 1 ]]; then echo "identity = \"$(cat "$TB_DIR/vm$j.pub")\""; fi
            else
                echo "key_file = \"vm$a-vm$b.key\""
            fi
            if [[ $uplink == udp ]]; then echo "endpoint = \"$(tb_up_ip "$j"):$TB_PORT\""; fi
        done
        if [[ -n ${TB_CONFIG_EXTRA:-} ]]; then printf '\n%s\n' "$TB_CONFIG_EXTRA"; fi
    } >"$file"
}

tb_status() {
    local n=$1
    shift
    "$TB_BIN" status --socket "$(tb_sock "$n")" "$@"
}

tb_gw_start() {
    local n=$1 log pid i
    shift
    log=$TB_DIR/vm$n.log
    rm -f "$(tb_sock "$n")"
    ip netns exec "$(tb_ns "vm$n")" "$TB_BIN" run --config "$TB_DIR/vm$n.toml" "$@" \
        </dev/null >>"$log" 2>&1 &
    pid=$!
    echo "$pid" >"$TB_DIR/vm$n.pid"
    echo "$pid gateway-vm$n" >>"$TB_DIR/pids"
    for ((i = 0; i < TB_READY_TIMEOUT * 10; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            echo "testbed: error: the vm$n gateway exited during start; its log:" >&2
            sed 's/^/    /' "$log" >&2
            return 1
        fi
        if [[ -S $(tb_sock "$n") ]] && tb_status "$n" --json >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    echo "testbed: error: the vm$n gateway was not ready after ${TB_READY_TIMEOUT}s; its log:" >&2
    sed 's/^/    /' "$log" >&2
    return 1
}

tb_kill() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

tb_gw_stop() {
    local n=$1 pid i rc=0
    [[ -f $TB_DIR/vm$n.pid ]] || return 0
    pid=$(cat "$TB_DIR/vm$n.pid")
    rm -f "$TB_DIR/vm$n.pid"
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "testbed: warning: the vm$n gateway ignored SIGTERM for 5 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
    # Our own child: wait gives its exit status. Otherwise (another shell started it) 0.
    wait "$pid" 2>/dev/null || rc=$?
    [[ $rc == 127 ]] && rc=0
    return "$rc"
}

tb_bg() {
    local name=$1 log=$2
    shift 2
    ip netns exec "$(tb_ns "$name")" "$@" </dev/null >>"$log" 2>&1 &
    TB_LAST_PID=$!
    echo "$TB_LAST_PID $name $1" >>"$TB_DIR/pids"
}

tb_tcpdump() {
    local name=$1 log=$2 i
    shift 2
    tb_bg "$name" "$log" tcpdump "$@"
    for ((i = 0; i < 50; i++)); do
        grep -q "listening on" "$log" 2>/dev/null && return 0
        sleep 0.1
    done
    tb_die "tcpdump in $name did not start: $(cat "$log")"
}

tb_iperf3() {
    local n=$1 dst=$2 secs=$3 out
    shift 3
    for _ in 1 2 3 4 5; do
        # iperf3 3.12 exits 0 with -J even when it cannot connect: check "error" too. Its
        # warnings (e.g. UDP datagrams longer than the MSS) go to stderr, kept out of the JSON.
        if out=$(tb_x "vm$n" iperf3 -c "$dst" -t "$secs" -J "$@" 2>"$TB_DIR/iperf3-client.err") &&
            [[ -z $(jq -r '.error // empty' <<<"$out" 2>/dev/null) ]] &&
            jq -er '.end.sum_received.bits_per_second / 1e6 | . * 10 | round / 10' <<<"$out" 2>/dev/null; then
            return 0
        fi
        sleep 0.3 # the server may still be starting
    done
    echo "iperf3 failed: $(jq -r '.error // empty' <<<"$out" 2>/dev/null || echo "$out") $(cat "$TB_DIR/iperf3-client.err")" >&2
    return 1
}

tb_sshd() {
    local n=$1 addr=${2:-$(tb_ip "$1")} dir=$TB_DIR/ssh bin
    mkdir -p "$dir" /run/sshd && chmod 700 "$dir"
    { ssh-keygen -q -t ed25519 -N '' -C psp-testbed-host -f "$dir/host_key" </dev/null &&
        ssh-keygen -q -t ed25519 -N '' -C psp-testbed-client -f "$dir/id" </dev/null; } ||
        tb_die "ssh-keygen failed" || return 1
    cp "$dir/id.pub" "$dir/authorized_keys"
    cat >"$dir/sshd_config" <<EOF
ListenAddress $addr
Port 22
HostKey $dir/host_key
PidFile $dir/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile $dir/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
LogLevel ERROR
EOF
    bin=$(command -v sshd || echo /usr/sbin/sshd)
    "$bin" -t -f "$dir/sshd_config" || tb_die "sshd rejected its config" || return 1
    tb_bg "vm$n" "$dir/sshd.log" "$bin" -D -e -f "$dir/sshd_config"
    TB_SSH_OPTS=(-F /dev/null -i "$dir/id" -o IdentitiesOnly=yes -o BatchMode=yes
        -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5
        -o LogLevel=ERROR)
}

tb_ssh_wait() {
    local n=$1 addr=$2
    for _ in $(seq 20); do
        tb_x "vm$n" ssh "${TB_SSH_OPTS[@]}" "root@$addr" true 2>"$TB_DIR/ssh/client.err" && return 0
        sleep 0.25
    done
    tb_die "ssh login to $addr: $(cat "$TB_DIR/ssh/client.err")"
}

tb_pair() {
    local uplink=$1 suite=$2
    tb_init && tb_trap && tb_up 2 "$uplink" && tb_keys "$suite" &&
        tb_config 1 "$suite" "$uplink" && tb_config 2 "$suite" "$uplink"
}

tb_teardown() {
    local rc=$? ns pid _ pids
    [[ -n ${TB_SFX:-} ]] || return "$rc"
    # 1. What we started (recorded pids), politely first.
    if [[ -n ${TB_DIR:-} && -f $TB_DIR/pids ]]; then
        while read -r pid _; do
            kill -TERM "$pid" 2>/dev/null || true
        done <"$TB_DIR/pids"
    fi
    # 2. Anything still running inside this run's namespaces (children, daemonized helpers):
    # these namespaces are ours alone, so every process in them is one we started.
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E -- "-$TB_SFX\$"); do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        if [[ -n $pids ]]; then
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
            sleep 0.3
            pids=$(ip netns pids "$ns" 2>/dev/null)
            # shellcheck disable=SC2086
            [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
        fi
    done
    if [[ -n ${TB_DIR:-} && -f $TB_DIR/pids ]]; then
        while read -r pid _; do
            # `|| true`: a caller under `set -e` must not stop tearing down here (a pid
            # already gone, or a killed child's status 137).
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        done <"$TB_DIR/pids"
    fi
    # 3. The namespaces (deleting a namespace deletes its veths; the bridge goes with lan).
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E -- "-$TB_SFX\$"); do
        ip netns del "$ns" 2>/dev/null || true
    done
    # 4. The temp dir.
    if [[ -n ${TB_DIR:-} && -f $TB_DIR/.tb-created ]]; then
        rm -rf "$TB_DIR"
    fi
    return "$rc"
}
