package rtpfwd

import "strings"

// Codec says how to read a payload for the start of a keyframe: a
// subscriber is started, and moved to another layer, only there.
type Codec uint8

const (
	NoKeyframes Codec = iota // audio
	VP8
	VP9
	H264
	AV1
)

// CodecOf is the Codec of a media type ("video/VP8"): NoKeyframes for audio,
// and for a video codec it cannot read, which the SFU must therefore not take.
func CodecOf(mime string) Codec {
	switch strings.ToLower(mime) {
	case "video/vp8":
		return VP8
	case "video/vp9":
		return VP9
	case "video/h264":
		return H264
	case "video/av1":
		return AV1
	}
	return NoKeyframes
}

// KeyframeStart tells whether an RTP payload of the codec begins a keyframe.
func (c Codec) KeyframeStart(pl []byte) bool {
	switch c {
	case VP8:
		return IsVP8KeyframeStart(pl)
	case VP9:
		return IsVP9KeyframeStart(pl)
	case H264:
		return IsH264KeyframeStart(pl)
	case AV1:
		return IsAV1KeyframeStart(pl)
	}
	return false
}

// IsVP8KeyframeStart tells whether a VP8 RTP payload (RFC 7741) begins a
// keyframe: S=1, partition 0, and the VP8 frame header's P bit clear.
func IsVP8KeyframeStart(pl []byte) bool {
	if len(pl) < 1 || pl[0]&0x10 == 0 || pl[0]&0x07 != 0 {
		return false
	}
	i := 1
	if pl[0]&0x80 != 0 {
		if len(pl) < 2 {
			return false
		}
		x := pl[1]
		i = 2
		if x&0x80 != 0 { // PictureID, 7 or 15 bits
			if len(pl) <= i {
				return false
			}
			if pl[i]&0x80 != 0 {
				i++
			}
			i++
		}
		if x&0x40 != 0 { // TL0PICIDX
			i++
		}
		if x&0x30 != 0 { // TID/Y/KEYIDX
			i++
		}
	}
	return len(pl) > i && pl[i]&0x01 == 0
}

// IsVP9KeyframeStart tells whether a VP9 RTP payload (RFC 9628) begins a
// keyframe: the start of a frame (B) that is not inter-picture predicted
// (P clear), of the lowest spatial layer where the descriptor names one.
func IsVP9KeyframeStart(pl []byte) bool {
	if len(pl) < 1 || pl[0]&0x08 == 0 || pl[0]&0x40 != 0 {
		return false
	}
	if pl[0]&0x20 == 0 { // no layer indices: one spatial layer
		return true
	}
	i := 1
	if pl[0]&0x80 != 0 { // picture ID, 7 or 15 bits
		if len(pl) <= i {
			return false
		}
		if pl[i]&0x80 != 0 {
			i++
		}
		i++
	}
	return len(pl) > i && (pl[i]>>1)&0x07 == 0
}

// IsH264KeyframeStart tells whether an H.264 RTP payload (RFC 6184,
// packetization mode 1) begins a keyframe: it holds a sequence parameter set
// or an IDR slice, whole, aggregated (STAP-A) or as a fragment's start
// (FU-A). Browsers send the parameter sets just before each IDR picture, so
// the packet carrying them comes first.
func IsH264KeyframeStart(pl []byte) bool {
	const (
		idr, sps   = 5, 7
		stapA, fuA = 24, 28
	)
	key := func(t byte) bool { return t == idr || t == sps }
	if len(pl) < 1 {
		return false
	}
	switch t := pl[0] & 0x1f; t {
	case stapA:
		for i := 1; i+2 < len(pl); {
			size := int(pl[i])<<8 | int(pl[i+1])
			if size == 0 || i+2+size > len(pl) {
				return false
			}
			if key(pl[i+2] & 0x1f) {
				return true
			}
			i += 2 + size
		}
		return false
	case fuA:
		return len(pl) > 1 && pl[1]&0x80 != 0 && key(pl[1]&0x1f)
	default:
		return key(t)
	}
}

// IsAV1KeyframeStart tells whether an AV1 RTP payload (the AOM's RTP
// specification) begins a keyframe: its aggregation header's N bit, set on
// the first packet of a coded video sequence, which a keyframe starts.
func IsAV1KeyframeStart(pl []byte) bool {
	return len(pl) > 0 && pl[0]&0x08 != 0
}
