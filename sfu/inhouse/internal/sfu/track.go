package sfu

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/internal/rtpfwd"
)

// keyframeInterval bounds how often one publisher is asked for a keyframe,
// however many subscribers ask.
const keyframeInterval = 500 * time.Millisecond

// pubTrack is one track a participant publishes.
type pubTrack struct {
	owner   *peer
	track   *webrtc.TrackRemote
	video   bool
	vp8     bool
	dropped bool // the deliberate fault: never forwarded
	fanout  rtpfwd.Fanout
	history *rtpfwd.History // video only: Opus is not retransmitted
	lastKF  atomic.Int64    // unix ns of the last keyframe request
	// gone is set when the owner leaves the room; no subscription to the
	// track may start after.
	gone atomic.Bool
	done chan struct{}

	// in serialises the packets of both paths (pion's, the direct one)
	// through the feedback and the fan-out: what follows is its.
	in          sync.Mutex
	feedback    interceptor.RTPReader // the NACK and receiver-report interceptors (directIn.add)
	feedbackLen int
	attrs       interceptor.Attributes
}

func newPubTrack(owner *peer, t *webrtc.TrackRemote) *pubTrack {
	video := t.Kind() == webrtc.RTPCodecTypeVideo
	cfg := &owner.s.cfg
	pt := &pubTrack{owner: owner, track: t, video: video, done: make(chan struct{}),
		vp8:     video && strings.EqualFold(t.Codec().MimeType, webrtc.MimeTypeVP8),
		dropped: video && cfg.DropVideoFrom != "" && owner.user == cfg.DropVideoFrom,
		attrs:   interceptor.Attributes{}}
	if pt.video {
		pt.history = &rtpfwd.History{}
	}
	return pt
}

// run forwards the packets pion reads of the track until the publisher's
// connection closes: those that came before the direct read path took over.
func (t *pubTrack) run() {
	defer close(t.done)
	for {
		p := rtpfwd.NewPacket()
		n, _, err := t.track.Read(p.Buf())
		if err != nil {
			p.Release()
			break
		}
		t.forward(p, n)
	}
	if t.history != nil {
		t.history.Clear()
	}
}

// forward takes a packet of the track, n bytes of p, whichever path brought
// it: the feedback sees it, then every subscriber gets it. It releases p.
func (t *pubTrack) forward(p *rtpfwd.Packet, n int) {
	t.in.Lock()
	defer t.in.Unlock()
	defer p.Release()
	if t.feedback != nil {
		t.feedbackLen = n
		clear(t.attrs)
		_, _, _ = t.feedback.Read(p.Buf()[:n], t.attrs)
	}
	m, conn := &t.owner.s.m, t.owner.s.cfg.UDP
	if p.Parse(n, t.vp8) != nil {
		m.drops[dropMalformed].Add(1)
		return
	}
	m.packetsIn.Add(1)
	m.bytesIn.Add(uint64(n))
	if t.dropped {
		return
	}
	if t.history != nil {
		t.history.Put(p)
	}
	conn.Hold()
	c := t.fanout.Forward(p)
	conn.Release()
	m.packetsOut.Add(uint64(c.Sent))
	m.bytesOut.Add(uint64(c.Sent * len(p.Payload())))
	if c.Failed > 0 {
		m.drops[dropWrite].Add(uint64(c.Failed))
	}
	if c.NeedsKeyframe {
		t.requestKeyframe()
	}
}

func (t *pubTrack) requestKeyframe() {
	if !t.video {
		return
	}
	now := time.Now().UnixNano()
	last := t.lastKF.Load()
	if now-last < int64(keyframeInterval) || !t.lastKF.CompareAndSwap(last, now) {
		return
	}
	t.owner.s.m.keyframeRequests.Add(1)
	_ = t.owner.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(t.track.SSRC())}})
}

