package main

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

const (
	mtu         = 1200 // what Chrome packetizes to
	audioPeriod = 20 * time.Millisecond
	audioStep   = 960 // RTP ticks of 20 ms at Opus's 48 kHz
)

// outbound is one published stream's counters, as getStats's outbound-rtp
// reports them.
type outbound struct {
	direct  atomic.Pointer[client.SentStream] // once pion has bound the stream
	mu      sync.Mutex
	ssrc    uint32
	packets uint64
	bytes   uint64 // payload bytes
	frames  uint64
	recent  recentTimes
	rtt     float64 // s, from the latest receiver report; < 0: none yet
}

func (o *outbound) sent(packets int, bytes int, at time.Time, frame bool) {
	o.mu.Lock()
	o.packets += uint64(packets)
	o.bytes += uint64(bytes)
	if frame {
		o.frames++
		o.recent.add(at)
	}
	o.mu.Unlock()
}

// write sends a packet of the stream past pion's track once pion has bound
// the stream (found by its SSRC), through the track until then: the track
// and pion's interceptor chain around it cost a packet as much as its
// encryption.
func (o *outbound) write(find func(ssrc uint32) *client.SentStream, track *webrtc.TrackLocalStaticRTP, p *rtp.Packet) error {
	st := o.direct.Load()
	if st == nil {
		o.mu.Lock()
		ssrc := o.ssrc
		o.mu.Unlock()
		if ssrc != 0 {
			st = find(ssrc)
		}
		if st == nil {
			return track.WriteRTP(p)
		}
		o.direct.Store(st)
	}
	return st.Write(&p.Header, p.Payload)
}

// reports takes the receiver report blocks about this stream: the
// round-trip time is now - LSR - DLSR (RFC 3550 6.4.1), in 1/65536 s.
func (o *outbound) reports(blocks []rtcp.ReceptionReport, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range blocks {
		if r.SSRC != o.ssrc || r.LastSenderReport == 0 {
			continue
		}
		if d := compactNTP(now) - r.LastSenderReport - r.Delay; d < 1<<31 {
			o.rtt = float64(d) / 65536
		}
	}
}

func (o *outbound) setSSRC(ssrc uint32) {
	o.mu.Lock()
	o.ssrc = ssrc
	o.mu.Unlock()
}

// sample is the stream as a getStats outbound-rtp record.
func (o *outbound) sample(now time.Time, kind string) record {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := record{"t": ms(now), "peer": nil, "direction": "send", "kind": kind, "ssrc": o.ssrc,
		"bytes": o.bytes, "packets": o.packets, "rtt": nil}
	if o.rtt >= 0 {
		s["rtt"] = o.rtt
	}
	if kind == "video" {
		s["framesEncoded"] = o.frames
		s["framesPerSecond"] = o.recent.perSecond(now)
	}
	return s
}

func compactNTP(t time.Time) uint32 {
	const ntpEpochOffset = 2208988800
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return uint32(secs&0xffff)<<16 | uint32(frac>>16)
}

// publisher plays the clip on one participant's tracks in real time: a
// video frame every 1/fps s, in each of the clip's layers, and an Opus
// packet every 20 ms.
type publisher struct {
	clip   *clip
	period time.Duration // between video frames
	vstep  uint32        // RTP ticks per video frame
	audio  *webrtc.TrackLocalStaticRTP
	aout   outbound
	artp   *rtpStream
	video  []*layerOut   // as clip.layers: smallest first
	svc    *vp9SVCStream // the video's one stream of spatial layers, with --svc
	// described: the SVC stream was told whether the SFU took the dependency descriptor
	described bool
	sender    atomic.Pointer[webrtc.RTPSender]
	midOf     func(*webrtc.RTPSender) string // the section a sender's track was given
	pos       int
	apos      int
	keyframe  atomic.Bool                          // a receiver asked for one (PLI/FIR)
	camera    *series                              // own frames as sent: (time, code), for delay
	find      func(ssrc uint32) *client.SentStream // a stream pion has bound, to write past its track
	slots     []*slot
	wg        sync.WaitGroup
}

