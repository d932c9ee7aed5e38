#!/usr/bin/env bash
# testbed/vms/customize.sh PHASE KIND ROOT [HOST_PUBKEY]: mmdebstrap's hooks for the guest
# images of testbed/vms.sh (testbed/vms/image.sh runs them; KIND is vm or ct, ROOT the new tree).
#   setup      before any package is installed: the VM's initramfs gets only the modules that
#              mount the root file system (virtio_pci, virtio_blk, ext4): 4 MB instead of 36,
#              which TCG unpacks in a fraction of the time
#   customize  after: what an administrator would set up on a host before installing
#              psp-gateway: the network (systemd-networkd), and for VMs the root file system
#              entry and ssh access
set -euo pipefail
phase=$1 kind=$2 root=$3 hostkey=${4:-}
die() { echo "customize: error: $*" >&2; exit 1; }

if [[ $phase == setup ]]; then
    [[ $kind == vm ]] || exit 0
    mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/usr/share/initramfs-tools/modules.d"
    echo MODULES=list >"$root/etc/initramfs-tools/conf.d/psp-vms"
    printf 'virtio_pci\nvirtio_blk\next4\n' >"$root/usr/share/initramfs-tools/modules.d/psp-vms"
    exit 0
fi

rm -f "$root/etc/hostname"
: >"$root/etc/machine-id"
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/20-psp-uplinks.network" <<'NET'
# The PSP uplinks (path 1 and path 2): up, no address, no IPv6, so nothing but PSP frames
# (psp-gateway's raw uplinks) leaves them. network-online.target waits for their carrier.
[Match]
Name=eth1 eth2

[Link]
RequiredForOnline=carrier

[Network]
LinkLocalAddressing=no
IPv6AcceptRA=no
LLDP=no
EmitLLDP=no
NET
cat >"$root/etc/sysctl.d/60-psp-uplinks.conf" <<'SYS'
# No IPv6 on the PSP uplinks (udev applies these when the interfaces appear).
net.ipv6.conf.eth1.disable_ipv6 = 1
net.ipv6.conf.eth2.disable_ipv6 = 1
SYS
chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1 ||
    die "cannot enable systemd-networkd"

[[ $kind == vm ]] || exit 0

for n in 1 2 3; do
    cat >"$root/etc/systemd/network/10-mgmt-$n.network" <<NET
# The management link of guest $n (testbed/vms.sh gives its eth0 this MAC).
[Match]
MACAddress=52:54:00:99:00:0$n

[Link]
RequiredForOnline=no

[Network]
Address=192.168.99.$n/24
LinkLocalAddressing=no
IPv6AcceptRA=no
NET
done
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$root/etc/fstab"
mkdir -p -m 700 "$root/root/.ssh"
# Guest to guest (scp through the tunnel; the group key over ssh): one pair every guest of
# this image has. The host's own key ($hostkey) logs in too.
ssh-keygen -q -t ed25519 -N '' -C psp-vms-guest -f "$root/root/.ssh/id_ed25519" </dev/null
cat "$hostkey" "$root/root/.ssh/id_ed25519.pub" >"$root/root/.ssh/authorized_keys"
printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' \
    >"$root/root/.ssh/config"
chmod 600 "$root/root/.ssh/"*
# Keys only; no DNS look-ups (the guests have no resolver).
printf 'PasswordAuthentication no\nUseDNS no\n' >"$root/etc/ssh/sshd_config.d/psp-vms.conf"
