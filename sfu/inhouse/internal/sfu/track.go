package sfu

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/internal/rtpfwd"
	"sfubench/sfu/inhouse/recvfb"
)

// keyframeInterval bounds how often one publisher is asked for a keyframe,
// however many subscribers ask.
const keyframeInterval = 500 * time.Millisecond

// pubTrack is one track a participant publishes: one source, or with
// simulcast one per layer, feeding one fan-out.
type pubTrack struct {
	owner     *peer
	kind      webrtc.RTPCodecType
	codec     webrtc.RTPCodecParameters
	video     bool
	keyframes rtpfwd.Codec // how its payloads tell a keyframe's start
	dropped   bool         // the deliberate fault: never forwarded
	fanout    rtpfwd.Fanout
	// gone is set when the owner leaves the room; no subscription to the
	// track may start after.
	gone atomic.Bool

	srcMu   sync.Mutex
	sources []*source   // by layer, as the publisher's streams arrive
	layered atomic.Bool // more than one source

	topChecked int64 // unix ns: the track's in

	// in serialises the packets of every source and path (pion's, the
	// direct one) through the feedback and the fan-out: what follows is its.
	in sync.Mutex
}

// source is one RTP stream of a published track: the track itself, or one
// of its simulcast layers.
type source struct {
	t       *pubTrack
	layer   uint8
	remote  *webrtc.TrackRemote
	history *rtpfwd.History // video only: Opus is not retransmitted
	lastKF  atomic.Int64    // unix ns of the last keyframe request
	done    chan struct{}

	feedback *recvfb.Stream // NACKs and receiver reports (directIn.add)
	// the track's in
	lastAt int64 // unix ns of its latest packet
}

func newPubTrack(owner *peer, t *webrtc.TrackRemote) *pubTrack {
	video := t.Kind() == webrtc.RTPCodecTypeVideo
	cfg := &owner.s.cfg
	return &pubTrack{owner: owner, kind: t.Kind(), codec: t.Codec(), video: video,
		keyframes: rtpfwd.CodecOf(t.Codec().MimeType),
		dropped:   video && cfg.DropVideoFrom != "" && owner.user == cfg.DropVideoFrom}
}

// addSource makes remote the track's source of layer; subscribers asking for
// more than the track had get it from its next keyframe.
func (t *pubTrack) addSource(remote *webrtc.TrackRemote, layer uint8) *source {
	src := &source{t: t, layer: layer, remote: remote, done: make(chan struct{})}
	if t.video {
		src.history = &rtpfwd.History{}
	}
	t.srcMu.Lock()
	defer t.srcMu.Unlock()
	t.sources = append(t.sources, src)
	t.layered.Store(len(t.sources) > 1)
	top := uint8(0)
	for _, s := range t.sources {
		top = max(top, s.layer)
	}
	t.fanout.SetTop(top)
	return src
}

// layerTimeout is how long a layer may send nothing before its subscribers
// are served another.
const layerTimeout = time.Second

// liveTop keeps the largest layer subscribers are served to the largest that
// sent within layerTimeout, checked every fifth of a second, as s sends a
// packet at now: a publisher short of bandwidth or CPU stops its largest
// layers (and starts them again), and a subscriber waiting for one would get
// nothing. The track's in is held.
func (t *pubTrack) liveTop(s *source, now int64) {
	s.lastAt = now
	if now-t.topChecked < int64(layerTimeout/5) {
		return
	}
	t.topChecked = now
	top := uint8(0)
	t.srcMu.Lock()
	for _, x := range t.sources {
		if now-x.lastAt < int64(layerTimeout) {
			top = max(top, x.layer)
		}
	}
	t.srcMu.Unlock()
	t.fanout.SetTop(top)
}

// sourceOf is the track's source of layer, or nil.
func (t *pubTrack) sourceOf(layer uint8) *source {
	t.srcMu.Lock()
	defer t.srcMu.Unlock()
	for _, s := range t.sources {
		if s.layer == layer {
			return s
		}
	}
	return nil
}

// historyOf is the retransmission history of one of the track's layers.
func (t *pubTrack) historyOf(layer uint8) *rtpfwd.History {
	if s := t.sourceOf(layer); s != nil {
		return s.history
	}
	return nil
}

// wait returns once every source's reader has stopped.
func (t *pubTrack) wait() {
	t.srcMu.Lock()
	sources := append([]*source(nil), t.sources...)
	t.srcMu.Unlock()
	for _, s := range sources {
		<-s.done
	}
}

// run forwards the packets pion reads of the source until the publisher's
// connection closes: those that came before the direct read path took over.
func (s *source) run() {
	defer close(s.done)
	for {
		p := rtpfwd.NewPacket()
		n, _, err := s.remote.Read(p.Buf())
		if err != nil {
			p.Release()
			break
		}
		s.forward(p, n, time.Now())
	}
	if s.history != nil {
		s.history.Clear()
	}
}

