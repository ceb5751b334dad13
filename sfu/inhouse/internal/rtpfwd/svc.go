package rtpfwd

import "sync/atomic"

// VP9 SVC (RFC 9628): one stream whose pictures carry a frame per spatial
// layer, each told by the SID of its payload descriptor. A subscriber gets
// the spatial layers up to the one it is served, and its stream loses the
// packets of those above: their sequence numbers close up, and the marker
// bit moves to the last packet of the subscriber's top layer, where its
// picture now ends. Pictures in L<n>T<m>_KEY predict from a lower spatial
// layer only at a key picture, so a subscriber moves down at any picture's
// start and up at a key picture's.

// vp9Layers reads a VP9 payload descriptor's spatial fields into p: the
// layer's SID, whether the packet begins (B) or ends (E) the layer's frame,
// and the number of spatial layers its scalability structure names.
func (p *Packet) vp9Layers(pl []byte) {
	const vp9I, vp9L, vp9F, vp9B, vp9E, vp9V = 0x80, 0x20, 0x10, 0x08, 0x04, 0x02
	p.SID, p.SpatialLayers, p.LayerBegin, p.LayerEnd = 0, 0, false, false
	if len(pl) == 0 {
		return
	}
	flags, i := pl[0], 1
	p.LayerBegin, p.LayerEnd = flags&vp9B != 0, flags&vp9E != 0
	if flags&vp9I != 0 && len(pl) > i { // picture ID, 7 or 15 bits
		i += 1 + int(pl[i]>>7)
	}
	if flags&vp9L != 0 && len(pl) > i {
		p.SID = pl[i] >> 1 & 7
		i += 2 - int(flags&vp9F>>4) // and TL0PICIDX in non-flexible mode
	}
	if flags&vp9F != 0 && flags&0x40 != 0 { // reference indices, N set on all but the last
		for n := 0; n < 3 && i < len(pl); n++ {
			i++
			if pl[i-1]&1 == 0 {
				break
			}
		}
	}
	if flags&vp9V != 0 && len(pl) > i {
		p.SpatialLayers = pl[i]>>5 + 1
	}
}

// svcState is a DownTrack's following of an SVC stream; the fan-out
// goroutine's but for srcOf, which retransmissions read.
type svcState struct {
	cur     uint8         // the top spatial layer forwarded
	served  atomic.Uint32 // cur, for other goroutines
	dropped uint16        // packets left out so far: the subscriber's numbers close up by them
	// srcOf maps a subscriber's sequence number (mod HistorySize) to the
	// source's: bit 32 set, the subscriber's in bits 16-31, the source's below.
	srcOf [HistorySize]atomic.Uint64
}

// ForwardSVC is Forward for a track whose stream is VP9 SVC with top as its
// top spatial layer; SetLayer and SetCeiling name spatial layers.
func (d *DownTrack) ForwardSVC(p *Packet, top uint8) Result {
	b := d.bind.Load()
	if b == nil {
		return Skipped
	}
	target := min(uint8(d.target.Load()), uint8(d.ceiling.Load()), top)
	s := d.svc.Load()
	if s == nil {
		s = &svcState{}
		d.svc.Store(s)
	}
	if d.m == nil {
		if !p.KeyframeStart {
			return WaitingForKeyframe
		}
		d.follow(p)
		s.cur, s.dropped = target, 0
		s.served.Store(uint32(target))
	}
	ext := d.highest + int64(int16(p.Seq-uint16(d.highest)))
	if ext < d.firstExt {
		return Skipped
	}
	inOrder := ext > d.highest
	d.highest = max(d.highest, ext)
	if p.LayerBegin && p.SID == 0 && (target < s.cur || p.KeyframeStart) {
		s.cur = target
		s.served.Store(uint32(target))
	}
	if p.SID > s.cur {
		if inOrder {
			s.dropped++
		}
		if target > s.cur {
			return WaitingForKeyframe // a key picture lets it move up
		}
		return Skipped
	}
	seq := p.Seq + d.m.seqOff - s.dropped
	s.srcOf[seq%HistorySize].Store(1<<32 | uint64(seq)<<16 | uint64(p.Seq))
	return d.write(p, b, seq, p.Marker || p.LayerEnd && p.SID == s.cur, inOrder)
}

// source is the source's sequence number of the packet the subscriber
// knows as seq, if it was forwarded lately.
func (s *svcState) source(seq uint16) (uint16, bool) {
	v := s.srcOf[seq%HistorySize].Load()
	return uint16(v), v>>16 == 1<<16|uint64(seq)
}