// subTrack is a pubTrack as one subscriber receives it: pion's TrackLocal
// for the subscriber's RTPSender, backed by an rtpfwd.DownTrack.
type subTrack struct {
	pub    *pubTrack
	dt     *rtpfwd.DownTrack
	sender *webrtc.RTPSender
	tr     *webrtc.RTPTransceiver
}

func (s *subTrack) ID() string {
	return s.pub.track.Kind().String() + "-" + s.pub.owner.user
}

// StreamID is the publisher's user id: that is how a client tells whose
// tracks it receives.
func (s *subTrack) StreamID() string          { return s.pub.owner.user }
func (s *subTrack) RID() string               { return "" }
func (s *subTrack) Kind() webrtc.RTPCodecType { return s.pub.track.Kind() }

var errNoCodec = errors.New("sfu: subscriber did not accept the publisher's codec")

func (s *subTrack) Bind(ctx webrtc.TrackLocalContext) (webrtc.RTPCodecParameters, error) {
	mime := s.pub.track.Codec().MimeType
	var codec *webrtc.RTPCodecParameters
	for i, c := range ctx.CodecParameters() {
		if strings.EqualFold(c.MimeType, mime) {
			codec = &ctx.CodecParameters()[i]
			break
		}
	}
	if codec == nil {
		return webrtc.RTPCodecParameters{}, errNoCodec
	}
	b := &rtpfwd.Binding{W: ctx.WriteStream(), SSRC: uint32(ctx.SSRC()), PT: uint8(codec.PayloadType)}
	if rtx := uint32(ctx.SSRCRetransmission()); rtx != 0 {
		apt := "apt=" + strconv.Itoa(int(codec.PayloadType))
		for _, c := range ctx.CodecParameters() {
			if strings.EqualFold(c.MimeType, webrtc.MimeTypeRTX) && c.SDPFmtpLine == apt {
				b.RTXSSRC, b.RTXPT = rtx, uint8(c.PayloadType)
			}
		}
	}
	s.dt.Bind(b)
	return *codec, nil
}

func (s *subTrack) Unbind(webrtc.TrackLocalContext) error {
	s.dt.Bind(nil)
	return nil
}

// readRTCP serves the subscriber's feedback until the sender stops:
// NACKs from the publisher's history, PLI and FIR by asking the publisher.
func (s *subTrack) readRTCP() {
	m := &s.pub.owner.s.m
	buf := make([]byte, 1500)
	for {
		n, _, err := s.sender.Read(buf)
		if err != nil {
			return
		}
		forEachFeedback(buf[:n], func(nacked uint16) {
			m.nacks.Add(1)
			if s.pub.history == nil || !s.dt.Retransmit(s.pub.history, nacked) {
				m.nackMisses.Add(1)
				return
			}
			m.retransmits.Add(1)
		}, s.pub.requestKeyframe)
	}
}

// forEachFeedback walks a compound RTCP packet without allocating, calling
// nack for each sequence number a Generic NACK lists and keyframe for each
// PLI or FIR.
func forEachFeedback(b []byte, nack func(seq uint16), keyframe func()) {
	for len(b) >= 4 {
		size := 4 * (int(binary.BigEndian.Uint16(b[2:])) + 1)
		if b[0]>>6 != 2 || size > len(b) {
			return
		}
		fmt, pt, body := b[0]&0x1f, rtcp.PacketType(b[1]), b[4:size]
		switch {
		case pt == rtcp.TypeTransportSpecificFeedback && fmt == rtcp.FormatTLN && len(body) >= 8:
			for fci := body[8:]; len(fci) >= 4; fci = fci[4:] {
				pid, blp := binary.BigEndian.Uint16(fci), binary.BigEndian.Uint16(fci[2:])
				nack(pid)
				for i := uint16(0); i < 16; i++ {
					if blp&(1<<i) != 0 {
						nack(pid + i + 1)
					}
				}
			}
		case pt == rtcp.TypePayloadSpecificFeedback && (fmt == rtcp.FormatPLI || fmt == rtcp.FormatFIR):
			keyframe()
		}
		b = b[size:]
	}
}
