package main

import (
	"math/rand/v2"

	"github.com/pion/rtp"
)

// rtpStream numbers and stamps one published stream's packets, all written
// through one packet of its own. pion's packetizer allocated every packet and
// its payload anew and copied the frame into them: an eighth of the
// generator's CPU over a ramp to 42 participants. A packet is written before
// its write returns (the SRTP writer encrypts into a buffer of its own, the
// Sender keeps a copy for resending), so the packet, and a payload buffer,
// can be used again at once.
type rtpStream struct {
	seq uint16
	ts  uint32
	pkt rtp.Packet
	// ext are header extensions every packet carries (a simulcast layer's
	// names), with their profile; their slice is full, so that an
	// interceptor adding one copies it.
	ext        []rtp.Extension
	extProfile uint16
}

const (
	rtpHeaderSize = 12
	// A VP8 payload descriptor as Chrome writes it (RFC 7741 4.2): X and I
	// set, a 15-bit picture ID.
	vp8DescriptorSize = 4
	pictureIDs        = 1 << 15
)

// newRTPStream starts at a random sequence number and timestamp, as
// RFC 3550 asks of a sender.
func newRTPStream() *rtpStream {
	return &rtpStream{seq: uint16(rand.Uint32()), ts: rand.Uint32()}
}

// next is the stream's next packet carrying payload, at the current
// timestamp. Payload type and SSRC are left to the track, which sets them
// per connection.
func (s *rtpStream) next(payload []byte, marker bool) *rtp.Packet {
	s.pkt.Header = rtp.Header{Version: 2, Marker: marker, SequenceNumber: s.seq, Timestamp: s.ts,
		Extension: s.ext != nil, ExtensionProfile: s.extProfile, Extensions: s.ext}
	s.pkt.Payload = payload
	s.seq++
	return &s.pkt
}

// skip moves the timestamp on by ticks (frames a held-up sender dropped).
func (s *rtpStream) skip(ticks uint32) { s.ts += ticks }

// vp8Stream packetizes VP8 frames as Chrome does: each packet as full as
// the MTU allows, a picture ID counting encoded frames. A packet's payload
// (descriptor and a slice of the frame) is built in buf.
type vp8Stream struct {
	rtpStream
	pictureID uint16
	buf       [mtu - rtpHeaderSize]byte
}

func newVP8Stream() *vp8Stream {
	return &vp8Stream{rtpStream: *newRTPStream(), pictureID: uint16(rand.N(pictureIDs))}
}

func (v *vp8Stream) header() *rtpStream { return &v.rtpStream }

func (v *vp8Stream) send(frame []byte, ticks uint32, write func(*rtp.Packet) error) (packets, bytes int) {
	room := len(v.buf) - vp8DescriptorSize
	for off := 0; off < len(frame); {
		n := min(room, len(frame)-off)
		b := v.buf[:vp8DescriptorSize+n]
		b[0] = 0x80 // X: extensions follow
		if off == 0 {
			b[0] |= 0x10 // S: the frame's first partition starts here
		}
		b[1] = 0x80 // I: a picture ID follows
		b[2] = 0x80 | byte(v.pictureID>>8)
		b[3] = byte(v.pictureID)
		copy(b[vp8DescriptorSize:], frame[off:off+n])
		off += n
		_ = write(v.next(b, off == len(frame))) // fails only before a connection is bound
		packets++
		bytes += len(b)
	}
	v.ts += ticks
	v.pictureID = (v.pictureID + 1) % pictureIDs
	return packets, bytes
}
