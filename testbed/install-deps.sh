#!/usr/bin/env bash
# testbed/install-deps.sh: install what the testbed scripts and the root-only integration tests
# need. Idempotent: runs `apt-get update` + `apt-get install` only when a tool is missing, and
# does not start any service (sshd is started by demo.sh inside a namespace, never on the host).
#
# Usage: testbed/install-deps.sh          (as root; Debian/Ubuntu)
# Exit: 0 when everything is present afterwards, 1 otherwise (one clear line on stderr).
set -euo pipefail

die() { echo "install-deps: error: $*" >&2; exit 1; }

# command -> Debian package
declare -A PKG=(
    [ip]=iproute2
    [bridge]=iproute2
    [tc]=iproute2
    [ps]=procps
    [sysctl]=procps
    [pkill]=procps
    [iperf3]=iperf3
    [tcpdump]=tcpdump
    [ssh]=openssh-client
    [ssh-keygen]=openssh-client
    [scp]=openssh-client
    [sshd]=openssh-server
    [socat]=socat
    [ping]=iputils-ping
    [sha256sum]=coreutils
    [timeout]=coreutils
    [jq]=jq
    # psp-gateway/tests/sessions_attacks.rs: eve in the middle of path 1 (a bridge filter).
    [nft]=nftables
    # psp-gateway/tests/dissector.rs runs the Wireshark dissector under Debian's tshark.
    [tshark]=tshark
    # `promtool check metrics` in psp-gateway/tests/metrics.rs (Debian ships it with the server;
    # the policy-rc.d below keeps that from starting).
    [promtool]=prometheus
    # psp-gateway/tests/package.rs: `systemd-analyze verify` and `security --offline` on the
    # packaged unit (systemd need not be PID 1), the daemon under `setpriv` as the unit runs it,
    # `man -w` on the installed pages.
    [systemd-analyze]=systemd
    [setpriv]=util-linux
    [man]=man-db
    # testbed/thesis-eval.sh: SIP calls with RTP media (SIPp; Debian names the package
    # sip-tester), ARP round trips (iputils' arping, which times each request/reply).
    [sipp]=sip-tester
    [arping]=iputils-arping
    [ethtool]=ethtool
    # testbed/multipath.sh draws docs/multipath.png with it.
    [gnuplot]=gnuplot-nox
    # testbed/compare.sh: the wireguard-go anchor (no wireguard kernel module here) and `wg`,
    # which configures it and boringtun (anchors/*.sh install them too, if run on their own).
    [wireguard-go]=wireguard-go
    [wg]=wireguard-tools
    # testbed/embedded.sh (and .ci/run): psp-core's known-answer program on a Cortex-M4.
    [qemu-system-arm]=qemu-system-arm
)

have() {
    # sshd lives in /usr/sbin, which is not always on a non-root PATH.
    command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]] || [[ -x "/sbin/$1" ]]
}

[[ $(id -u) -eq 0 ]] || die "run as root (network namespaces and apt-get need it)"

missing=()
for cmd in "${!PKG[@]}"; do
    have "$cmd" || missing+=("${PKG[$cmd]}")
done
# Files rather than commands: the font congestion_report draws its chart with.
FONT=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
[[ -f $FONT ]] || missing+=(fonts-dejavu-core)
if ((${#missing[@]})); then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install them"
    echo "install-deps: installing ${missing[*]}" >&2
    # Keep package scripts from starting services (sshd) on the host: a temporary
    # policy-rc.d answering "action forbidden", removed again on every exit path.
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    # wireshark-common (pulled in by tshark) asks whether non-root users may capture: answer
    # "no" up front (no setuid dumpcap, no wireshark group); noninteractive would pick it too.
    if printf '%s\n' "${missing[@]}" | grep -qx tshark &&
        command -v debconf-set-selections >/dev/null; then
        echo "wireshark-common wireshark-common/install-setuid boolean false" |
            debconf-set-selections
    fi
    apt-get update -qq >&2 || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
        die "apt-get install ${missing[*]} failed"
    for cmd in "${!PKG[@]}"; do
        have "$cmd" || die "$cmd still missing after installing ${PKG[$cmd]}"
    done
    [[ -f $FONT ]] || die "$FONT still missing after installing fonts-dejavu-core"
fi

command -v cargo >/dev/null 2>&1 ||
    die "cargo not found: install the Rust toolchain (https://rustup.rs), then run again"
echo "install-deps: all present" >&2
