package main

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// freezeHistory is how many inter-frame intervals the freeze rule averages.
const freezeHistory = 30

// keyframeRetry is how long a receiver waits for the keyframe it asked for
// before it asks again.
const keyframeRetry = time.Second

// A received audio stream is played out, as a model, by a jitter buffer
// that holds each packet until playoutDelay after the stream's quickest
// packet of the last one to two seconds would have arrived (NetEq measures
// a packet's delay against the quickest of its last 2 s, so a step up in
// the path's delay costs a moment, not the rest of the stream): a packet
// later than that comes too late to be played and is concealed, as a lost
// one is. No decoder runs; the figures
// it gives (getStats's names, reports/audio.py) are estimates, and the
// reports say so for synthetic receivers.
const (
	playoutDelay = 0.060 // s beyond the quickest transit
	// a transit this far beyond the quickest is the stream's timestamps
	// starting again (an SFU's rewrite, a wrap), not a late packet
	transitRebase = 2.0 // s
)

// inbound is one received stream. It records what getStats's inbound-rtp
// would (bytes, packets, loss, RFC 3550 jitter, frames, freezes) and
// reassembles each video frame to recognise it: a synthetic publisher's
// frames by their digest, which gives their frame code; a browser's are
// new bytes every frame, told apart by their fingerprint.
type inbound struct {
	// What each packet updates comes first, together: among thousands of
	// streams a packet's is out of the cache, and the misses, not the
	// arithmetic, were most of its cost.
	mu              sync.Mutex
	packets, bytes  uint64
	started         bool
	haveTransit     bool
	assembling      bool
	nextSeq         uint16
	lastSeq         uint16 // the stream's last packet, and whether it ended a frame
	lastMarker      bool
	frameTS         uint32
	baseSeq, maxSeq int64 // extended sequence numbers
	jitter          float64
	transit         float64
	clock           float64
	kind            string
	reader          frameReader
	digest          maphash.Hash        // of the frame's data so far
	head            [frameHeadSize]byte // the frame's first bytes: a keyframe's size
	headLen         int

	peer    string
	ssrc    uint32
	codec   *videoCodec   // nil: a codec the generator does not read
	spatial spatialReader // the reader, of a codec whose pictures may hold spatial layers
	// a picture that has its frame in some spatial layer but no marker yet
	// (an SFU that leaves the layers above out may not move the marker
	// down: LiveKit), and when that frame ended
	layerEnded    bool
	endedAt       time.Time
	codecName     string // as getStats names it
	clip          *clip
	video         *series
	width, height int
	frames        uint64
	freezes       uint64
	freezeSeconds float64
	lastFrame     time.Time
	intervals     [freezeHistory]float64
	nIntervals    int
	recent        recentTimes

	// A stream that an SFU starts mid-stream (Medooze) begins with frames no
	// decoder can use: a browser asks for a keyframe, and so does this one,
	// through askKey, once every keyframeRetry until the first comes.
	askKey  func()
	keyed   bool
	askedAt time.Time
	plis    uint64

	// the quickest transit (s) and the last packet's beyond it: its time
	// queued on the way; of audio the playout model's packets too late for
	// the buffer, and their time in it (s, summed over packets played)
	quickest, queued, buffered float64
	late                       uint64
	// the playout model's quickest transit (s) in this second and the one
	// before, and when this one began (s since the epoch)
	playoutQuickest [2]float64
	playoutSecond   float64
}

// newInbound follows track t, its frames in the codec it arrives in (video
// in a codec no synthetic participant reads is counted, not assembled).
func newInbound(peer string, t *webrtc.TrackRemote, c *clip, video *series) *inbound {
	in := &inbound{peer: peer, kind: t.Kind().String(), ssrc: uint32(t.SSRC()),
		clock: float64(t.Codec().ClockRate), clip: c, video: video}
	if in.kind == "video" {
		in.reads(codecOfMime(t.Codec().MimeType))
		in.codecName = strings.ToLower(strings.TrimPrefix(t.Codec().MimeType, "video/"))
	}
	return in
}

// reads sets the codec the stream's frames are assembled in.
func (in *inbound) reads(c *videoCodec) {
	if c != nil {
		in.codec, in.reader = c, c.newReader()
		in.spatial, _ = in.reader.(spatialReader)
	}
}

