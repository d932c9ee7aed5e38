# shellcheck shell=bash
# Helpers shared by the anchor scripts and compare.sh (sourced, not run).
#
# Addresses (override from the environment): the uplink IPs on up0 and the inner (tunnel) IPs.
: "${UP1:=192.168.50.1}" "${UP2:=192.168.50.2}"
: "${IN1:=10.77.0.1}" "${IN2:=10.77.0.2}" "${IN_PREFIX:=24}"
# Where self-installed anchors live (boringtun's cargo root, ...).
: "${PSP_COMPARE_CACHE:=/var/cache/psp-compare}"

die() {
    echo "${0##*/}: error: $*" >&2
    exit 1
}
note() { echo "[${0##*/}] $*" >&2; }

# apt_install PKG...: install the Debian packages that are missing (idempotent).
apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    note "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Keep package scripts from starting services (openvpn, tinc) on the host: a temporary
    # policy-rc.d answering "action forbidden" (as testbed/install-deps.sh does).
    local policy=/usr/sbin/policy-rc.d made=0 rc=0
    if [ ! -e $policy ]; then
        printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy && made=1
    fi
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=1
    fi
    [ $made -eq 1 ] && rm -f $policy
    [ $rc -eq 0 ] || die "apt-get install ${missing[*]} failed"
}

# bg_in_ns NS PIDFILE LOGFILE CMD...: start CMD inside namespace NS in the background (stdout
# and stderr to LOGFILE) and write its pid to PIDFILE (`ip netns exec` execs CMD: same pid).
bg_in_ns() {
    local ns=$1 pidfile=$2 logfile=$3
    shift 3
    ip netns exec "$ns" "$@" >"$logfile" 2>&1 </dev/null &
    echo $! >"$pidfile"
}

# stop_pidfiles FILE...: SIGTERM the pid in each file, wait up to 5 s, then SIGKILL; remove the
# files. Only pids we recorded ourselves are touched.
stop_pidfiles() {
    local f pid pids=() i
    for f in "$@"; do
        [ -s "$f" ] || continue
        pid=$(<"$f")
        kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
        rm -f "$f"
    done
    for ((i = 0; i < 50; i++)); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.2
}

# wait_for TIMEOUT_S CMD...: retry CMD every 0.2 s until it succeeds or TIMEOUT_S pass.
wait_for() {
    local t=$1 i
    shift
    for ((i = 0; i < t * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

# wg_keys DIR: one WireGuard private key per side, DIR/vm1.key and DIR/vm2.key.
wg_keys() {
    (
        umask 077
        wg genkey >"$1/vm1.key"
        wg genkey >"$1/vm2.key"
    )
}

# wg_link DIR NS1 NS2 IF1 IF2 WHAT LOGS: once both userspace WireGuard daemons (WHAT, logs in
# LOGS) have their UAPI sockets, gives each side its key and the other as peer, the inner
# addresses and MTU 1420, and checks that a ping gets through.
wg_link() {
    local d=$1 ns1=$2 ns2=$3 if1=$4 if2=$5 what=$6 logs=$7 pub1 pub2 i
    pub1=$(wg pubkey <"$d/vm1.key")
    pub2=$(wg pubkey <"$d/vm2.key")
    for i in "$if1" "$if2"; do
        wait_for 10 test -S "/var/run/wireguard/$i.sock" ||
            die "$what did not create its UAPI socket for $i (logs: $logs)"
    done
    ip netns exec "$ns1" wg set "$if1" private-key "$d/vm1.key" listen-port 51820 \
        peer "$pub2" endpoint "$UP2:51820" allowed-ips "$IN2/32"
    ip netns exec "$ns2" wg set "$if2" private-key "$d/vm2.key" listen-port 51820 \
        peer "$pub1" endpoint "$UP1:51820" allowed-ips "$IN1/32"
    ip -n "$ns1" addr add "$IN1/$IN_PREFIX" dev "$if1"
    ip -n "$ns2" addr add "$IN2/$IN_PREFIX" dev "$if2"
    ip -n "$ns1" link set "$if1" mtu 1420 up
    ip -n "$ns2" link set "$if2" mtu 1420 up
    wait_for 10 ip netns exec "$ns1" ping -c1 -W1 "$IN2" ||
        die "$what tunnel does not carry ping (logs: $logs)"
}
