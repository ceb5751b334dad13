// Package rtpfwd is the SFU's forwarding core: a received RTP packet is parsed
// once into a pooled, reference-counted Packet and handed to every subscriber's
// DownTrack, which rewrites only its own header (SSRC, payload type, sequence
// number, timestamp) and passes the shared payload slice to the subscriber's
// SRTP writer. Nothing here copies a payload per subscriber or allocates per
// packet in steady state.
package rtpfwd

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
)

// MaxPacket is the largest RTP packet kept; pion's receive MTU is 1460.
const MaxPacket = 1500

// Packet is one received RTP packet, shared read-only between the fan-out and
// the retransmission history once parsed.
type Packet struct {
	refs atomic.Int32
	buf  [MaxPacket]byte

	Seq         uint16
	TS          uint32
	Marker      bool
	PayloadType uint8
	// KeyframeStart marks the first packet of a keyframe.
	KeyframeStart bool
	// Layer is the simulcast layer the packet came in on (0 without
	// simulcast), set by whoever reads it, as is Arrived (unix ns): a
	// subscriber switched to another layer continues its timestamps by the
	// time that passed.
	Layer   uint8
	Arrived int64
	// Of VP9: the spatial layer (SID), whether the packet begins or ends
	// its layer's frame, and the spatial layers its scalability structure
	// names (0: none there).
	SID                  uint8
	LayerBegin, LayerEnd bool
	SpatialLayers        uint8

	payloadOff int
	payloadEnd int
}

// A free list rather than sync.Pool: pion allocates enough to keep the GC
// busy, and sync.Pool drops its contents every other cycle.
var free struct {
	sync.Mutex
	list []*Packet
}

const maxFree = 4096

// NewPacket returns an empty packet holding one reference.
func NewPacket() *Packet {
	free.Lock()
	var p *Packet
	if n := len(free.list); n > 0 {
		p = free.list[n-1]
		free.list = free.list[:n-1]
	}
	free.Unlock()
	if p == nil {
		p = new(Packet)
	}
	p.refs.Store(1)
	return p
}

// Retain adds a reference.
func (p *Packet) Retain() { p.refs.Add(1) }

// Release drops a reference; the last one returns the packet to the free list.
func (p *Packet) Release() {
	switch r := p.refs.Add(-1); {
	case r > 0:
		return
	case r < 0:
		panic("rtpfwd: packet released twice")
	}
	free.Lock()
	if len(free.list) < maxFree {
		free.list = append(free.list, p)
	}
	free.Unlock()
}

// Buf is where the packet is read into.
func (p *Packet) Buf() []byte { return p.buf[:] }

// Payload is the RTP payload without header, extensions or padding.
func (p *Packet) Payload() []byte { return p.buf[p.payloadOff:p.payloadEnd] }

var (
	errShort   = errors.New("rtpfwd: packet too short")
	errVersion = errors.New("rtpfwd: not RTP version 2")
	errPadding = errors.New("rtpfwd: bad padding")
)

// Parse reads the RTP header of the first n bytes of Buf, and from the
// payload of codec whether it starts a keyframe.
func (p *Packet) Parse(n int, codec Codec) error {
	b := p.buf[:n]
	if n < 12 {
		return errShort
	}
	if b[0]>>6 != 2 {
		return errVersion
	}
	off := 12 + 4*int(b[0]&0x0f)
	if b[0]&0x10 != 0 {
		if n < off+4 {
			return errShort
		}
		off += 4 + 4*int(binary.BigEndian.Uint16(b[off+2:]))
	}
	end := n
	if b[0]&0x20 != 0 {
		pad := int(b[n-1])
		if pad == 0 || off > end-pad {
			return errPadding
		}
		end -= pad
	}
	if off > end {
		return errShort
	}
	p.Marker = b[1]&0x80 != 0
	p.PayloadType = b[1] & 0x7f
	p.Seq = binary.BigEndian.Uint16(b[2:])
	p.TS = binary.BigEndian.Uint32(b[4:])
	p.payloadOff, p.payloadEnd = off, end
	p.KeyframeStart = codec.KeyframeStart(b[off:end])
	if codec == VP9 {
		p.vp9Layers(b[off:end])
	}
	return nil
}
