#!/bin/busybox sh
# /init of the kernel test VMs (hack/kernels, make test-kernels): mounts the
# pseudo file systems, lets the kernel load modules through busybox
# modprobe, runs every test binary listed in /nettune/suites with -test.v in
# its package's directory, and powers off. The host reads the lines
# starting with "NETTUNE-KERNELS"; the rest is the tests' own output.
set -f # the -test.run and -test.skip patterns are not globs
bb=/usr/bin/busybox
$bb mount -t proc proc /proc
$bb --install -s # busybox applets as links, where no real program is
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /run/netns
export PATH=/usr/local/bin:/usr/sbin:/usr/bin HOME=/root TMPDIR=/tmp LANG=C
echo /usr/sbin/modprobe >/proc/sys/kernel/modprobe
for m in veth inet_diag tcp_diag udp_diag nf_tables; do
	modprobe "$m" || echo "NETTUNE-KERNELS warning modprobe $m failed"
done
/usr/sbin/ip link set lo up
# Only emergencies on the console while the tests run (dmesg follows them).
echo 2 >/proc/sys/kernel/printk

uptime() { cut -d' ' -f1 /proc/uptime; }
echo "NETTUNE-KERNELS boot release=$(uname -r) machine=$(uname -m) uptime=$(uptime)"
while read -r dir bin args; do
	[ -n "$dir" ] || continue
	echo "NETTUNE-KERNELS start suite=$dir"
	t0=$(uptime)
	(cd "/nettune/$dir" && exec "./$bin" $args) </dev/null 2>&1
	rc=$?
	echo
	echo "NETTUNE-KERNELS result suite=$dir exit=$rc seconds=$(awk "BEGIN { printf \"%.1f\", $(uptime) - $t0 }")"
done </nettune/suites
echo "NETTUNE-KERNELS dmesg"
dmesg
echo "NETTUNE-KERNELS done uptime=$(uptime)"
sync
poweroff -f
