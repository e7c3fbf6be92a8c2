#!/bin/busybox sh
# /init of the portable VM tier's initramfs (busybox-static userland).
#
# Builds the guest's root from the host's: the host's / arrives read-only over
# virtio-9p, a tmpfs overlay on top takes every write (nothing reaches the
# host), then tests/vm/guest.sh runs chrooted in it with the host's toolchains.
# The host's temp dir arrives read-write as the result share.

/bin/busybox --install -s /bin
export PATH=/bin

mount -t devtmpfs devtmpfs /dev
# The initramfs carries no /dev/console node (building one would need root on
# the host), so the kernel started us without stdio: attach it now.
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

power_off() {
  echo "vm-init: $*"
  sync
  poweroff -f
}

# Order computed by run-vm.sh from modules.dep: dependencies first.
while read -r module; do
  insmod "/modules/$module.ko" || power_off "insmod $module failed"
done </modules/order

mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /lower ||
  power_off "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 tmpfs /upper
mkdir -p /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work /newroot ||
  power_off "cannot mount the overlay over the host root"

# The host's /proc, /sys, /dev and /run show through 9p; cover them with the guest's own.
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t securityfs securityfs /newroot/sys/kernel/security
mount -t devtmpfs devtmpfs /newroot/dev
# What udev would add; bash's process substitution needs /dev/fd.
ln -s /proc/self/fd /newroot/dev/fd
ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout
ln -s /proc/self/fd/2 /newroot/dev/stderr
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/vm-out
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 vmout /newroot/run/vm-out ||
  power_off "cannot mount the result share (9p tag vmout)"

echo "vm-init: root ready, running guest.sh"
chroot /newroot /bin/bash /run/vm-out/guest.sh
echo "vm-init: guest.sh exited $?"
power_off "powering off"
