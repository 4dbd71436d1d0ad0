#!/bin/sh
# Runs COMMAND in a cgroup below the caller's scope, as a job runner that runs a sandbox of its own
# does: makes 100 cgroups below its scope, removing every other one as jobs come and go, then
# makes SCOPE/leaf (the 101st), moves itself there, gives it the memory controller (the scope then
# holds no process of its own, as cgroup2 asks), and execs COMMAND. systemd-oomd, which kills leaf
# cgroups, then kills this one rather than the scope, and the library must have watched it.
#
#   leaf.sh COMMAND...
set -eu
scope="/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)"
i=1
while [ $i -le 100 ]; do
  mkdir "$scope/job$i"
  [ $((i % 2)) = 0 ] && rmdir "$scope/job$((i - 1))"
  i=$((i + 1))
done
mkdir "$scope/leaf"
echo $$ >"$scope/leaf/cgroup.procs"
echo +memory >"$scope/cgroup.subtree_control"
exec "$@"
