# shellcheck shell=bash
# testbed/vms/image.sh: Debian guest images for testbed/vms.sh, built on this machine from
# Debian's packages with mmdebstrap (no prebuilt image is downloaded), cached under
# /var/cache/psp-vms/ in a directory named after a hash of everything that goes into them (this
# file, customize.sh, the suite, the package list), so a second run reuses them and an edit to
# either file rebuilds them. A fresh machine builds them (vm: ~4 min, ct: ~1 min on 2 vCPUs).
#
# Two kinds:
#   vm   for QEMU: systemd as init, Debian's kernel (linux-image-amd64: macsec, wireguard and
#        sch_netem as modules) and its initramfs, openssh-server, iperf3, wireguard-tools;
#        an ext4 file system image (root.img), the kernel and initrd beside it, and an ssh key
#        pair made here (id_ed25519: the host's key to the guests' root accounts; the guests
#        also carry a pair of their own for guest-to-guest scp).
#   ct   for systemd-nspawn (CI): the smallest tree that boots systemd as PID 1 and runs the
#        package: systemd, dbus, iproute2, procps, ping. No kernel, no ssh (the host enters the
#        containers with nsenter).
#
# Both: systemd-networkd brings the uplinks eth1 and eth2 up with no address and no IPv6 (so
# nothing but PSP leaves them) and holds network-online.target until they have carrier; the VM
# image also gives eth0, the management link, 192.168.99.N/24 by MAC (52:54:00:99:00:0N).
# No /etc/hostname (vms.sh names each guest: systemd.hostname= or nspawn --hostname), an empty
# /etc/machine-id (each guest makes its own at first boot).
#
# Sourced by vms.sh; needs vms_log and vms_die (both write to stderr).
# API: vms_image KIND -> builds unless cached, prints the image's directory.

VMS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VMS_CACHE=${VMS_CACHE:-/var/cache/psp-vms}
VMS_SUITE=bookworm
VMS_PKGS_CT=systemd,systemd-sysv,dbus,iproute2,iputils-ping,procps
VMS_PKGS_VM=$VMS_PKGS_CT,udev,kmod,linux-image-amd64,openssh-server,openssh-client,iperf3,wireguard-tools,ethtool,tcpdump

vms__image_hash() {
    local kind=$1 pkgs=$2
    { cat "${BASH_SOURCE[0]}" "$VMS_HERE/customize.sh"; echo "$kind $VMS_SUITE $pkgs"; } |
        sha256sum | cut -c1-16
}

# vms_image KIND: build the image of KIND (vm|ct) unless cached; print its directory.
vms_image() {
    local kind=$1 pkgs hash dir tmp t0
    case $kind in
    vm) pkgs=$VMS_PKGS_VM ;;
    ct) pkgs=$VMS_PKGS_CT ;;
    *) vms_die "vms_image: unknown kind '$kind'" ;;
    esac
    hash=$(vms__image_hash "$kind" "$pkgs")
    dir=$VMS_CACHE/$kind-$hash
    mkdir -p "$VMS_CACHE"
    # One builder at a time per image (two runs started together wait for each other).
    exec {lock}>"$VMS_CACHE/.lock-$kind"
    flock "$lock"
    if [[ -f $dir/ready ]]; then
        vms_log "image $kind: cached at $dir"
        exec {lock}>&-
        echo "$dir"
        return 0
    fi
    rm -rf "$dir" "$dir.tmp"
    tmp=$dir.tmp
    mkdir -p "$tmp"
    t0=$SECONDS
    vms_log "image $kind: building with mmdebstrap ($VMS_SUITE: $pkgs)"
    if [[ $kind == vm ]]; then
        ssh-keygen -q -t ed25519 -N '' -C psp-vms-host -f "$tmp/id_ed25519" </dev/null
    fi
    # minbase + the packages, no documentation; the hook writes the guests' configuration.
    if ! mmdebstrap --variant=minbase --include="$pkgs" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
        --setup-hook="bash '$VMS_HERE/customize.sh' setup $kind \"\$1\"" \
        --customize-hook="bash '$VMS_HERE/customize.sh' customize $kind \"\$1\" '$tmp/id_ed25519.pub'" \
        "$VMS_SUITE" "$tmp/root" >"$tmp/mmdebstrap.log" 2>&1; then
        tail -n 30 "$tmp/mmdebstrap.log" >&2
        vms_die "mmdebstrap failed (log: $tmp/mmdebstrap.log)"
    fi
    if [[ $kind == vm ]]; then
        cp "$tmp"/root/boot/vmlinuz-* "$tmp/vmlinuz"
        cp "$tmp"/root/boot/initrd.img-* "$tmp/initrd.img"
        # 3 GiB, sparse; the guests write to qcow2 overlays on top of it.
        mkfs.ext4 -q -L psp-root -d "$tmp/root" "$tmp/root.img" 3G >&2 ||
            vms_die "mkfs.ext4 -d failed"
        rm -rf "$tmp/root"
    fi
    echo "$((SECONDS - t0))" >"$tmp/build-seconds"
    touch "$tmp/ready"
    mv "$tmp" "$dir"
    # Older images of this kind (other inputs) and their KVM probes go.
    find "$VMS_CACHE" -mindepth 1 -maxdepth 1 \( -name "$kind-*" -o -name "accel-probe-*-$kind-*" \) \
        ! -name "$kind-$hash" ! -name "accel-probe-*-$kind-$hash" -exec rm -rf {} +
    vms_log "image $kind: built in $((SECONDS - t0)) s at $dir"
    exec {lock}>&-
    echo "$dir"
}
