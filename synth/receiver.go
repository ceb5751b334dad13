package main

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
	"sfubench/sfu/inhouse/recvfb"
	"sfubench/sfu/inhouse/srtpkeys"
)

// A connection's receiving half of the fast path (fastpath.go) once its
// keys are known: decryption, the browser-like feedback and the streams'
// counters, in the poller's thread.

// receiver is a connection's fast path once keys are known: the SRTP
// context of what the SFU sends, the bound streams and their feedback. The
// poller's alone.
type receiver struct {
	conn     *fastConn
	rtcp     func([]rtcp.Packet) error // writes on the connection (pion's SRTCP)
	srtp     srtpkeys.RTP              // the SFU's: decrypts what it sends
	feedback *recvfb.Streams
	twccExt  uint8
	twcc     *twcc.Recorder
	remb     *rembEstimate // where the SFU asks for REMB
	start    time.Time
	streams  streamTable
	gen      uint64 // the registrations' count when streams was last checked
	plain    []byte // a decrypted packet
	pc       *webrtc.PeerConnection
	sdp      string          // the remote description declared holds the SSRCs of
	declared map[uint32]bool // the SSRCs it names
}

// fastStream is a registered stream as the fast path takes it: what a
// packet needs is copied from its registration (a cache miss fewer a
// packet), which is kept to compare, not to follow.
type fastStream struct {
	ssrc      uint32
	in        *inbound
	repairs   uint32
	decrypted bool // a packet of it has: its rollover counter is known
	reg       *registration
	feedback  recvfb.Stream // in the same allocation; an RTX stream's is its media stream's
}

func newReceiver(c *fastConn, pc *webrtc.PeerConnection, dt *webrtc.DTLSTransport) (*receiver, error) {
	_, remote, err := srtpkeys.Contexts(dt)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rx := &receiver{conn: c, rtcp: pc.WriteRTCP, srtp: remote, feedback: recvfb.New(now), twccExt: twccExtension(pc),
		twcc: twcc.NewRecorder(rand.Uint32()), start: now,
		plain: make([]byte, receiveMTU), pc: pc}
	if negotiatesREMB(pc) {
		rx.remb = &rembEstimate{}
	}
	return rx, nil
}

// twccExtension is the id the remote description gives transport-wide
// sequence numbers; 0 without one.
func twccExtension(pc *webrtc.PeerConnection) uint8 {
	d := pc.CurrentRemoteDescription()
	if d == nil {
		return 0
	}
	parsed, err := d.Unmarshal()
	if err != nil {
		return 0
	}
	for _, m := range parsed.MediaDescriptions {
		for _, a := range m.Attributes {
			if a.Key != "extmap" {
				continue
			}
			var e sdp.ExtMap
			if e.Unmarshal("extmap:"+a.Value) == nil && e.URI != nil && e.URI.String() == sdp.TransportCCURI {
				return uint8(e.Value)
			}
		}
	}
	return 0
}

// noteArrival notes a packet of n bytes, header h, for the transport-wide
// feedback where it carries a transport-wide sequence number, and as Chrome
// does for the REMB estimate where it does not.
func (rx *receiver) noteArrival(h *rtp.Header, n int, now time.Time) {
	var ext []byte
	if rx.twccExt != 0 {
		ext = h.GetExtension(rx.twccExt)
	}
	if len(ext) < 2 {
		if rx.remb != nil {
			rx.remb.received(n)
		}
		return
	}
	rx.twcc.Record(h.SSRC, uint16(ext[0])<<8|uint16(ext[1]), now.Sub(rx.start).Microseconds())
}

// sendFeedback sends the NACKs and receiver reports due at now, and with
// twcc the transport-wide feedback recorded since the last (the poller's,
// every twccInterval) and the REMB estimate when due.
func (rx *receiver) sendFeedback(now time.Time, twcc bool) {
	rx.feedback.Send(now, rx.rtcp)
	if !twcc {
		return
	}
	if rx.remb != nil && rx.remb.due(now) {
		streams := rx.streams.all()
		if bitrate, ok := rx.remb.update(now, streams); ok {
			_ = rx.rtcp([]rtcp.Packet{rembPacket(bitrate, streams)})
		}
	}
	if pkts := rx.twcc.BuildFeedbackPacket(); len(pkts) > 0 {
		_ = rx.rtcp(pkts)
	}
}

// deliver decrypts a registered stream's packet (its header h, parsed from
// its first headerLen bytes), notes it for the feedback and counts it; false
// for a stream not registered yet (pion reads it and names its track).
func (rx *receiver) deliver(b []byte, h *rtp.Header, headerLen int, now time.Time) bool {
	if g := rx.conn.owner.gen.Load(); g != rx.gen {
		rx.gen = g
		rx.refresh()
	}
	s := rx.streams.get(h.SSRC)
	if s == nil {
		reg := rx.conn.owner.lookup(h.SSRC)
		if reg == nil {
			return rx.undeclared(h.SSRC) // dropped; else pion's to name its track
		}
		s = rx.bind(reg, h.SSRC)
	}
	out, err := rx.srtp.DecryptRTP(rx.plain[:0], b, h, headerLen)
	if err != nil && !s.decrypted {
		// The stream's first packets went through pion, whose SRTP context
		// followed their sequence numbers; this one takes a stream's first
		// packet for rollover 0. If the numbers wrapped in between (they start
		// anywhere), every packet would fail: a stream stalled after its first
		// frame. Pion's share is a few packets, so the rollover is 0 or 1.
		rx.srtp.SetROC(h.SSRC, 1)
		if out, err = rx.srtp.DecryptRTP(rx.plain[:0], b, h, headerLen); err != nil {
			rx.srtp.SetROC(h.SSRC, 0)
		}
	}
	if err != nil {
		return true // as pion's SRTP session does: not authentic, dropped
	}
	s.decrypted = true
	if s.repairs != 0 {
		rx.recovered(s.reg, out, headerLen)
		return true
	}
	s.feedback.Packet(h.SequenceNumber, h.Timestamp, now)
	if payload, ok := unpadded(out, headerLen, h.Padding); ok && s.in != nil {
		s.in.packet(h, payload, now)
	}
	return true
}

