package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// VP9 profile 0 as Chrome sends one spatial and one temporal layer
// (RFC 9628): a payload descriptor with a 15-bit picture ID, in
// non-flexible mode, the scalability structure (the picture size and a
// one-frame group of pictures) on each keyframe's first packet.
var vp9Codec = &videoCodec{
	name: "vp9", mime: webrtc.MimeTypeVP9, fmtp: "profile-id=0", fourcc: "VP90",
	readFrames: readVP9, isKeyframe: vp9IsKeyframe, keyframeSize: vp9KeyframeSize,
	newStream: func() videoStream { return newVP9Stream() },
	newReader: func() frameReader { return &vp9Reader{} },
}

// readVP9 returns the frames of a VP9 IVF file, each shown: a superframe
// (a hidden reference frame packed with a shown one) is no browser's
// realtime output and would put two frames in one loop position.
func readVP9(path string) ([][]byte, error) {
	frames, err := ivfFrames("VP90")(path)
	if err != nil {
		return nil, err
	}
	for i, f := range frames {
		if len(f) == 0 {
			return nil, fmt.Errorf("frame %d is empty", i)
		}
		if last := f[len(f)-1]; last&0xe0 == 0xc0 {
			if n := 2 + int(last>>3&3+1)*int(last&7+1); n <= len(f) && f[len(f)-n] == last {
				return nil, fmt.Errorf("frame %d is a superframe (encode with -auto-alt-ref 0 -lag-in-frames 0)", i)
			}
		}
	}
	return frames, nil
}

// vp9Header reads a VP9 frame's uncompressed header (VP9 6.2) as far as
// its frame type: the reader is left at show_frame.
func vp9Header(f []byte) (r bitReader, profile uint, key bool) {
	r = bitReader{b: f}
	if r.bits(2) != 2 { // frame_marker
		r.short = true
		return r, 0, false
	}
	profile = r.bits(1) | r.bits(1)<<1
	if profile == 3 {
		r.bits(1)
	}
	showExisting := r.bits(1)
	key = showExisting == 0 && r.bits(1) == 0 // frame_type: KEY_FRAME
	return r, profile, key && !r.short
}

func vp9IsKeyframe(f []byte) bool {
	_, _, key := vp9Header(f)
	return key
}

// vp9KeyframeSize reads a keyframe's picture size: after the sync code and
// the colour configuration (VP9 6.2.2), the sides less one, 16 bits each.
func vp9KeyframeSize(head []byte) (w, h int, ok bool) {
	r, profile, key := vp9Header(head)
	if !key {
		return 0, 0, false
	}
	r.bits(2) // show_frame, error_resilient_mode
	if r.bits(24) != 0x498342 {
		return 0, 0, false
	}
	if profile >= 2 {
		r.bits(1) // ten_or_twelve_bit
	}
	const srgb = 7
	if r.bits(3) != srgb { // color_space
		r.bits(1) // color_range
		if profile == 1 || profile == 3 {
			r.bits(3) // subsampling_x, subsampling_y, reserved_zero
		}
	} else if profile == 1 || profile == 3 {
		r.bits(1)
	}
	w, h = int(r.bits(16))+1, int(r.bits(16))+1
	return w, h, !r.short
}

// vp9Stream packetizes VP9 frames as Chrome does one layer: packets as
// full as the MTU allows, B on a frame's first and E on its last, P on a
// frame predicted from another, the picture ID counting frames.
type vp9Stream struct {
	rtpStream
	pictureID     uint16
	width, height int // the last keyframe's, for the scalability structure
	buf           [mtu - rtpHeaderSize]byte
}

func newVP9Stream() *vp9Stream {
	return &vp9Stream{rtpStream: *newRTPStream(), pictureID: uint16(rand.N(pictureIDs))}
}

func (v *vp9Stream) header() *rtpStream { return &v.rtpStream }

const (
	vp9I, vp9P, vp9B, vp9E, vp9V = 0x80, 0x40, 0x08, 0x04, 0x02
	vp9DescriptorSize            = 3 // the flags and a 15-bit picture ID
)

func (v *vp9Stream) send(frame []byte, ticks uint32, write func(*rtp.Packet) error) (packets, bytes int) {
	key := vp9IsKeyframe(frame)
	if key {
		v.width, v.height, _ = vp9KeyframeSize(frame)
	}
	for off := 0; off < len(frame); {
		b := v.buf[:vp9DescriptorSize]
		b[0] = vp9I
		if !key {
			b[0] |= vp9P
		}
		b[1], b[2] = 0x80|byte(v.pictureID>>8), byte(v.pictureID)
		if off == 0 {
			b[0] |= vp9B
			if key {
				// one spatial layer with its size (Y), a group of one frame
				// (G) of temporal layer 0, predicted from the frame before
				b[0] |= vp9V
				b = append(b, 0x18, byte(v.width>>8), byte(v.width), byte(v.height>>8), byte(v.height), 1, 0x04, 1)
			}
		}
		n := min(len(v.buf)-len(b), len(frame)-off)
		b = append(b, frame[off:off+n]...)
		off += n
		if off == len(frame) {
			b[0] |= vp9E
		}
		_ = write(v.next(b, off == len(frame))) // fails only before a connection is bound
		packets++
		bytes += len(b)
	}
	v.ts += ticks
	v.pictureID = (v.pictureID + 1) % pictureIDs
	return packets, bytes
}