// layerOut is one published layer of the video, or with SVC the one stream
// of every spatial layer.
type layerOut struct {
	track *webrtc.TrackLocalStaticRTP
	rtp   *rtpStream
	// send writes loop position pos's frame, returning the packets and
	// payload bytes written
	send func(pos int, write func(*rtp.Packet) error) (packets, bytes int)
	out  outbound
}

func newPublisher(c *clip, fps int, user string, camera *series, midOf func(*webrtc.RTPSender) string,
	find func(ssrc uint32) *client.SentStream) *publisher {
	p := &publisher{clip: c, period: time.Second / time.Duration(fps), vstep: uint32(90000 / fps),
		camera: camera, midOf: midOf, find: find, artp: newRTPStream()}
	p.aout.rtt = -1
	p.audio, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", user)
	if c.svc {
		s := newVP9SVCStream(c)
		p.svc = s
		l := &layerOut{rtp: s.header(), send: func(pos int, write func(*rtp.Packet) error) (int, int) {
			return s.send(c.picture(pos), p.vstep, write)
		}}
		l.track, _ = webrtc.NewTrackLocalStaticRTP(c.codec.capability(), "video", user)
		l.out.rtt = -1
		p.video = append(p.video, l)
		return p
	}
	for i := range c.layers {
		var opts []func(*webrtc.TrackLocalStaticRTP)
		if len(c.layers) > 1 {
			opts = append(opts, webrtc.WithRTPStreamID(client.Rids[i]))
		}
		s := c.codec.newStream()
		l := &layerOut{rtp: s.header(), send: func(pos int, write func(*rtp.Packet) error) (int, int) {
			return s.send(c.layers[i].frames[pos], p.vstep, write)
		}}
		l.track, _ = webrtc.NewTrackLocalStaticRTP(c.codec.capability(), "video", user, opts...)
		l.out.rtt = -1
		p.video = append(p.video, l)
	}
	return p
}

func (p *publisher) tracks() []webrtc.TrackLocal {
	return []webrtc.TrackLocal{p.audio, p.video[0].track}
}

// encodings are the video's layers above its track's (Participant.Encodings).
func (p *publisher) encodings() []webrtc.TrackLocal {
	var out []webrtc.TrackLocal
	for _, l := range p.video[1:] {
		out = append(out, l.track)
	}
	return out
}

// watch reads a sender's RTCP, each layer's apart: PLI and FIR make the next
// video frame a keyframe, receiver reports give the round-trip time. It must
// be called for each sender, so that the connection's Sender sees the NACKs
// too (its RTCP reader runs as the sender's RTCP is read).
func (p *publisher) watch(s *webrtc.RTPSender) {
	encodings := s.GetParameters().Encodings
	if s.Track() == nil || s.Track().Kind() != webrtc.RTPCodecTypeVideo {
		if len(encodings) > 0 {
			p.aout.setSSRC(uint32(encodings[0].SSRC))
		}
		p.wg.Go(func() { p.readRTCP(s.ReadRTCP, &p.aout, false) })
		return
	}
	p.sender.Store(s)
	for i, e := range encodings[:min(len(encodings), len(p.video))] {
		out := &p.video[i].out
		out.setSSRC(uint32(e.SSRC))
		read := s.ReadRTCP
		if rid := e.RID; rid != "" {
			read = func() ([]rtcp.Packet, interceptor.Attributes, error) { return s.ReadSimulcastRTCP(rid) }
		}
		p.wg.Go(func() { p.readRTCP(read, out, true) })
	}
}

func (p *publisher) readRTCP(read func() ([]rtcp.Packet, interceptor.Attributes, error), out *outbound, video bool) {
	for {
		pkts, _, err := read()
		if err != nil {
			return
		}
		now := time.Now()
		for _, pkt := range pkts {
			switch r := pkt.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				if video {
					p.keyframe.Store(true)
				}
			case *rtcp.ReceiverReport:
				out.reports(r.Reports, now)
			case *rtcp.SenderReport:
				out.reports(r.Reports, now)
			}
		}
	}
}