// undeclared says whether ssrc is a stream the connection's remote
// description leaves out while it names others. pion takes such a stream
// for simulcast, whose RID an SFU does not send to a receiver, fails it and
// never reads it again: its track never comes. Janus relays a new feed as
// soon as it offers it, before the offer is applied here (a browser finds
// the section by the packet's MID); its packets are dropped until the
// description names their SSRC, then pion takes the stream as declared.
func (rx *receiver) undeclared(ssrc uint32) bool {
	d := rx.pc.RemoteDescription()
	if d == nil {
		return false
	}
	if d.SDP != rx.sdp {
		rx.sdp, rx.declared = d.SDP, declaredSSRCs(d.SDP)
	}
	return len(rx.declared) > 0 && !rx.declared[ssrc]
}

// declaredSSRCs are the SSRCs the a=ssrc lines of a description name.
func declaredSSRCs(description string) map[uint32]bool {
	var parsed sdp.SessionDescription
	if parsed.UnmarshalString(description) != nil {
		return nil
	}
	out := map[uint32]bool{}
	for _, m := range parsed.MediaDescriptions {
		for _, a := range m.Attributes {
			if a.Key != "ssrc" {
				continue
			}
			id, _, _ := strings.Cut(a.Value, " ")
			if n, err := strconv.ParseUint(id, 10, 32); err == nil {
				out[uint32(n)] = true
			}
		}
	}
	return out
}

// unpadded is the payload of RTP packet b, whose header is headerLen bytes,
// without its padding (RFC 3550 5.1: the last byte counts it); false when
// that count is impossible.
func unpadded(b []byte, headerLen int, padded bool) ([]byte, bool) {
	end := len(b)
	if padded {
		if end <= headerLen || int(b[end-1]) == 0 || int(b[end-1]) > end-headerLen {
			return nil, false
		}
		end -= int(b[end-1])
	}
	return b[headerLen:end], true
}

// recovered takes b, a decrypted retransmission on reg's RTX stream, whose
// header is headerLen bytes: the packet it repeats is no longer asked for.
// It is not counted: a browser's jitter buffer would take it, but the
// stream's frames are assembled as they come (inbound.assemble), and its
// receive statistics leave recovered packets out.
func (rx *receiver) recovered(reg *registration, b []byte, headerLen int) {
	if client.UnwrapRTX(b, headerLen, uint8(reg.codec.PayloadType), reg.repairs) == 0 {
		return // padding: a bandwidth probe
	}
	if media := rx.streams.get(reg.repairs); media != nil {
		media.feedback.Recovered(binary.BigEndian.Uint16(b[2:4]))
	}
}

func (rx *receiver) bind(reg *registration, ssrc uint32) *fastStream {
	s := &fastStream{ssrc: ssrc, in: reg.in, repairs: reg.repairs, reg: reg}
	if reg.repairs == 0 { // an RTX stream's feedback is its media stream's
		rx.feedback.Start(&s.feedback, ssrc, reg.codec.ClockRate, client.AsksForLosses(reg.codec))
	}
	rx.streams.put(s)
	return s
}

// refresh lets go of the streams whose SSRC now names another track (an SFU
// that gives a participant who left and came back the SSRC it had): their
// next packet binds the new one.
func (rx *receiver) refresh() {
	for _, s := range rx.streams.all() {
		if rx.conn.owner.lookup(s.ssrc) != s.reg {
			rx.feedback.Remove(s.ssrc)
			rx.streams.remove(s.ssrc)
		}
	}
}

// streamTable is a receiver's streams by SSRC: each in the slot of its
// SSRC's low bits, or, where another took that slot first, in a map. A
// map's lookup a packet missed the cache (1.7 % of the generator's CPU).
type streamTable struct {
	slots [32]*fastStream
	more  map[uint32]*fastStream
}

func (t *streamTable) get(ssrc uint32) *fastStream {
	if s := t.slots[ssrc%uint32(len(t.slots))]; s != nil && s.ssrc == ssrc {
		return s
	}
	return t.more[ssrc]
}

// put adds s, whose SSRC the table does not hold.
func (t *streamTable) put(s *fastStream) {
	if slot := &t.slots[s.ssrc%uint32(len(t.slots))]; *slot == nil {
		*slot = s
		return
	}
	if t.more == nil {
		t.more = map[uint32]*fastStream{}
	}
	t.more[s.ssrc] = s
}

func (t *streamTable) remove(ssrc uint32) {
	if slot := &t.slots[ssrc%uint32(len(t.slots))]; *slot != nil && (*slot).ssrc == ssrc {
		*slot = nil
		return
	}
	delete(t.more, ssrc)
}

func (t *streamTable) all() []*fastStream {
	var out []*fastStream
	for _, s := range t.slots {
		if s != nil {
			out = append(out, s)
		}
	}
	for _, s := range t.more {
		out = append(out, s)
	}
	return out
}
