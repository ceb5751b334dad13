#!/bin/sh
# Installs Janus 1.1.2 and janus.js from Debian; idempotent. Used by the local lab and by cloud-init.
set -eu
# Debian's package enables a janus.service of its own, on the ports this adapter's server takes: the
# Janus under test is the one the lab or `sfubench serve` starts, never the packaged service.
quiet_packaged_service() {
  if [ -d /run/systemd/system ]; then
    systemctl disable --now janus.service >/dev/null 2>&1 || true
  fi
}
want=1.1.2
have=$(dpkg-query -W -f='${Version}' janus 2>/dev/null || true)
js=$(dpkg-query -W -f='${Status}' libjs-janus-gateway 2>/dev/null || true)
case "$have" in
  "$want"*) [ "$js" = "install ok installed" ] && { quiet_packaged_service; exit 0; } ;;
esac
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q janus libjs-janus-gateway >/dev/null
have=$(dpkg-query -W -f='${Version}' janus)
case "$have" in
  "$want"*) ;;
  *) echo "janus: Debian offers $have, the adapter pins $want" >&2; exit 1 ;;
esac
quiet_packaged_service
