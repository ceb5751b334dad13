package main

import (
	"math"
	"strings"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
)

// Where an SFU negotiates REMB and no transport-wide feedback (LiveKit by
// default), a browser estimates its downlink itself and reports it in REMB,
// and the SFU picks each receiver's layers by it. A synthetic receiver does
// the same with a model of Chrome's remote estimator's rate control
// (AIMD): the estimate falls to a share of what arrives when the path shows
// congestion, loss or packets queued, and otherwise grows by a share a
// second, never beyond a multiple of what arrives. The signal is simpler
// than Chrome's (its delay trend is a filter over packet groups), so the
// estimate moves as Chrome's does on a full queue, not to its exact figures.
const (
	rembInterval  = 500 * time.Millisecond
	rembDecrease  = 0.85  // of the incoming rate, on congestion
	rembIncrease  = 1.08  // a second, without
	rembIncoming  = 1.5   // the estimate's cap: this times the incoming rate, plus rembHeadroom
	rembHeadroom  = 10e3  // bit/s
	rembFloor     = 30e3  // bit/s: the least estimate sent
	rembLossShare = 0.02  // lost packets in an interval that say congestion
	rembQueued    = 0.050 // s: a packet this long beyond its stream's quickest says congestion
)

// rembEstimate is one connection's estimate of its downlink; the poller's.
type rembEstimate struct {
	bitrate float64 // bit/s; 0 before the first interval
	bytes   int     // received in the interval
	since   time.Time
	counted map[uint32][2]int64 // each stream's packets expected and received at the last update
}

// rembDrivers are the drivers whose SFU allocates layers by REMB (LiveKit
// by default). Janus offers goog-remb too, but sent REMB its default study
// ran past what the clients carry (client-bound at 50-52 twice, its knee
// below that without): kept to where an allocator needs it.
var rembDrivers = map[string]bool{"livekit": true}

// driverInUse is the generator's -driver.
var driverInUse string

// negotiatesREMB tells whether pc's remote description asks for REMB: a
// browser then sends it of the packets that come without a transport-wide
// sequence number (LiveKit's, unless told to use transport-wide feedback).
func negotiatesREMB(pc *webrtc.PeerConnection) bool {
	d := pc.CurrentRemoteDescription()
	return rembDrivers[driverInUse] && d != nil && strings.Contains(d.SDP, " goog-remb\r\n")
}

// received counts a packet's bytes.
func (e *rembEstimate) received(n int) { e.bytes += n }

// due tells whether an interval has passed since the last update.
func (e *rembEstimate) due(now time.Time) bool {
	if e.since.IsZero() {
		e.since, e.counted, e.bytes = now, map[uint32][2]int64{}, 0
		return false
	}
	return now.Sub(e.since) >= rembInterval
}

// update moves the estimate on at now, an interval after the last, from
// what streams show, and returns it; false where no packet came without a
// transport-wide sequence number (transport-wide feedback has them all).
func (e *rembEstimate) update(now time.Time, streams []*fastStream) (float64, bool) {
	dt := now.Sub(e.since).Seconds()
	if e.bytes == 0 {
		e.since = now
		return 0, false
	}
	incoming := float64(e.bytes) * 8 / dt
	var expected, received int64
	queued := 0.0
	for _, s := range streams {
		if s.in == nil || s.in.kind != "video" {
			continue
		}
		x, r, q := s.in.congestion()
		last := e.counted[s.ssrc]
		expected, received = expected+x-last[0], received+r-last[1]
		e.counted[s.ssrc] = [2]int64{x, r}
		queued = max(queued, q)
	}
	lost := expected > 0 && float64(expected-received) > rembLossShare*float64(expected)
	switch limit := rembIncoming*incoming + rembHeadroom; {
	case e.bitrate == 0:
		e.bitrate = limit
	case lost || queued > rembQueued:
		e.bitrate = min(e.bitrate, rembDecrease*incoming)
	default:
		e.bitrate = min(e.bitrate*math.Pow(rembIncrease, dt), limit)
	}
	e.bitrate = max(e.bitrate, rembFloor)
	e.bytes, e.since = 0, now
	return e.bitrate, true
}

// rembPacket reports bitrate for the video streams among streams.
func rembPacket(bitrate float64, streams []*fastStream) *rtcp.ReceiverEstimatedMaximumBitrate {
	p := &rtcp.ReceiverEstimatedMaximumBitrate{Bitrate: float32(bitrate)}
	for _, s := range streams {
		if s.in != nil && s.in.kind == "video" {
			p.SSRCs = append(p.SSRCs, s.ssrc)
		}
	}
	return p
}
