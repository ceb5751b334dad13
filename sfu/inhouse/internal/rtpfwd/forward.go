package rtpfwd

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/pion/rtp"
)

// Writer is a subscriber's outgoing RTP stream (pion's TrackLocalWriter).
type Writer interface {
	WriteRTP(header *rtp.Header, payload []byte) (int, error)
}

// Binding is what negotiation gives a subscription: the stream to write to
// and the SSRCs and payload types the subscriber expects.
type Binding struct {
	W    Writer
	SSRC uint32
	PT   uint8
	// RTXSSRC and RTXPT are zero when the subscriber negotiated no RTX;
	// retransmissions then reuse the media SSRC.
	RTXSSRC uint32
	RTXPT   uint8
}

// Result tells the fan-out what a DownTrack did with a packet.
type Result uint8

const (
	Sent Result = iota
	Skipped
	// WaitingForKeyframe: a new video subscriber cannot start before a
	// keyframe; the publisher should be asked for one.
	WaitingForKeyframe
	WriteFailed
)

// mapping takes one source layer's sequence numbers and timestamps into the
// subscriber's, from its sequence number `from` on.
type mapping struct {
	layer  uint8
	from   uint16
	seqOff uint16
	tsOff  uint32
}

// videoClock is the RTP clock of video, in ticks per millisecond.
const videoClock = 90

// DownTrack is one publisher track as one subscriber receives it. It gives the
// subscriber a continuous sequence and timestamp space of its own starting at
// a random point, and starts video at a keyframe. Of a simulcast track it
// forwards one layer, and moves to the layer asked for (SetLayer) at that
// layer's next keyframe, the sequence and timestamps going on from where the
// last one left them.
type DownTrack struct {
	video  bool
	bind   atomic.Pointer[Binding]
	mapp   atomic.Pointer[mapping]
	target atomic.Uint32
	// ceiling is the largest layer the subscriber's link is taken to carry
	// (SetCeiling), whatever it asks for.
	ceiling atomic.Uint32

	svc atomic.Pointer[svcState] // nil but for an SVC track

	// Owned by the publisher's fan-out goroutine.
	m        *mapping
	firstExt int64
	highest  int64
	hdr      rtp.Header
	last     struct {
		seq     uint16
		ts      uint32
		arrived int64
	}

	// Retransmissions come from the subscriber's RTCP goroutine.
	rtxMu  sync.Mutex
	rtxHdr rtp.Header
	rtxSeq uint16
	rtxBuf [MaxPacket + 2]byte

	// Packets counts what reached the subscriber's stream.
	Packets atomic.Uint64
}

// Largest asks for the largest layer a track has.
const Largest = 0xff

// NewDownTrack returns an unbound DownTrack that asks for the largest layer.
func NewDownTrack(video bool) *DownTrack {
	d := &DownTrack{video: video, rtxSeq: uint16(rand.Uint32())}
	d.target.Store(Largest)
	d.ceiling.Store(Largest)
	return d
}

// Bind starts writing to b; Bind(nil) stops.
func (d *DownTrack) Bind(b *Binding) { d.bind.Store(b) }

// SetLayer asks for the simulcast layer the subscriber is to receive (0 the
// smallest, Largest the largest there is); it takes effect at that layer's
// next keyframe.
func (d *DownTrack) SetLayer(layer uint8) { d.target.Store(uint32(layer)) }

// SSRC is the subscriber's SSRC of the track, 0 while unbound.
func (d *DownTrack) SSRC() uint32 {
	if b := d.bind.Load(); b != nil {
		return b.SSRC
	}
	return 0
}

// SetCeiling caps the layer the subscriber receives below what it asks for
// (Largest: no cap): what its link carries. A layer above it stops at once,
// the one below starts at its next keyframe.
func (d *DownTrack) SetCeiling(layer uint8) { d.ceiling.Store(uint32(layer)) }

// Layer is the layer the subscriber receives, and whether it receives any yet.
func (d *DownTrack) Layer() (uint8, bool) {
	if m, s := d.mapp.Load(), d.svc.Load(); m != nil && s != nil {
		return uint8(s.served.Load()), true
	}
	if m := d.mapp.Load(); m != nil {
		return m.layer, true
	}
	return 0, false
}