// vp9Reader reads the payload descriptor (RFC 9628 4.2): a picture begins
// where B is set in its smallest spatial layer, the frames of the layers
// above following it (SVC). pion's parser appends each descriptor's
// reference indices to the last one's: a stream-long reader would grow
// without end.
type vp9Reader struct {
	data   []byte
	ends   bool     // the last packet ends its layer's frame (E)
	endSID int      // the spatial layer of the last packet that ended one
	sizes  [][2]int // each spatial layer's size, from the last scalability structure
	begun  int      // the picture ID of the last layer frame begun, plus one (0: none)
}

func (r *vp9Reader) unpack(payload []byte, _ bool) (starts, ok bool) {
	d, ok := readVP9Descriptor(payload)
	if !ok {
		return false, false
	}
	r.data, r.ends = payload[d.end:], payload[0]&vp9E != 0
	if r.ends {
		r.endSID = d.sid
	}
	if d.sizes != nil {
		r.sizes = r.sizes[:0]
		for i := 0; i+4 <= len(d.sizes); i += 4 {
			r.sizes = append(r.sizes, [2]int{int(d.sizes[i])<<8 | int(d.sizes[i+1]), int(d.sizes[i+2])<<8 | int(d.sizes[i+3])})
		}
	}
	// A picture starts with the first of its layer frames to arrive: its
	// smallest layer's, or where an SFU reads the dependency descriptor, the
	// layer it forwards of a picture between key pictures (L<n>T3_KEY: such
	// frames refer to their own layer alone), which is then the picture's only.
	begins := payload[0]&vp9B != 0
	starts = begins && (d.sid == 0 || d.pictureID < 0 || d.pictureID+1 != r.begun)
	if begins {
		r.begun = d.pictureID + 1
	}
	return starts, true
}

func (r *vp9Reader) emit(sink frameSink) { sink.take(r.data) }

// layerSize is the size of the spatial layer whose frame ended last, where
// the stream has several: what a decoder shows of a picture ending there.
func (r *vp9Reader) layerSize() (w, h int, ok bool) {
	if len(r.sizes) < 2 || r.endSID >= len(r.sizes) {
		return 0, 0, false
	}
	return r.sizes[r.endSID][0], r.sizes[r.endSID][1], true
}

func (r *vp9Reader) frameEnds() bool { return r.ends }

// vp9Descriptor is what a receiver reads of a payload descriptor: where
// the frame data begins, the spatial layer (0 where none is named), and the
// scalability structure's layer sizes (16-bit width and height each), nil
// where it has none.
type vp9Descriptor struct {
	end, sid  int
	pictureID int // -1 where it has none
	sizes     []byte
}

func readVP9Descriptor(p []byte) (d vp9Descriptor, ok bool) {
	if len(p) == 0 {
		return d, false
	}
	flags, pos := p[0], 1
	d.pictureID = -1
	if flags&vp9I != 0 && len(p) > pos { // picture ID, 7 or 15 bits
		if d.pictureID = int(p[pos]); p[pos]&0x80 != 0 && len(p) > pos+1 {
			d.pictureID = int(p[pos]&0x7f)<<8 | int(p[pos+1])
		}
		pos += 1 + int(p[pos]>>7)
	}
	if flags&vp9L != 0 && len(p) > pos { // layer indices, and in non-flexible mode TL0PICIDX
		d.sid = int(p[pos] >> 1 & 7)
		pos += 2 - int(flags&vp9F>>4)
	}
	if flags&(vp9F|vp9P) == vp9F|vp9P { // reference indices, each with N set but the last
		for i := 0; i < 3 && pos < len(p); i++ {
			pos++
			if p[pos-1]&1 == 0 {
				break
			}
		}
	}
	if flags&vp9V != 0 && pos < len(p) { // the scalability structure
		ss := p[pos]
		pos++
		if ss&0x10 != 0 { // Y: each spatial layer's size
			n := 4 * int(ss>>5+1)
			d.sizes = p[pos:min(pos+n, len(p))]
			pos += n
		}
		if ss&0x08 != 0 && pos < len(p) { // G: the group of pictures
			n := int(p[pos])
			pos++
			for i := 0; i < n && pos < len(p); i++ {
				pos += 1 + int(p[pos]>>2&3)
			}
		}
	}
	d.end = pos
	return d, pos <= len(p)
}
