#!/bin/sh
# Jitsi's parts are systemd services of their own (the packages install them): this is the server
# process `sfubench serve` starts and watches. It (re)starts them for the run, stays in the
# foreground while all of them run, exits 1 when one stops, and stops them when it is stopped.
set -u
services="prosody jicofo jitsi-videobridge2"
stop() {
  systemctl stop $services
  exit 0
}
trap stop TERM INT
systemctl restart $services || exit 1
while systemctl is-active --quiet $services; do
  sleep 2 &
  wait $!
done
echo "jitsi: a service stopped: $(systemctl is-active $services | paste -sd' ')" >&2
exit 1