// read takes the track's packets until it ends.
func (in *inbound) read(t *webrtc.TrackRemote) {
	buf := make([]byte, 1500)
	var pkt rtp.Packet
	for {
		n, _, err := t.Read(buf)
		if err != nil {
			return
		}
		if pkt.Unmarshal(buf[:n]) != nil {
			continue
		}
		in.packet(&pkt.Header, pkt.Payload, time.Now())
	}
}

// packet counts the packet of header p and payload, arrived at `at`.
func (in *inbound) packet(p *rtp.Header, payload []byte, at time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.packets++
	in.bytes += uint64(len(payload))
	seq := int64(p.SequenceNumber)
	if !in.started {
		in.started, in.baseSeq, in.maxSeq = true, seq, seq
	} else if d := int64(int16(p.SequenceNumber - uint16(in.maxSeq))); d > 0 {
		in.maxSeq += d
	}
	// RFC 3550 A.8: transit time in RTP units; its variation smoothed by 1/16.
	transit := at.Sub(epoch).Seconds()*in.clock - float64(p.Timestamp)
	if in.haveTransit {
		d := transit - in.transit
		if d < 0 {
			d = -d
		}
		// A timestamp wrap moves transit by 2^32 once: not jitter.
		if d < 1<<31 {
			in.jitter += (d - in.jitter) / 16
		}
	}
	first := !in.haveTransit
	in.transit, in.haveTransit = transit, true
	t := transit / in.clock
	if first || t < in.quickest || t-in.quickest > transitRebase {
		in.quickest = t
	}
	in.queued = t - in.quickest
	if in.reader != nil {
		in.assemble(p, payload, at)
	} else if in.kind == "audio" {
		in.playout(t, at.Sub(epoch).Seconds())
	}
}

// playout places an audio packet of transit `t` (s), arrived at `now` (s),
// in the model's buffer.
func (in *inbound) playout(t, now float64) {
	q := &in.playoutQuickest
	switch since := now - in.playoutSecond; {
	case in.playoutSecond == 0 || since >= 2 || t-min(q[0], q[1]) > transitRebase:
		*q, in.playoutSecond = [2]float64{t, t}, now
	case since >= 1:
		q[1], q[0], in.playoutSecond = q[0], t, now
	default:
		q[0] = min(q[0], t)
	}
	if wait := min(q[0], q[1]) + playoutDelay - t; wait >= 0 {
		in.buffered += wait
	} else {
		in.late++
	}
}

// assemble follows one frame's data: from a packet that starts it to the
// packet with the marker bit, every sequence number in between. A frame
// with a gap is not complete; a decoder would wait for its retransmission
// or a keyframe, and so is it not counted here. The data is digested as it
// comes (the digest of its concatenation: maphash does not depend on how the
// bytes are split), not copied into a frame.
func (in *inbound) assemble(p *rtp.Header, payload []byte, at time.Time) {
	// the stream's first packet may start a frame: SFUs begin a stream with a keyframe's
	afterFrame := in.packets == 1 || in.lastMarker && p.SequenceNumber == in.lastSeq+1
	in.lastSeq, in.lastMarker = p.SequenceNumber, p.Marker
	starts, ok := in.reader.unpack(payload, afterFrame)
	switch {
	case !ok:
		in.assembling = false
		return
	case starts:
		if in.assembling && in.layerEnded && p.Timestamp != in.frameTS {
			// the last picture ended with its frame in the top layer sent, as a
			// browser's frame buffer takes it once the next picture begins
			in.frame(in.endedAt)
		}
		in.assembling, in.frameTS, in.headLen = true, p.Timestamp, 0
		in.digest.SetSeed(digestSeed)
	case in.assembling && p.Timestamp == in.frameTS && p.SequenceNumber == in.nextSeq:
	default:
		in.assembling = false
		return
	}
	in.reader.emit(in)
	if starts && !in.sized() && !in.keyed && in.askKey != nil && at.Sub(in.askedAt) >= keyframeRetry {
		in.askedAt = at
		in.plis++
		go in.askKey()
	}
	in.nextSeq = p.SequenceNumber + 1
	if in.spatial != nil {
		in.layerEnded, in.endedAt = in.spatial.frameEnds(), at
	}
	if !p.Marker {
		return
	}
	in.assembling, in.layerEnded = false, false
	in.frame(at)
}

