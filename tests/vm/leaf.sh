#!/bin/sh
# Runs COMMAND in a cgroup deep below the caller's scope, as a job runner that runs a sandbox of its
# own does: makes 100 cgroups below its scope, removing every other one as jobs come and go, then
# makes SCOPE/leaf and a chain of 899 cgroups below it (SCOPE/leaf/d/d/...: 900 levels, more than
# the 512 descriptors scenarios.sh leaves the daemon that watches it, fewer than the 1,024 oomd
# has), moves itself to the bottom, gives every level the memory controller (a level then holds no
# process of its own, as cgroup2 asks), and execs COMMAND. systemd-oomd, which kills leaf cgroups,
# then kills the bottom one rather than the scope, and the library must have watched it (issue 60,
# item 6: a walk that held a descriptor a level saw nothing past its limit, and warned of nothing).
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
bottom="$scope/leaf"
mkdir "$bottom"
i=1
while [ $i -lt 900 ]; do
  bottom="$bottom/d"
  mkdir "$bottom"
  i=$((i + 1))
done
echo $$ >"$bottom/cgroup.procs"
level="$scope"
echo +memory >"$level/cgroup.subtree_control"
level="$level/leaf"
while [ "$level" != "$bottom" ]; do
  echo +memory >"$level/cgroup.subtree_control"
  level="$level/d"
done
exec "$@"
