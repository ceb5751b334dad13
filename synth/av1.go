package main

import (
	"errors"
	"fmt"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// AV1 main profile as Chrome sends it (the AOM's RTP payload format): a
// temporal unit's OBUs without the temporal delimiter, each without its
// size field, packed into packets behind a one-byte aggregation header. The
// clip's file is IVF, a temporal unit a frame, its OBUs with their sizes.
var av1Codec = &videoCodec{
	name: "av1", mime: webrtc.MimeTypeAV1, fmtp: "level-idx=5;profile=0;tier=0", fourcc: "AV01",
	readFrames: readAV1, isKeyframe: av1IsKeyframe, keyframeSize: av1KeyframeSize,
	reassembled: av1Reassembled,
	newStream:   func() videoStream { return newAV1Stream() },
	newReader:   func() frameReader { return &av1Reader{} },
}

const (
	obuSequenceHeader  = 1
	obuTemporalDelim   = 2
	obuFrameHeader     = 3
	obuFrame           = 6
	obuTileList        = 8
	obuExtensionFlag   = 0x04
	obuHasSizeField    = 0x02
	av1Z, av1Y, av1N   = 0x80, 0x40, 0x08
	av1MaxSizedOmitted = 3 // W names up to three elements, the last without its length
)

func obuType(header byte) byte { return header >> 3 & 0xf }

// leb128 reads an unsigned LEB128 number: its value and length, 0 if b
// ends inside it.
func leb128(b []byte) (v, n int) {
	for i := 0; i < len(b) && i < 8; i++ {
		v |= int(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

func leb128Len(v int) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func putLEB128(b []byte, v int) []byte {
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

// obus calls f with each OBU of a temporal unit whose OBUs all carry their
// size (as the file has them, read by readAV1): its header and payload.
func obus(tu []byte, f func(header, payload []byte)) {
	for len(tu) > 0 {
		h := 1 + int(tu[0]&obuExtensionFlag>>2)
		size, n := leb128(tu[h:])
		f(tu[:h], tu[h+n:h+n+size])
		tu = tu[h+n+size:]
	}
}

// obuSent tells whether an OBU travels in RTP: temporal delimiters and tile
// lists do not.
func obuSent(header []byte) bool {
	t := obuType(header[0])
	return t != obuTemporalDelim && t != obuTileList
}

// readAV1 returns the temporal units of an AV1 IVF file, checked to be what
// obus reads.
func readAV1(path string) ([][]byte, error) {
	frames, err := ivfFrames("AV01")(path)
	if err != nil {
		return nil, err
	}
	for i, tu := range frames {
		for rest := tu; len(rest) > 0; {
			h := 1 + int(rest[0]&obuExtensionFlag>>2)
			if rest[0]&obuHasSizeField == 0 || len(rest) < h+1 {
				return nil, fmt.Errorf("temporal unit %d: an OBU without its size", i)
			}
			size, n := leb128(rest[h:])
			if n == 0 || h+n+size > len(rest) {
				return nil, fmt.Errorf("temporal unit %d: an OBU runs past its end", i)
			}
			rest = rest[h+n+size:]
		}
	}
	if len(frames) == 0 {
		return nil, errors.New("no temporal units")
	}
	return frames, nil
}

// av1IsKeyframe reads the frame header (AV1 5.9.2) of a temporal unit's
// first frame: not a shown existing frame, of frame type KEY_FRAME. (A
// sequence header that reduces still pictures' headers is no video's.)
func av1IsKeyframe(tu []byte) bool {
	key, found := false, false
	obus(tu, func(header, payload []byte) {
		if t := obuType(header[0]); !found && (t == obuFrame || t == obuFrameHeader) && len(payload) > 0 {
			found, key = true, payload[0]&0xe0 == 0
		}
	})
	return key
}

// av1Reassembled is what a receiver gets of a temporal unit: the OBUs sent,
// each with its header, size flag cleared, and payload.
func av1Reassembled(tu []byte) []byte {
	out := make([]byte, 0, len(tu))
	obus(tu, func(header, payload []byte) {
		if obuSent(header) {
			out = append(append(append(out, header[0]&^obuHasSizeField), header[1:]...), payload...)
		}
	})
	return out
}

// av1KeyframeSize reads the picture size from the sequence header a
// keyframe's OBUs begin with (AV1 5.5): its largest frame, which is the
// frame's unless a frame header overrides it.
func av1KeyframeSize(head []byte) (w, h int, ok bool) {
	if len(head) < 2 || obuType(head[0]) != obuSequenceHeader {
		return 0, 0, false
	}
	r := bitReader{b: head[1+int(head[0]&obuExtensionFlag>>2):]}
	r.bits(4)           // seq_profile, still_picture
	if r.bits(1) == 1 { // reduced_still_picture_header
		r.bits(5)
	} else {
		if r.bits(1) == 1 { // timing_info_present_flag: no realtime encoder's
			return 0, 0, false
		}
		displayDelay := r.bits(1)
		for range r.bits(5) + 1 { // operating points
			r.bits(12) // operating_point_idc
			if r.bits(5) > 7 {
				r.bits(1) // seq_tier
			}
			if displayDelay == 1 && r.bits(1) == 1 {
				r.bits(4)
			}
		}
	}
	wBits, hBits := int(r.bits(4))+1, int(r.bits(4))+1
	w, h = int(r.bits(wBits))+1, int(r.bits(hBits))+1
	return w, h, !r.short
}

// av1Stream packetizes temporal units as Chrome does: OBU elements packed
// into packets as full as the MTU allows, one too large for the rest of a
// packet continued in the next (Y, then Z); W counts the elements where
// there are three or fewer, the last then without its length; N marks a
// keyframe's first packet, where a coded video sequence starts.
type av1Stream struct {
	rtpStream
	buf    [mtu - rtpHeaderSize]byte
	pieces []av1Piece // the packet's pieces of elements, being packed
	elems  []av1Element
}

// av1Element is an OBU as a packet carries it: its header, size flag
// cleared, then its payload.
type av1Element struct {
	header  [2]byte
	hlen    int
	payload []byte
}

func (e *av1Element) size() int { return e.hlen + len(e.payload) }

// av1Piece is bytes [off, off+n) of an element.
type av1Piece struct {
	elem   *av1Element
	off, n int
}

func newAV1Stream() *av1Stream { return &av1Stream{rtpStream: *newRTPStream()} }

func (s *av1Stream) header() *rtpStream { return &s.rtpStream }

func (s *av1Stream) send(tu []byte, ticks uint32, write func(*rtp.Packet) error) (packets, bytes int) {
	s.elems = s.elems[:0]
	obus(tu, func(header, payload []byte) {
		if obuSent(header) {
			e := av1Element{hlen: len(header), payload: payload}
			copy(e.header[:], header)
			e.header[0] &^= obuHasSizeField
			s.elems = append(s.elems, e)
		}
	})
	first, continued := true, false
	flush := func(more, end bool) {
		b := s.buf[:1]
		b[0] = 0
		if continued {
			b[0] |= av1Z
		}
		if more {
			b[0] |= av1Y
		}
		if first && av1IsKeyframe(tu) {
			b[0] |= av1N
		}
		if len(s.pieces) <= av1MaxSizedOmitted {
			b[0] |= byte(len(s.pieces)) << 4
		}
		for i, p := range s.pieces {
			if b[0]&0x30 == 0 || i < len(s.pieces)-1 {
				b = putLEB128(b, p.n)
			}
			b = p.elem.appendBytes(b, p.off, p.n)
		}
		_ = write(s.next(b, end)) // fails only before a connection is bound
		packets++
		bytes += len(b)
		first, continued, s.pieces = false, more, s.pieces[:0]
	}
	used, room := 0, len(s.buf)-1 // room: behind the aggregation header
	for i := range s.elems {
		e := &s.elems[i]
		for off := 0; off < e.size(); {
			left := e.size() - off
			// each piece counted with its length, as if W were 0
			if need := leb128Len(left) + left; need <= room-used {
				s.pieces = append(s.pieces, av1Piece{e, off, left})
				used += need
				break
			}
			free := room - used
			if free < 4 { // no room worth a fragment: the next packet
				flush(false, false)
				used = 0
				continue
			}
			n := free - leb128Len(free)
			s.pieces = append(s.pieces, av1Piece{e, off, n})
			off += n
			flush(true, false)
			used = 0
		}
	}
	flush(false, true)
	s.ts += ticks
	return packets, bytes
}

func (e *av1Element) appendBytes(b []byte, off, n int) []byte {
	if off < e.hlen {
		k := min(e.hlen-off, n)
		b = append(b, e.header[off:off+k]...)
		off, n = off+k, n-k
	}
	return append(b, e.payload[off-e.hlen:off-e.hlen+n]...)
}

// av1Reader reassembles temporal units: a packet whose first element
// continues no fragment (Z clear) begins one where it follows the previous
// unit's last packet with nothing lost.
type av1Reader struct {
	payload []byte
}

func (r *av1Reader) unpack(payload []byte, afterFrame bool) (starts, ok bool) {
	if len(payload) < 2 {
		return false, false
	}
	r.payload = payload
	return payload[0]&av1Z == 0 && afterFrame, true
}

func (r *av1Reader) emit(sink frameSink) {
	w := int(r.payload[0] >> 4 & 3)
	p := r.payload[1:]
	for i := 0; len(p) > 0; i++ {
		n := len(p)
		if w == 0 || i < w-1 {
			size, k := leb128(p)
			if k == 0 || k+size > len(p) {
				return
			}
			n, p = size, p[k:]
		}
		sink.take(p[:n])
		p = p[n:]
	}
}
