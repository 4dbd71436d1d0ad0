#!/bin/sh
# Runs COMMAND in a cgroup below the caller's scope, as a tool that runs a sandbox of its own does:
# makes SCOPE/leaf, moves itself there, gives it the memory controller (the scope then holds no
# process of its own, as cgroup2 asks), and execs COMMAND. systemd-oomd, which kills leaf cgroups,
# then kills this one rather than the scope.
#
#   leaf.sh COMMAND...
set -eu
scope="/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)"
mkdir "$scope/leaf"
echo $$ >"$scope/leaf/cgroup.procs"
echo +memory >"$scope/cgroup.subtree_control"
exec "$@"
