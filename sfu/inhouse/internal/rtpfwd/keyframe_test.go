package rtpfwd

import "testing"

// Each codec's payloads, read as the SFU reads them: through the media type
// the track was negotiated with.
func TestKeyframeStartsAreReadPerCodec(t *testing.T) {
	cases := []struct {
		mime string
		pl   []byte
		want bool
	}{
		{"video/VP8", vp8Payload(true, true, ""), true},
		{"video/VP8", vp8Payload(true, false, ""), false},
		{"video/VP8", vp8Payload(false, true, ""), false},
		{"video/VP8", []byte{0x10, 0x00}, true},             // no extension
		{"video/VP8", []byte{0x90, 0x80, 0x05, 0x00}, true}, // 7-bit picture id
		{"video/VP8", []byte{0x90, 0xf0, 0x81, 0x02, 0x07, 0x20, 0x00}, true},
		{"video/VP8", []byte{0x11, 0x00}, false}, // partition 1
		{"video/VP8", []byte{0x90}, false},
		{"video/VP8", []byte{0x90, 0x80}, false},
		{"video/VP8", nil, false},

		{"video/vp9", []byte{0x08, 0xaa}, true},                    // B, not predicted, no descriptor fields
		{"video/vp9", []byte{0x48, 0xaa}, false},                   // P: inter-picture predicted
		{"video/vp9", []byte{0x04, 0xaa}, false},                   // E only: a frame's end
		{"video/vp9", []byte{0x88, 0x85, 0x01, 0xaa}, true},        // 15-bit picture ID
		{"video/vp9", []byte{0xa8, 0x05, 0x00, 0x10, 0xaa}, true},  // layer indices: spatial layer 0
		{"video/vp9", []byte{0xa8, 0x05, 0x02, 0x10, 0xaa}, false}, // spatial layer 1
		{"video/vp9", []byte{0xa8, 0x05}, false},                   // cut short
		{"video/vp9", nil, false},

		{"video/H264", []byte{0x65, 0x88}, true},  // IDR slice, whole
		{"video/H264", []byte{0x67, 0x42}, true},  // sequence parameter set
		{"video/H264", []byte{0x41, 0x9a}, false}, // non-IDR slice
		// STAP-A: SPS, PPS (what a browser sends before an IDR picture)
		{"video/H264", []byte{0x78, 0x00, 0x02, 0x67, 0x42, 0x00, 0x02, 0x68, 0xce}, true},
		{"video/H264", []byte{0x78, 0x00, 0x02, 0x06, 0x05, 0x00, 0x02, 0x68, 0xce}, false}, // SEI, PPS
		{"video/H264", []byte{0x78, 0x00, 0x09, 0x67}, false},                               // a size past the end
		{"video/H264", []byte{0x7c, 0x85, 0x88}, true},                                      // FU-A start of an IDR slice
		{"video/H264", []byte{0x7c, 0x05, 0x88}, false},                                     // FU-A continuation
		{"video/H264", []byte{0x7c, 0x81, 0x9a}, false},                                     // FU-A start of a non-IDR slice
		{"video/H264", nil, false},

		{"video/AV1", []byte{0x18, 0x0a}, true},  // N: a new coded video sequence
		{"video/AV1", []byte{0x10, 0x32}, false}, // another packet
		{"video/AV1", nil, false},

		{"audio/opus", []byte{0x10, 0x00}, false}, // no keyframes, whatever its bytes
	}
	for _, c := range cases {
		if got := CodecOf(c.mime).KeyframeStart(c.pl); got != c.want {
			t.Errorf("%s %x: got %v want %v", c.mime, c.pl, got, c.want)
		}
	}
}