// Forward writes p to the subscriber; top is the largest layer the track
// has (0 without simulcast), where a subscriber asking for more is served.
// Only the publisher's fan-out goroutine calls it.
func (d *DownTrack) Forward(p *Packet, top uint8) Result {
	b := d.bind.Load()
	if b == nil {
		return Skipped
	}
	if d.m == nil || p.Layer != d.m.layer {
		switch {
		case p.Layer != min(uint8(d.target.Load()), uint8(d.ceiling.Load()), top):
			return Skipped
		case d.video && !p.KeyframeStart:
			return WaitingForKeyframe
		}
		d.follow(p)
	} else if p.Layer > uint8(d.ceiling.Load()) {
		// The link is too narrow for it: more of it would only be lost, and
		// delay the keyframe of the layer that fits.
		return Skipped
	} else {
		ext := d.highest + int64(int16(p.Seq-uint16(d.highest)))
		if ext < d.firstExt {
			// Reordered from before this subscriber's first packet.
			return Skipped
		}
		d.highest = max(d.highest, ext)
	}
	return d.write(p, b, p.Seq+d.m.seqOff, p.Marker, uint16(d.highest) == p.Seq)
}

// write sends p to the subscriber as its packet seq, with the marker bit
// given; newest says p is the latest the subscriber has.
func (d *DownTrack) write(p *Packet, b *Binding, seq uint16, marker, newest bool) Result {
	h := &d.hdr
	h.Version = 2
	h.Padding = false
	h.Extension = false
	h.Extensions = h.Extensions[:0]
	h.Marker = marker
	h.PayloadType = b.PT
	h.SequenceNumber = seq
	h.Timestamp = p.TS + d.m.tsOff
	h.SSRC = b.SSRC
	if newest {
		d.last.seq, d.last.ts, d.last.arrived = h.SequenceNumber, h.Timestamp, p.Arrived
	}
	if _, err := b.W.WriteRTP(h, p.Payload()); err != nil {
		return WriteFailed
	}
	d.Packets.Add(1)
	return Sent
}

// follow makes p's layer the one forwarded, from p on: the first layer at a
// random point, another one where the last left off, its timestamps advanced
// by the time between the two layers' packets (at least one tick, so a
// receiver never takes the new layer's first frame for the old one's).
func (d *DownTrack) follow(p *Packet) {
	m := &mapping{layer: p.Layer}
	if d.m == nil {
		m.seqOff, m.tsOff = uint16(rand.Uint32())-p.Seq, rand.Uint32()-p.TS
	} else {
		ticks := int64(1)
		if gap := p.Arrived - d.last.arrived; d.last.arrived != 0 && gap > 0 {
			ticks = max(1, gap/1000*videoClock/1000)
		}
		m.seqOff, m.tsOff = d.last.seq+1-p.Seq, d.last.ts+uint32(ticks)-p.TS
	}
	m.from = p.Seq + m.seqOff
	d.m = m
	d.mapp.Store(m)
	d.firstExt, d.highest = int64(p.Seq), int64(p.Seq)
}

// Retransmit resends the packet the subscriber knows as seq, from the
// history of the layer it receives (history(layer)), as RTX (RFC 4588) when
// the subscriber negotiated it. It reports whether the packet was still
// there: one sent before the subscriber's last switch of layer is not.
func (d *DownTrack) Retransmit(history func(layer uint8) *History, seq uint16) bool {
	m, b := d.mapp.Load(), d.bind.Load()
	if m == nil || b == nil || int16(seq-m.from) < 0 || m.layer > uint8(d.ceiling.Load()) {
		return false
	}
	h := history(m.layer)
	if h == nil {
		return false
	}
	src := seq - m.seqOff
	if s := d.svc.Load(); s != nil {
		var ok bool
		if src, ok = s.source(seq); !ok {
			return false
		}
	}
	p := h.Get(src)
	if p == nil {
		return false
	}
	defer p.Release()

	d.rtxMu.Lock()
	defer d.rtxMu.Unlock()
	hdr := &d.rtxHdr
	hdr.Version = 2
	hdr.Marker = p.Marker
	hdr.Timestamp = p.TS + m.tsOff
	pl := p.Payload()
	if b.RTXSSRC != 0 && b.RTXPT != 0 {
		hdr.SSRC, hdr.PayloadType, hdr.SequenceNumber = b.RTXSSRC, b.RTXPT, d.rtxSeq
		d.rtxSeq++
		binary.BigEndian.PutUint16(d.rtxBuf[:], seq)
		pl = d.rtxBuf[:2+copy(d.rtxBuf[2:], pl)]
	} else {
		hdr.SSRC, hdr.PayloadType, hdr.SequenceNumber = b.SSRC, b.PT, seq
	}
	_, err := b.W.WriteRTP(hdr, pl)
	return err == nil
}

