#!/bin/sh
# Installs Jitsi Meet (the bridge, jicofo, prosody and the web app) from Jitsi's Debian repository,
# pinned, on a Debian 12 VM: the cloud-init script of terraform/ for SFU=jitsi. Idempotent.
#   install.sh CACHE_DIR   JITSI_HOSTNAME: the name or address clients reach the VM at (default:
#   its private address, where the run's clients are).
set -eu
version=2.0.10184
host=${JITSI_HOSTNAME:-$(ip -4 -o route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
[ -n "$host" ] || { echo "jitsi: set JITSI_HOSTNAME: this VM has no private IPv4 address" >&2; exit 1; }
have=$(dpkg-query -W -f='${Version}' jitsi-meet 2>/dev/null || true)
case "$have" in "$version"*) exit 0 ;; esac
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q gnupg2 curl nginx-full apt-transport-https >/dev/null
curl -fsSL https://download.jitsi.org/jitsi-key.gpg.key | gpg --dearmor >/usr/share/keyrings/jitsi-keyring.gpg
echo "deb [signed-by=/usr/share/keyrings/jitsi-keyring.gpg] https://download.jitsi.org stable/" \
  >/etc/apt/sources.list.d/jitsi-stable.list
echo "jitsi-videobridge2 jitsi-videobridge/jvb-hostname string $host" | debconf-set-selections
echo "jitsi-meet-web-config jitsi-meet/cert-choice select Generate a new self-signed certificate" | debconf-set-selections
apt-get update -q >/dev/null
apt-get install -y -q "jitsi-meet=$version*" >/dev/null
have=$(dpkg-query -W -f='${Version}' jitsi-meet)
case "$have" in
  "$version"*) ;;
  *) echo "jitsi: the repository offers $have, the adapter pins $version" >&2; exit 1 ;;
esac
