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

type mapping struct {
	seqOff uint16
	tsOff  uint32
}

// DownTrack is one publisher track as one subscriber receives it. It gives the
// subscriber a continuous sequence and timestamp space of its own starting at
// a random point, and starts video at a keyframe.
type DownTrack struct {
	video bool
	bind  atomic.Pointer[Binding]
	mapp  atomic.Pointer[mapping]

	// Owned by the publisher's fan-out goroutine.
	m        *mapping
	firstExt int64
	highest  int64
	hdr      rtp.Header

	// Retransmissions come from the subscriber's RTCP goroutine.
	rtxMu  sync.Mutex
	rtxHdr rtp.Header
	rtxSeq uint16
	rtxBuf [MaxPacket + 2]byte

	// Packets counts what reached the subscriber's stream.
	Packets atomic.Uint64
}

// NewDownTrack returns an unbound DownTrack.
func NewDownTrack(video bool) *DownTrack {
	return &DownTrack{video: video, rtxSeq: uint16(rand.Uint32())}
}

// Bind starts writing to b; Bind(nil) stops.
func (d *DownTrack) Bind(b *Binding) { d.bind.Store(b) }

// Forward writes p to the subscriber. Only the publisher's fan-out goroutine
// calls it.
func (d *DownTrack) Forward(p *Packet) Result {
	b := d.bind.Load()
	if b == nil {
		return Skipped
	}
	if d.m == nil {
		if d.video && !p.KeyframeStart {
			return WaitingForKeyframe
		}
		d.m = &mapping{seqOff: uint16(rand.Uint32()) - p.Seq, tsOff: rand.Uint32() - p.TS}
		d.mapp.Store(d.m)
		d.firstExt, d.highest = int64(p.Seq), int64(p.Seq)
	} else {
		ext := d.highest + int64(int16(p.Seq-uint16(d.highest)))
		if ext < d.firstExt {
			// Reordered from before this subscriber's first packet.
			return Skipped
		}
		d.highest = max(d.highest, ext)
	}
	h := &d.hdr
	h.Version = 2
	h.Padding = false
	h.Extension = false
	h.Extensions = h.Extensions[:0]
	h.Marker = p.Marker
	h.PayloadType = b.PT
	h.SequenceNumber = p.Seq + d.m.seqOff
	h.Timestamp = p.TS + d.m.tsOff
	h.SSRC = b.SSRC
	pl := p.Payload()
	if _, err := b.W.WriteRTP(h, pl); err != nil {
		return WriteFailed
	}
	d.Packets.Add(1)
	return Sent
}

// Retransmit resends the packet the subscriber knows as seq, from the
// publisher's history, as RTX (RFC 4588) when the subscriber negotiated it.
// It reports whether the packet was still there.
func (d *DownTrack) Retransmit(h *History, seq uint16) bool {
	m, b := d.mapp.Load(), d.bind.Load()
	if m == nil || b == nil {
		return false
	}
	p := h.Get(seq - m.seqOff)
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
}

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
	Sent, Failed  int
	NeedsKeyframe bool
}

// Forward hands p to every subscriber.
func (f *Fanout) Forward(p *Packet) Counts {
	var c Counts
	subs := f.subs.Load()
	if subs == nil {
		return c
	}
	for _, d := range *subs {
		switch d.Forward(p) {
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
