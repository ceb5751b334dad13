package srtpkeys

// rollovers are a context's streams' packet indexes. A stream's state lives
// in the slot of its SSRC's low bits, or, where another stream took that
// slot first, in the map: the map's lookup missed the cache often enough to
// take a quarter of the encryption's time (make bench, 84 participants, a
// subscriber's dozen streams), and a state of its own was one miss more.
type rollovers struct {
	slots   [64]rollover
	streams map[uint32]*rollover
}

func newRollovers() rollovers { return rollovers{streams: map[uint32]*rollover{}} }

// rollover is one stream's highest packet index (rollover counter and
// sequence number) seen; fresh until a packet sets it.
type rollover struct {
	ssrc  uint32
	used  bool // a slot: a stream's
	fresh bool
	index uint64
}

func (r *rollovers) stream(ssrc uint32) *rollover {
	slot := &r.slots[ssrc%uint32(len(r.slots))]
	if slot.used && slot.ssrc == ssrc {
		return slot
	}
	if s := r.streams[ssrc]; s != nil {
		return s
	}
	if !slot.used {
		*slot = rollover{ssrc: ssrc, used: true, fresh: true}
		return slot
	}
	s := &rollover{ssrc: ssrc, used: true, fresh: true}
	r.streams[ssrc] = s
	return s
}

func (r *rollovers) SetROC(ssrc, roc uint32) {
	s := r.stream(ssrc)
	s.index, s.fresh = uint64(roc)<<16, true
}

// sending is the rollover counter of a packet this side sends, its stream's
// highest index moved on to it.
func (r *rollovers) sending(ssrc uint32, seq uint16) uint32 {
	s := r.stream(ssrc)
	roc, ahead := s.guess(seq)
	s.saw(seq, roc, ahead)
	return roc
}

// guess is the rollover counter of a packet with sequence number seq
// (RFC 3711 3.3.1), and how far its index is past the highest seen.
func (s *rollover) guess(seq uint16) (roc uint32, ahead int64) {
	if s.fresh {
		return uint32(s.index >> 16), 0
	}
	roc, last := uint32(s.index>>16), int64(s.index&0xffff)
	d := int64(seq) - last
	switch {
	case d > 1<<15 && roc > 0: // before a wrap this side has seen
		return roc - 1, d - 1<<16
	case d < -(1 << 15): // past a wrap
		return roc + 1, d + 1<<16
	}
	return roc, d
}

// saw moves the stream's highest index on to an authentic packet's.
func (s *rollover) saw(seq uint16, roc uint32, ahead int64) {
	if s.fresh || ahead > 0 {
		s.index, s.fresh = uint64(roc)<<16|uint64(seq), false
	}
}
