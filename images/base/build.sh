#!/usr/bin/env bash
# Build the Debian bookworm base image for containerized nodes with debootstrap and `docker import`.
#
#   images/base/build.sh [TAG]     (TAG defaults to ranklog-base:<content hash>)
#
# The tag is the sha256 of packages.txt and this script, so a second run finds the image and exits
# at once; editing either file builds a new one. The root file system is assembled in a temporary
# directory that is removed on exit. Output: the image tag on the last line of stdout.
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), SUITE (default bookworm).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
suite="${SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
hash="$(cat "$here/packages.txt" "$here/build.sh" <(echo "$suite") | sha256sum | cut -c1-16)"
tag="${1:-ranklog-base:$hash}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
# One build per tag at a time: a concurrent caller waits and then finds the image.
exec 9>"/var/tmp/ranklog-base-$hash.lock"
flock 9
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

packages="$(grep -v '^\s*#' "$here/packages.txt" | grep -v '^\s*$' | paste -sd, -)"
rootfs="$(mktemp -d /var/tmp/ranklog-rootfs.XXXXXX)"
trap 'rm -rf --one-file-system "$rootfs"' EXIT

echo "debootstrap $suite into $rootfs ($packages)" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >&2

# Services come from the roles, never from package defaults: a node must listen only where the
# inventory says. Console/udev/time units make no sense in a container and only slow the boot.
for unit in prometheus.service prometheus-alertmanager.service prometheus-node-exporter.service; do
  if [ -e "$rootfs/lib/systemd/system/$unit" ]; then chroot "$rootfs" systemctl disable "$unit" >&2; fi
done
chroot "$rootfs" systemctl mask systemd-udevd.service systemd-udevd-kernel.socket \
  systemd-udevd-control.socket getty.target console-getty.service systemd-timesyncd.service \
  systemd-firstboot.service sys-kernel-config.mount >&2
chroot "$rootfs" systemctl enable ssh.service >/dev/null

# Host keys are made per container at first boot, never shared through the image.
rm -f "$rootfs"/etc/ssh/ssh_host_*
install -d "$rootfs/etc/systemd/system/ssh.service.d"
cat > "$rootfs/etc/systemd/system/ssh.service.d/hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
# Key-only root login for the controller; the test injects its per-run public key.
cat > "$rootfs/etc/ssh/sshd_config.d/ranklog-test.conf" <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
CONF
install -d -m 0700 "$rootfs/root/.ssh"

# Package index and apt config so roles that call apt find the pre-baked packages offline.
echo "deb $mirror $suite main" > "$rootfs/etc/apt/sources.list"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/tmp/* "$rootfs"/var/log/*.log
: > "$rootfs/etc/machine-id"

tar -C "$rootfs" --numeric-owner -c . | docker import \
  --change 'CMD ["/lib/systemd/systemd"]' \
  --change 'ENV container=docker' \
  - "$tag" >&2
echo "$tag"
