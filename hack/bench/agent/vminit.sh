#!/usr/bin/busybox sh
# /init of the agent footprint VMs (hack/bench/agent -footprint -vm): the
# base initramfs of hack/kernels (busybox, ip, the network modules) with
# the virtio network driver, the agent and the benchmark on top. Mounts
# the pseudo file systems, brings up qemu's user-mode network (this
# machine is 10.0.2.2), runs the benchmark with the footprint.* options of
# the kernel command line, and powers off. The benchmark prints its result
# on a line starting with NETTUNE-FOOTPRINT.
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
for m in veth inet_diag tcp_diag; do
	modprobe "$m" || echo "footprint: modprobe $m failed"
done
release=$(uname -r)
while read -r m; do
	[ -n "$m" ] && { insmod "/lib/modules/$release/footprint/$m" || echo "footprint: insmod $m failed"; }
done </footprint/modules
/usr/sbin/ip link set lo up
/usr/sbin/ip link set eth0 up
/usr/sbin/ip addr add 10.0.2.15/24 dev eth0
/usr/sbin/ip route add default via 10.0.2.2
echo 2 >/proc/sys/kernel/printk
# footprint.window=60s footprint.applies=5 ... -> -window 60s -applies 5 ...
set -- $(tr ' ' '\n' </proc/cmdline | sed -n 's/^footprint\.\([a-z]*\)=/-\1 /p')
/footprint/bench-agent -in-vm -agent /footprint/nettune-agent -agent-kubeconfig /footprint/kubeconfig "$@"
sync
poweroff -f
