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
