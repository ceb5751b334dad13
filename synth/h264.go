package main

import (
	"bytes"
	"errors"
	"os"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// H.264 as Chrome sends it: constrained baseline, packetization mode 1
// (RFC 6184: a NAL unit a packet, small ones aggregated, large ones in
// fragments). The clip's file is an Annex B stream with an access unit
// delimiter before each frame; a frame is kept as its NAL units, each after
// a four-byte start code, the delimiter left out (browsers send none).
var h264Codec = &videoCodec{
	name: "h264", mime: webrtc.MimeTypeH264,
	fmtp:       "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
	readFrames: readAnnexB, isKeyframe: h264IsKeyframe, keyframeSize: h264KeyframeSize,
	newStream: func() videoStream { return newH264Stream() },
	newReader: func() frameReader { return &h264Reader{} },
}

const (
	nalIDR   = 5
	nalSPS   = 7
	nalAUD   = 9
	nalSTAPA = 24
	nalFUA   = 28
)

var startCode = []byte{0, 0, 0, 1}

// nalUnits calls f with each NAL unit of an Annex B stream, in order.
func nalUnits(b []byte, f func(nal []byte)) {
	start := -1
	for {
		i := bytes.Index(b[max(start, 0):], startCode[1:])
		if i < 0 {
			break
		}
		i += max(start, 0)
		if start >= 0 {
			f(bytes.TrimRight(b[start:i], "\x00")) // a four-byte start code's first zero
		}
		start = i + 3
	}
	if start >= 0 && start < len(b) {
		f(b[start:])
	}
}

// readAnnexB returns the frames of an H.264 Annex B file, split at its
// access unit delimiters.
func readAnnexB(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	var cur []byte
	nalUnits(b, func(nal []byte) {
		if len(nal) == 0 {
			return
		}
		if nal[0]&0x1f == nalAUD {
			if cur != nil {
				frames = append(frames, cur)
			}
			cur = []byte{}
			return
		}
		if cur != nil {
			cur = append(append(cur, startCode...), nal...)
		}
	})
	if len(cur) > 0 {
		frames = append(frames, cur)
	}
	if len(frames) == 0 {
		return nil, errors.New("no H.264 access unit delimiters (encode with -bsf:v h264_metadata=aud=insert)")
	}
	return frames, nil
}

func h264IsKeyframe(frame []byte) bool {
	key := false
	nalUnits(frame, func(nal []byte) { key = key || len(nal) > 0 && nal[0]&0x1f == nalIDR })
	return key
}

// h264KeyframeSize reads the picture size from the sequence parameter set
// a keyframe begins with (H.264 7.3.2.1.1), within its first
// frameHeadSize bytes.
func h264KeyframeSize(head []byte) (w, h int, ok bool) {
	head = head[:min(len(head), frameHeadSize)]
	if !bytes.HasPrefix(head, startCode) || len(head) < 5 || head[4]&0x1f != nalSPS {
		return 0, 0, false
	}
	var rbsp [frameHeadSize]byte // without emulation prevention bytes
	n, zeros := 0, 0
	for _, c := range head[5:] {
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
		rbsp[n] = c
		n++
	}
	r := bitReader{b: rbsp[:n]}
	profile := r.bits(8)
	r.bits(16) // constraint flags, level
	r.ue()     // seq_parameter_set_id
	switch profile {
	case 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
		if r.ue() == 3 { // chroma_format_idc
			r.bits(1)
		}
		r.ue() // bit depths
		r.ue()
		r.bits(1)
		if r.bits(1) == 1 { // scaling matrices: not what a browser or the clip sends
			return 0, 0, false
		}
	}
	r.ue()          // log2_max_frame_num_minus4
	switch r.ue() { // pic_order_cnt_type
	case 0:
		r.ue()
	case 1:
		r.bits(1)
		r.ue()
		r.ue()
		for range r.ue() {
			r.ue()
		}
	}
	r.ue()    // max_num_ref_frames
	r.bits(1) // gaps_in_frame_num_value_allowed_flag
	mbsW, mapH := r.ue()+1, r.ue()+1
	frameMbsOnly := r.bits(1)
	if frameMbsOnly == 0 {
		r.bits(1)
	}
	r.bits(1) // direct_8x8_inference_flag
	var left, right, top, bottom uint
	if r.bits(1) == 1 {
		left, right, top, bottom = r.ue(), r.ue(), r.ue(), r.ue()
	}
	if r.short {
		return 0, 0, false
	}
	// cropped in 4:2:0's units: two samples across, two (or four, field-coded) down
	w = int(mbsW*16 - 2*(left+right))
	h = int((2-frameMbsOnly)*mapH*16 - 2*(2-frameMbsOnly)*(top+bottom))
	return w, h, w > 0 && h > 0
}

// bitReader reads a parameter set's bits; short says it ran past them.
type bitReader struct {
	b     []byte
	pos   int
	short bool
}

func (r *bitReader) bits(n int) uint {
	var v uint
	for range n {
		if r.pos >= 8*len(r.b) {
			r.short = true
			return 0
		}
		v = v<<1 | uint(r.b[r.pos/8]>>(7-r.pos%8)&1)
		r.pos++
	}
	return v
}

// ue reads an unsigned Exp-Golomb code; a signed one's bits are the same.
func (r *bitReader) ue() uint {
	zeros := 0
	for r.bits(1) == 0 && !r.short {
		if zeros++; zeros > 31 {
			r.short = true
			return 0
		}
	}
	return 1<<zeros - 1 + r.bits(zeros)
}

// h264Stream packetizes access units as Chrome does: NAL units that fit
// together go in one aggregation packet (STAP-A), one too large for a
// packet in fragments of equal size (FU-A), any other alone.
type h264Stream struct {
	rtpStream
	buf  [mtu - rtpHeaderSize]byte
	nals [][]byte
}

func newH264Stream() *h264Stream { return &h264Stream{rtpStream: *newRTPStream()} }

func (s *h264Stream) header() *rtpStream { return &s.rtpStream }

func (s *h264Stream) send(frame []byte, ticks uint32, write func(*rtp.Packet) error) (packets, bytes int) {
	s.nals = s.nals[:0]
	nalUnits(frame, func(nal []byte) { s.nals = append(s.nals, nal) })
	out := func(b []byte, marker bool) {
		_ = write(s.next(b, marker)) // fails only before a connection is bound
		packets++
		bytes += len(b)
	}
	for i := 0; i < len(s.nals); {
		if j := s.aggregated(i); j > i+1 {
			b := s.buf[:1]
			var f, nri byte // the header's: any unit's F, the highest NRI
			for _, nal := range s.nals[i:j] {
				f, nri = f|nal[0]&0x80, max(nri, nal[0]&0x60)
				b = append(b, byte(len(nal)>>8), byte(len(nal)))
				b = append(b, nal...)
			}
			b[0] = f | nri | nalSTAPA
			i = j
			out(b, i == len(s.nals))
			continue
		}
		nal := s.nals[i]
		i++
		if len(nal) <= len(s.buf) {
			out(nal, i == len(s.nals))
			continue
		}
		data, room := nal[1:], len(s.buf)-2
		count := (len(data) + room - 1) / room
		size := (len(data) + count - 1) / count
		for k := range count {
			frag := data[k*size : min((k+1)*size, len(data))]
			b := s.buf[:2+len(frag)]
			b[0], b[1] = nal[0]&0xe0|nalFUA, nal[0]&0x1f
			if k == 0 {
				b[1] |= 0x80 // S
			}
			if k == count-1 {
				b[1] |= 0x40 // E
			}
			copy(b[2:], frag)
			out(b, k == count-1 && i == len(s.nals))
		}
	}
	s.ts += ticks
	return packets, bytes
}

// aggregated is the end of the run of NAL units from i that fit in one
// aggregation packet.
func (s *h264Stream) aggregated(i int) int {
	size := 1
	j := i
	for ; j < len(s.nals) && size+2+len(s.nals[j]) <= len(s.buf); j++ {
		size += 2 + len(s.nals[j])
	}
	return j
}

// h264Reader reassembles access units from packets in packetization mode 1.
// Nothing in a packet says a frame starts there: one does where the
// previous frame's last packet (the marker) was followed with nothing lost.
type h264Reader struct {
	payload []byte
	nalHead [1]byte
}

func (r *h264Reader) unpack(payload []byte, afterFrame bool) (starts, ok bool) {
	if len(payload) < 2 {
		return false, false
	}
	switch t := payload[0] & 0x1f; {
	case t >= 1 && t <= 23, t == nalSTAPA:
		starts = true
	case t == nalFUA && len(payload) > 2:
		starts = payload[1]&0x80 != 0
	default:
		return false, false
	}
	r.payload = payload
	return starts && afterFrame, true
}

func (r *h264Reader) emit(sink frameSink) {
	p := r.payload
	switch p[0] & 0x1f {
	case nalSTAPA:
		for p = p[1:]; len(p) >= 2; {
			n := int(p[0])<<8 | int(p[1])
			if n == 0 || 2+n > len(p) {
				return
			}
			sink.take(startCode)
			sink.take(p[2 : 2+n])
			p = p[2+n:]
		}
	case nalFUA:
		if p[1]&0x80 != 0 {
			r.nalHead[0] = p[0]&0xe0 | p[1]&0x1f
			sink.take(startCode)
			sink.take(r.nalHead[:])
		}
		sink.take(p[2:])
	default:
		sink.take(startCode)
		sink.take(p)
	}
}