// take is a piece of the frame's data, as the reader reassembles it.
func (in *inbound) take(data []byte) {
	in.headLen += copy(in.head[in.headLen:], data)
	_, _ = in.digest.Write(data)
}

// sized reads the picture size where a frame's first packet begins a
// keyframe, and says whether it does: its size is in its first bytes. A
// keyframe that a lossy link left with a gap is not counted as a frame (its
// retransmitted packets come out of order), yet a browser's decoder, which
// waits for them, shows its size; behind such a link a receiver may count
// no keyframe whole.
func (in *inbound) sized() bool {
	w, h, ok := in.codec.keyframeSize(in.head[:in.headLen])
	if _, _, layered := in.layerSize(); ok && !layered { // an SVC keyframe is its smallest layer's size
		in.width, in.height = w, h
	}
	in.keyed = in.keyed || ok
	return ok
}

// spatialReader is a frameReader of a codec whose pictures may hold several
// spatial layers (SVC): the size of the one whose frame ended last, and
// whether the last packet ended one.
type spatialReader interface {
	layerSize() (w, h int, ok bool)
	frameEnds() bool
}

// layerSize is the size of the spatial layer the last picture ended in, of
// a stream of several.
func (in *inbound) layerSize() (w, h int, ok bool) {
	if in.spatial == nil {
		return 0, 0, false
	}
	return in.spatial.layerSize()
}

func (in *inbound) frame(at time.Time) {
	in.frames++
	if w, h, ok := in.layerSize(); ok {
		in.width, in.height = w, h
	}
	if !in.lastFrame.IsZero() {
		// webrtc-stats freezeCount: an interval above max(3 x the mean, the mean + 150 ms).
		gap := at.Sub(in.lastFrame).Seconds()
		if n := min(in.nIntervals, freezeHistory); n > 0 {
			mean := 0.0
			for _, v := range in.intervals[:n] {
				mean += v
			}
			mean /= float64(n)
			if gap > max(3*mean, mean+0.150) {
				in.freezes++
				in.freezeSeconds += gap
			}
		}
		in.intervals[in.nIntervals%freezeHistory] = gap
		in.nIntervals++
	}
	in.lastFrame = at
	in.recent.add(at)
	d := in.digest.Sum64()
	if code, ok := in.clip.codes[d]; ok {
		in.video.add(at, code, nil)
	} else {
		in.video.add(at, -1, fingerprint(d))
	}
}

// congestion is what the stream says of its path now: the packets expected
// and received so far, and how long its last packet queued on the way (s).
func (in *inbound) congestion() (expected, received int64, queued float64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.started {
		return 0, 0, 0
	}
	return in.maxSeq - in.baseSeq + 1, int64(in.packets), in.queued
}

// sample is the stream as a getStats inbound-rtp record.
func (in *inbound) sample(now time.Time) record {
	in.mu.Lock()
	defer in.mu.Unlock()
	lost := int64(0)
	if in.started {
		lost = max(0, in.maxSeq-in.baseSeq+1-int64(in.packets))
	}
	s := record{"t": ms(now), "peer": in.peer, "direction": "recv", "kind": in.kind, "ssrc": in.ssrc,
		"bytes": in.bytes, "packets": in.packets, "packetsLost": lost, "jitter": in.jitter / in.clock}
	if in.kind == "video" {
		// Not decoded: a complete frame is counted where a decoder would take it.
		s["framesReceived"], s["framesDecoded"] = in.frames, in.frames
		if in.codecName != "" {
			s["codec"] = in.codecName
		}
		s["framesPerSecond"] = in.recent.perSecond(now)
		s["freezeCount"], s["totalFreezesDuration"] = in.freezes, in.freezeSeconds
		s["pliCount"] = in.plis
		if in.width > 0 {
			s["frameWidth"], s["frameHeight"] = in.width, in.height
		}
	} else if in.started {
		// samples a decoder would have played: every packet expected, the
		// lost and the late ones concealed
		expected := uint64(in.maxSeq - in.baseSeq + 1)
		played := in.packets - min(in.late, in.packets)
		s["totalSamplesReceived"] = expected * audioStep
		s["concealedSamples"] = (expected - min(played, expected)) * audioStep
		s["packetsDiscarded"] = in.late
		s["jitterBufferDelay"] = in.buffered * audioStep
		s["jitterBufferEmittedCount"] = played * audioStep
	}
	return s
}
