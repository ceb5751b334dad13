package main

import (
	"math/rand/v2"

	"github.com/pion/rtp"
)

// VP9 SVC as Chrome encodes L<n>T3_KEY (RFC 9628, flexible mode): each
// picture is one frame per spatial layer, smallest first, all with the
// picture's timestamp and picture ID, the marker bit on the last packet of
// the last layer. A key picture is a keyframe in the smallest layer, each
// layer above predicted from the one below (D); between key pictures each
// layer predicts from its own earlier frames only (P, with the reference's
// distance in pictures), in three temporal layers 0, 2, 1, 2 from the key
// picture on. The key picture's first packet carries the scalability
// structure: every spatial layer's size.
type vp9SVCStream struct {
	rtpStream
	pictureID uint16
	sizes     [][2]int // each spatial layer's width and height
	sinceKey  int      // pictures since the last key picture
	buf       [mtu - rtpHeaderSize]byte
	// the dependency descriptor, where negotiated (its extension's id; 0:
	// not): every layer frame's, numbered, with the structure on a key
	// picture's first packet
	dependencyID uint8
	templates    []ddTemplate
	frameNumber  uint16
	dd           [256]byte
	ddHeader     rtp.Header // where the descriptor is set as an extension
}

func newVP9SVCStream(c *clip) *vp9SVCStream {
	s := &vp9SVCStream{rtpStream: *newRTPStream(), pictureID: uint16(rand.N(pictureIDs)),
		templates: keySVCTemplates(len(c.layers)), frameNumber: uint16(rand.Uint32())}
	for _, l := range c.layers {
		s.sizes = append(s.sizes, [2]int{l.width, l.height})
	}
	return s
}

func (v *vp9SVCStream) header() *rtpStream { return &v.rtpStream }

// vp9TemporalPattern is each picture's temporal layer and the distance to
// the picture it predicts from, by its place in the pattern of four.
var vp9TemporalPattern = [4]struct{ tid, pdiff byte }{{0, 4}, {2, 1}, {1, 2}, {2, 1}}

const (
	vp9L, vp9F = 0x20, 0x10 // the descriptor's flags: layer indices, flexible mode
	vp9U       = 0x10       // the layer indices': a switching-up point
)

// send writes a picture (its frame in each spatial layer, smallest first),
// then moves the timestamp on by ticks; it returns the packets and payload
// bytes written.
func (v *vp9SVCStream) send(picture [][]byte, ticks uint32, write func(*rtp.Packet) error) (packets, bytes int) {
	for sid, frame := range picture {
		n, b := v.sendLayer(frame, sid, sid == len(picture)-1, write)
		packets, bytes = packets+n, bytes+b
	}
	v.ts += ticks
	v.pictureID = (v.pictureID + 1) % pictureIDs
	v.frameNumber += uint16(len(picture))
	return packets, bytes
}

// describe makes the next packet carry the dependency descriptor of layer
// sid's frame, the structure where asked (over 16 bytes: the two-byte form).
func (v *vp9SVCStream) describe(sid int, begins, ends, structure bool) {
	template := sid*kindsPerLayer + kindAfterKey(v.sinceKey)
	// a frame in the descriptor is a layer's frame: a picture numbers one per spatial layer
	d := dependencyDescriptor(v.dd[:], v.templates, template, v.frameNumber+uint16(sid), begins, ends, v.sizes, structure)
	h := &v.ddHeader
	h.Extension, h.ExtensionProfile, h.Extensions = false, 0, h.Extensions[:0]
	_ = h.SetExtension(v.dependencyID, d) // the form (one- or two-byte) by its size; it fits either
	v.ext, v.extProfile = h.Extensions[:1:1], h.ExtensionProfile
}

// sendLayer writes spatial layer sid's frame of the picture, the marker on
// its last packet where it is the picture's last layer.
func (v *vp9SVCStream) sendLayer(frame []byte, sid int, last bool, write func(*rtp.Packet) error) (packets, bytes int) {
	if sid == 0 {
		if vp9IsKeyframe(frame) {
			v.sinceKey = 0
		} else {
			v.sinceKey++
		}
	}
	key, t := v.sinceKey == 0, vp9TemporalPattern[v.sinceKey%4]
	for off := 0; off < len(frame); {
		// U: every picture is a switching-up point, no frame referring past a lower layer's
		b := append(v.buf[:0], vp9I|vp9L|vp9F, 0x80|byte(v.pictureID>>8), byte(v.pictureID), t.tid<<5|vp9U|byte(sid)<<1)
		if key && sid > 0 {
			b[3] |= 1 // D: predicted from the layer below
		}
		if !key {
			b[0] |= vp9P
			b = append(b, t.pdiff<<1)
		}
		if off == 0 {
			b[0] |= vp9B
			if key && sid == 0 {
				b[0] |= vp9V
				b = append(b, byte(len(v.sizes)-1)<<5|0x10) // N_S, Y: the sizes follow; no group (G)
				for _, s := range v.sizes {
					b = append(b, byte(s[0]>>8), byte(s[0]), byte(s[1]>>8), byte(s[1]))
				}
			}
		}
		n := min(len(v.buf)-len(b), len(frame)-off)
		b = append(b, frame[off:off+n]...)
		if v.dependencyID != 0 {
			v.describe(sid, off == 0, off+n == len(frame), key && sid == 0 && off == 0)
		}
		off += n
		if off == len(frame) {
			b[0] |= vp9E
		}
		_ = write(v.next(b, last && off == len(frame)))
		packets++
		bytes += len(b)
	}
	return packets, bytes
}