// forward takes a packet of the source, n bytes of p arrived at now,
// whichever path brought it: the feedback sees it, then every subscriber
// gets it. It releases p.
func (s *source) forward(p *rtpfwd.Packet, n int, now time.Time) {
	t := s.t
	t.in.Lock()
	defer t.in.Unlock()
	defer p.Release()
	m, conn := &t.owner.s.m, t.owner.s.cfg.UDP
	if p.Parse(n, t.keyframes) != nil {
		m.drops[dropMalformed].Add(1)
		return
	}
	if s.feedback != nil {
		s.feedback.Packet(p.Seq, p.TS, now)
	}
	p.Layer, p.Arrived = s.layer, now.UnixNano()
	if p.SpatialLayers > 1 || p.SpatialLayers > 0 && t.fanout.SVC() {
		t.fanout.SetSVC()
		t.fanout.SetTop(p.SpatialLayers - 1) // as many as its latest key picture has
	}
	if t.layered.Load() {
		t.liveTop(s, p.Arrived)
	}
	m.packetsIn.Add(1)
	m.bytesIn.Add(uint64(n))
	if t.dropped {
		return
	}
	if s.history != nil {
		s.history.Put(p)
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
		s.requestKeyframe()
	}
}

func (s *source) requestKeyframe() {
	if !s.t.video {
		return
	}
	now := time.Now().UnixNano()
	last := s.lastKF.Load()
	if now-last < int64(keyframeInterval) || !s.lastKF.CompareAndSwap(last, now) {
		return
	}
	s.t.owner.s.m.keyframeRequests.Add(1)
	_ = s.t.owner.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(s.remote.SSRC())}})
}

// requestKeyframe asks for a keyframe of the layer a subscriber receives
// (a subscriber lost its picture: PLI or FIR); an SVC track has one source.
func (t *pubTrack) requestKeyframe(d *rtpfwd.DownTrack) {
	if t.fanout.SVC() {
		if s := t.sourceOf(0); s != nil {
			s.requestKeyframe()
		}
	} else if layer, ok := d.Layer(); ok {
		if s := t.sourceOf(layer); s != nil {
			s.requestKeyframe()
		}
	}
}

// subTrack is a pubTrack as one subscriber receives it: pion's TrackLocal
// for the subscriber's RTPSender, backed by an rtpfwd.DownTrack.
type subTrack struct {
	pub    *pubTrack
	dt     *rtpfwd.DownTrack
	sender *webrtc.RTPSender
	tr     *webrtc.RTPTransceiver
	link   *downlink // the subscriber's RTCP goroutine's
}

func (s *subTrack) ID() string {
	return s.pub.kind.String() + "-" + s.pub.owner.user
}

// StreamID is the publisher's user id: that is how a client tells whose
// tracks it receives.
func (s *subTrack) StreamID() string          { return s.pub.owner.user }
func (s *subTrack) RID() string               { return "" }
func (s *subTrack) Kind() webrtc.RTPCodecType { return s.pub.kind }

var errNoCodec = errors.New("sfu: subscriber did not accept the publisher's codec")

func (s *subTrack) Bind(ctx webrtc.TrackLocalContext) (webrtc.RTPCodecParameters, error) {
	mime := s.pub.codec.MimeType
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
// NACKs from the publisher's history, PLI and FIR by asking the publisher,
// and, of a simulcast track, the loss its reports say by moving the layer's
// ceiling.
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
			if !s.pub.video || !s.dt.Retransmit(s.pub.historyOf, nacked) {
				m.nackMisses.Add(1)
				return
			}
			m.retransmits.Add(1)
		}, func() { s.pub.requestKeyframe(s.dt) }, s.lost)
	}
}

// lost takes a report block's fraction lost of ssrc.
func (s *subTrack) lost(ssrc uint32, fraction uint8) {
	if ssrc != s.dt.SSRC() || !s.pub.layered.Load() && !s.pub.fanout.SVC() {
		return
	}
	layer, ok := s.dt.Layer()
	if !ok {
		return
	}
	if s.link == nil {
		s.link = newDownlink()
	}
	was := s.link.ceiling
	ceiling, moved := s.link.report(fraction, time.Now(), layer, s.pub.fanout.Top())
	if !moved {
		return
	}
	s.dt.SetCeiling(ceiling)
	s.pub.owner.s.cfg.Log.Debug("layer ceiling moved", "publisher", s.pub.owner.user, "ceiling", ceiling,
		"layer", layer, "lost256", fraction)
	if ceiling < min(was, layer) {
		s.pub.owner.s.m.ceilingsDown.Add(1)
	} else {
		s.pub.owner.s.m.ceilingsUp.Add(1)
	}
}

// forEachFeedback walks a compound RTCP packet without allocating, calling
// nack for each sequence number a Generic NACK lists, keyframe for each PLI
// or FIR, and lost with each report block's SSRC and fraction lost.
func forEachFeedback(b []byte, nack func(seq uint16), keyframe func(), lost func(ssrc uint32, fraction uint8)) {
	for len(b) >= 4 {
		size := 4 * (int(binary.BigEndian.Uint16(b[2:])) + 1)
		if b[0]>>6 != 2 || size > len(b) {
			return
		}
		fmt, pt, body := b[0]&0x1f, rtcp.PacketType(b[1]), b[4:size]
		switch {
		case pt == rtcp.TypeReceiverReport || pt == rtcp.TypeSenderReport:
			// the reporter's SSRC, and a sender's 20 bytes of sender info
			blocks := body[min(len(body), 4):]
			if pt == rtcp.TypeSenderReport {
				blocks = blocks[min(len(blocks), 20):]
			}
			for i := 0; i < int(fmt) && len(blocks) >= 24; i++ {
				lost(binary.BigEndian.Uint32(blocks), blocks[4])
				blocks = blocks[24:]
			}
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
