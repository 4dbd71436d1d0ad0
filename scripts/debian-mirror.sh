# Sourced by the rigs (scripts/systemd-rig.sh, scripts/session-rig.sh): debian_mirror prints the
# Debian mirror the machine's apt already uses, so that host names stay out of the repository.
debian_mirror() {
  local mirror
  mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  [ -n "$mirror" ] || mirror=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  [ -n "$mirror" ] || { echo "$(basename "$0"): no Debian mirror named in /etc/apt" >&2; return 1; }
  echo "$mirror"
}
