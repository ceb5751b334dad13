package main

import (
	"time"

	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/directrtp"
	"sfubench/sfu/inhouse/srtpkeys"
)

// The fast path's sending half: once a connection is up, what a participant
// publishes is encrypted with a context of its own and written to the
// selected pair's socket (directrtp), from the pacer's thread, instead of
// crossing pion's SRTP session, demultiplexer and ICE connection. The
// connection's Sender (sender reports, the NACK responder, the resend
// budget) sees every packet, whether the publisher writes past pion's track
// (SentStream.Write) or through it; RTCP stays pion's.

// startSending starts the connection's writer on this socket once DTLS has
// given the keys, if the selected candidate pair is this socket's. The
// poller's, at most every 50 ms.
func (c *fastConn) startSending(now time.Time) {
	if c.sending {
		return
	}
	w := c.peer.writer.Load()
	if w == nil || now.Sub(c.sendChecked) < 50*time.Millisecond {
		return
	}
	if w.Started() { // by this socket or another of the connection's
		c.sending = true
		return
	}
	c.sendChecked = now
	pc := c.peer.pc.Load()
	if pc == nil {
		return
	}
	dt := pc.SCTP().Transport()
	if dt == nil || dt.State() != webrtc.DTLSTransportStateConnected {
		return
	}
	pair, err := dt.ICETransport().GetSelectedCandidatePair()
	if err != nil {
		return
	}
	local, remote, err := directrtp.SelectedAddrs(pair)
	if err != nil || local != c.sock.local.AddrPort() {
		return // another socket's, or not yet
	}
	ours, _, err := srtpkeys.Contexts(dt)
	if err != nil {
		return
	}
	dt.ICETransport().OnSelectedCandidatePairChange(func(p *webrtc.ICECandidatePair) {
		if _, to, err := directrtp.SelectedAddrs(p); err == nil {
			w.Redirect(to)
		}
	})
	w.Start(c, ours, remote)
}
