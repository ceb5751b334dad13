package main

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
)

const (
	mtu         = 1200 // what Chrome packetizes to
	audioPeriod = 20 * time.Millisecond
	audioStep   = 960 // RTP ticks of 20 ms at Opus's 48 kHz
)

// outbound is one published stream's counters, as getStats's outbound-rtp
// reports them.
type outbound struct {
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

func compactNTP(t time.Time) uint32 {
	const ntpEpochOffset = 2208988800
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return uint32(secs&0xffff)<<16 | uint32(frac>>16)
}

// publisher plays the clip on one participant's two tracks in real time:
// a video frame every 1/fps s and an Opus packet every 20 ms.
type publisher struct {
	clip         *clip
	period       time.Duration // between video frames
	vstep        uint32        // RTP ticks per video frame
	video, audio *webrtc.TrackLocalStaticRTP
	vout, aout   outbound
	vrtp         *vp8Stream
	artp         *rtpStream
	pos, apos    int
	keyframe     atomic.Bool // a receiver asked for one (PLI/FIR)
	camera       *series     // own frames as sent: (time, code), for delay
	slots        []*slot
	wg           sync.WaitGroup
}

func newPublisher(c *clip, fps int, user string, camera *series) *publisher {
	p := &publisher{clip: c, period: time.Second / time.Duration(fps), vstep: uint32(90000 / fps),
		camera: camera}
	p.vout.rtt, p.aout.rtt = -1, -1
	p.video, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, "video", user)
	p.audio, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", user)
	p.vrtp, p.artp = newVP8Stream(), newRTPStream()
	return p
}

func (p *publisher) tracks() []webrtc.TrackLocal { return []webrtc.TrackLocal{p.audio, p.video} }

// watch reads a sender's RTCP: PLI and FIR make the next video frame a
// keyframe, receiver reports give the round-trip time. It must be called for
// each sender, so that pion's NACK responder sees the NACKs too.
func (p *publisher) watch(s *webrtc.RTPSender) {
	out := &p.aout
	if s.Track() != nil && s.Track().Kind() == webrtc.RTPCodecTypeVideo {
		out = &p.vout
	}
	if enc := s.GetParameters().Encodings; len(enc) > 0 {
		out.mu.Lock()
		out.ssrc = uint32(enc[0].SSRC)
		out.mu.Unlock()
	}
	p.wg.Go(func() {
		for {
			pkts, _, err := s.ReadRTCP()
			if err != nil {
				return
			}
			now := time.Now()
			for _, pkt := range pkts {
				switch r := pkt.(type) {
				case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
					if out == &p.vout {
						p.keyframe.Store(true)
					}
				case *rtcp.ReceiverReport:
					out.reports(r.Reports, now)
				case *rtcp.SenderReport:
					out.reports(r.Reports, now)
				}
			}
		}
	})
}

// start schedules both streams on the pacers, each from a random phase, as
// independent participants would be.
func (p *publisher) start() {
	p.slots = []*slot{
		schedule(p.period, rand.N(p.period), p.sendVideo),
		schedule(audioPeriod, rand.N(audioPeriod), p.sendAudio),
	}
}

func (p *publisher) sendVideo(skipped int) {
	n := len(p.clip.frames)
	if skipped > 0 {
		p.pos = (p.pos + skipped) % n
		p.vrtp.skip(uint32(skipped) * p.vstep)
	}
	// A receiver that lost the picture gets the clip's next keyframe now
	// rather than at its place in the loop.
	if p.keyframe.Swap(false) {
		p.pos = p.clip.nextKey[p.pos]
	}
	now := time.Now()
	packets, bytes := p.vrtp.send(p.clip.frames[p.pos], p.vstep, p.video.WriteRTP)
	p.vout.sent(packets, bytes, now, true)
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
	_ = p.audio.WriteRTP(p.artp.next(packet, true))
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

// samples are the published streams as getStats outbound-rtp records.
func (p *publisher) samples(now time.Time) []map[string]any {
	out := make([]map[string]any, 0, 2)
	for _, o := range []*outbound{&p.aout, &p.vout} {
		o.mu.Lock()
		s := map[string]any{"t": ms(now), "peer": nil, "direction": "send", "ssrc": o.ssrc,
			"bytes": o.bytes, "packets": o.packets, "rtt": nil}
		if o.rtt >= 0 {
			s["rtt"] = o.rtt
		}
		if o == &p.vout {
			s["kind"] = "video"
			s["framesEncoded"] = o.frames
			s["framesPerSecond"] = o.recent.perSecond(now)
			s["frameWidth"], s["frameHeight"] = p.clip.width, p.clip.height
		} else {
			s["kind"] = "audio"
		}
		o.mu.Unlock()
		out = append(out, s)
	}
	return out
}

func ms(t time.Time) float64 { return float64(t.UnixMicro()) / 1000 }
