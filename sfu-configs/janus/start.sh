#!/bin/sh
# Janus loads every plugin and transport in its folders; link in only the ones this adapter uses.
set -eu
conf=$1
lib=/usr/lib/x86_64-linux-gnu/janus
[ -d "$lib" ] || lib=$(dirname "$(dpkg -L janus | grep -m1 '/plugins/libjanus_videoroom.so$')")/..
mkdir -p "$conf/plugins" "$conf/transports" "$conf/none"
ln -sf "$lib/plugins/libjanus_videoroom.so" "$conf/plugins/"
ln -sf "$lib/transports/libjanus_websockets.so" "$lib/transports/libjanus_http.so" "$conf/transports/"
exec janus -F "$conf" -C "$conf/janus.jcfg" -o
