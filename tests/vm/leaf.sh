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
# The same tree, made in the same order, but the chain by one mkdir -p and the walk down it one
# relative `cd -P` a level: a mkdir process a level and a path of up to 900 levels looked up for
# each (0.9 s against 0.05 s natively, on a tmpfs) cost the case many seconds under TCG.
chain=leaf
i=1
while [ $i -lt 900 ]; do
  chain="$chain/d"
  i=$((i + 1))
done
mkdir -p "$scope/$chain"
echo $$ >"$scope/$chain/cgroup.procs"
back="$PWD"
cd -P "$scope"
echo +memory >cgroup.subtree_control
cd -P leaf
i=1
while [ $i -lt 900 ]; do
  echo +memory >cgroup.subtree_control
  cd -P d
  i=$((i + 1))
done
cd "$back"
exec "$@"
