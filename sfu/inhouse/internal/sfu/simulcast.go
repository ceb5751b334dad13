package sfu

import (
	"strings"

	"sfubench/sfu/inhouse/internal/signal"
)

// Simulcast. Only the server offers, so it asks a publisher for layers in
// its offer: the publish section lists them as rids to receive (RFC 8853),
// which a browser answers by sending each as a stream of its own, named by
// its rid in a header extension. pion v4.2.20 writes rids only into
// answers, so they are added to the offer's text; pion takes them from the
// answer and reports each layer as a track of its own (peer.onTrack).

// withLayers returns the offer sdp with its section mid asking for the
// first n layers of signal.Rids; n < 2 leaves it as it is, and so does a
// section that asks already (once an answer sent layers, pion's later
// offers repeat them).
func withLayers(sdp, mid string, n int) string {
	line := "a=mid:" + mid + "\r\n"
	at := strings.Index(sdp, line)
	if n < 2 || mid == "" || at < 0 {
		return sdp
	}
	start := strings.LastIndex(sdp[:at], "\r\nm=")
	end := strings.Index(sdp[at:], "\r\nm=")
	if end < 0 {
		end = len(sdp) - at
	}
	if strings.Contains(sdp[start+1:at+end], "\r\na=simulcast:") {
		return sdp
	}
	rids := signal.Rids[:n]
	var b strings.Builder
	b.WriteString(sdp[:at+len(line)])
	for _, rid := range rids {
		b.WriteString("a=rid:" + rid + " recv\r\n")
	}
	b.WriteString("a=simulcast:recv " + strings.Join(rids, ";") + "\r\n")
	b.WriteString(sdp[at+len(line):])
	return b.String()
}