// Fanout is the set of DownTracks one publisher track feeds. Adding and
// removing copy the set, so forwarding reads it without a lock.
type Fanout struct {
	mu   sync.Mutex
	subs atomic.Pointer[[]*DownTrack]
	top  atomic.Uint32 // the largest layer the track has
	svc  atomic.Bool   // its layers are the spatial layers of one SVC stream
}

// SetSVC says the track's layers are the spatial layers of one stream.
func (f *Fanout) SetSVC() { f.svc.Store(true) }

// SVC is whether the track's layers are spatial layers of one stream.
func (f *Fanout) SVC() bool { return f.svc.Load() }

// SetTop says which is the largest layer the track has (as its publisher
// starts sending each).
func (f *Fanout) SetTop(layer uint8) { f.top.Store(uint32(layer)) }

// Top is the largest layer the track has.
func (f *Fanout) Top() uint8 { return uint8(f.top.Load()) }

// Add subscribes d.
func (f *Fanout) Add(d *DownTrack) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var cur []*DownTrack
	if p := f.subs.Load(); p != nil {
		cur = *p
	}
	next := append(append(make([]*DownTrack, 0, len(cur)+1), cur...), d)
	f.subs.Store(&next)
}

// Remove unsubscribes d.
func (f *Fanout) Remove(d *DownTrack) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.subs.Load()
	if p == nil {
		return
	}
	next := make([]*DownTrack, 0, len(*p))
	for _, x := range *p {
		if x != d {
			next = append(next, x)
		}
	}
	f.subs.Store(&next)
}

// Len is the number of subscribers.
func (f *Fanout) Len() int {
	if p := f.subs.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// Counts is what one Forward did.
type Counts struct {
	Sent, Failed int
	// NeedsKeyframe: a subscriber waits for a keyframe of the packet's layer
	// (to start, or to switch to it); its publisher should be asked for one.
	NeedsKeyframe bool
}

// Forward hands p to every subscriber.
func (f *Fanout) Forward(p *Packet) Counts {
	var c Counts
	subs := f.subs.Load()
	if subs == nil {
		return c
	}
	top, svc := uint8(f.top.Load()), f.svc.Load()
	for _, d := range *subs {
		var r Result
		if svc {
			r = d.ForwardSVC(p, top)
		} else {
			r = d.Forward(p, top)
		}
		switch r {
		case Sent:
			c.Sent++
		case WaitingForKeyframe:
			c.NeedsKeyframe = true
		case WriteFailed:
			c.Failed++
		}
	}
	return c
}

// HistorySize is how many recent packets of a video track are kept for
// retransmission: about 17 s at 30 packets/s, 1.7 s at 2.5 Mbit/s.
const HistorySize = 512

// History keeps a publisher track's recent packets once for all of its
// subscribers' retransmissions.
type History struct {
	mu    sync.Mutex
	slots [HistorySize]*Packet
}

// Put keeps p (adding a reference), evicting the packet in its slot.
func (h *History) Put(p *Packet) {
	p.Retain()
	i := p.Seq % HistorySize
	h.mu.Lock()
	old := h.slots[i]
	h.slots[i] = p
	h.mu.Unlock()
	if old != nil {
		old.Release()
	}
}

// Get returns the packet with sequence number seq, with a reference the
// caller releases, or nil.
func (h *History) Get(seq uint16) *Packet {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.slots[seq%HistorySize]
	if p == nil || p.Seq != seq {
		return nil
	}
	p.Retain()
	return p
}

// Clear drops every packet.
func (h *History) Clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, p := range h.slots {
		if p != nil {
			p.Release()
			h.slots[i] = nil
		}
	}
}