// nameLayers makes each layer's packets carry the video section's mid and
// the layer's rid, as a receiver of simulcast tells layers apart by (pion's
// sender leaves these header extensions to its caller), once the section is
// negotiated. It reports whether the layers can be sent; one stream needs
// no names.
func (p *publisher) nameLayers() bool {
	if len(p.video) == 1 || p.video[0].rtp.ext != nil {
		return true
	}
	s := p.sender.Load()
	if s == nil {
		return false
	}
	mid := p.midOf(s)
	var midID, ridID int
	for _, e := range s.GetParameters().HeaderExtensions {
		switch e.URI {
		case sdp.SDESMidURI:
			midID = e.ID
		case sdp.SDESRTPStreamIDURI:
			ridID = e.ID
		}
	}
	if mid == "" || midID == 0 || ridID == 0 {
		return false
	}
	for _, l := range p.video {
		var h rtp.Header
		if h.SetExtension(uint8(midID), []byte(mid)) != nil || h.SetExtension(uint8(ridID), []byte(l.track.RID())) != nil {
			return false
		}
		l.rtp.ext, l.rtp.extProfile = h.Extensions[:2:2], h.ExtensionProfile
	}
	return true
}

// describeDependencies gives the SVC stream the dependency descriptor's
// extension id, where the SFU took it, once its section is negotiated.
func (p *publisher) describeDependencies() {
	s := p.sender.Load()
	if s == nil || p.midOf(s) == "" {
		return
	}
	p.described = true
	for _, e := range s.GetParameters().HeaderExtensions {
		if e.URI == client.DependencyURI {
			p.svc.dependencyID = uint8(e.ID)
		}
	}
}

// start schedules both streams on the pacers, each from a random phase, as
// independent participants would be.
func (p *publisher) start() {
	p.slots = []*slot{
		schedule(p.period, rand.N(p.period), p.sendVideo),
		schedule(audioPeriod, rand.N(audioPeriod), p.sendAudio),
	}
}

// sendVideo sends the frame at the clip's position in every layer, so that
// a receiver switched between layers sees the same frame codes go on.
func (p *publisher) sendVideo(skipped int) {
	if !p.nameLayers() {
		return
	}
	if p.svc != nil && !p.described {
		p.describeDependencies()
	}
	n := len(p.clip.nextKey)
	if skipped > 0 {
		p.pos = (p.pos + skipped) % n
		for _, l := range p.video {
			l.rtp.skip(uint32(skipped) * p.vstep)
		}
	}
	// A receiver that lost the picture gets the clip's next keyframe now
	// rather than at its place in the loop (in every layer: they have their
	// keyframes at the same positions).
	if p.keyframe.Swap(false) {
		p.pos = p.clip.nextKey[p.pos]
	}
	now := time.Now()
	for _, l := range p.video {
		packets, bytes := l.send(p.pos, func(pkt *rtp.Packet) error {
			return l.out.write(p.find, l.track, pkt)
		})
		l.out.sent(packets, bytes, now, true)
	}
	p.camera.add(now, p.pos, nil)
	p.pos = (p.pos + 1) % n
}

func (p *publisher) sendAudio(skipped int) {
	n := len(p.clip.audio)
	if skipped > 0 {
		p.apos = (p.apos + skipped) % n
		p.artp.skip(uint32(skipped) * audioStep)
	}
	// One Opus packet each, marked as the last of its frame.
	packet := p.clip.audio[p.apos]
	_ = p.aout.write(p.find, p.audio, p.artp.next(packet, true))
	p.artp.skip(audioStep)
	p.aout.sent(1, len(packet), time.Now(), false)
	p.apos = (p.apos + 1) % n
}

// close stops sending and waits for the RTCP readers, which end with the
// connections.
func (p *publisher) close() {
	for _, s := range p.slots {
		s.stopped.Store(true)
	}
	p.wg.Wait()
}

// samples are the published streams as getStats outbound-rtp records: the
// audio, then each video layer.
func (p *publisher) samples(now time.Time) []record {
	out := []record{p.aout.sample(now, "audio")}
	for i, l := range p.video {
		s := l.out.sample(now, "video")
		if p.clip.svc { // one stream, its top spatial layer the full picture
			i = len(p.clip.layers) - 1
		}
		s["frameWidth"], s["frameHeight"], s["codec"] = p.clip.layers[i].width, p.clip.layers[i].height, p.clip.codec.name
		out = append(out, s)
	}
	return out
}

func ms(t time.Time) float64 { return float64(t.UnixMicro()) / 1000 }
