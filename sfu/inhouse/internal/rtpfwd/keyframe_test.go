package rtpfwd

import "testing"

func TestVP8KeyframeDetection(t *testing.T) {
	cases := []struct {
		pl   []byte
		want bool
	}{
		{vp8Payload(true, true, ""), true},
		{vp8Payload(true, false, ""), false},
		{vp8Payload(false, true, ""), false},
		{[]byte{0x10, 0x00}, true},             // no extension
		{[]byte{0x90, 0x80, 0x05, 0x00}, true}, // 7-bit picture id
		{[]byte{0x90, 0xf0, 0x81, 0x02, 0x07, 0x20, 0x00}, true},
		{[]byte{0x11, 0x00}, false}, // partition 1
		{[]byte{0x90}, false},
		{[]byte{0x90, 0x80}, false},
		{nil, false},
	}
	for _, c := range cases {
		if got := IsVP8KeyframeStart(c.pl); got != c.want {
			t.Errorf("%x: got %v want %v", c.pl, got, c.want)
		}
	}
}

func TestVP9KeyframeDetection(t *testing.T) {
	cases := []struct {
		pl   []byte
		want bool
	}{
		{[]byte{0x08, 0xaa}, true},                    // B, not predicted, no descriptor fields
		{[]byte{0x48, 0xaa}, false},                   // P: inter-picture predicted
		{[]byte{0x04, 0xaa}, false},                   // E only: a frame's end
		{[]byte{0x88, 0x85, 0x01, 0xaa}, true},        // 15-bit picture ID
		{[]byte{0xa8, 0x05, 0x00, 0x10, 0xaa}, true},  // layer indices: spatial layer 0
		{[]byte{0xa8, 0x05, 0x02, 0x10, 0xaa}, false}, // spatial layer 1
		{[]byte{0xa8, 0x05}, false},                   // cut short
		{nil, false},
	}
	for _, c := range cases {
		if got := IsVP9KeyframeStart(c.pl); got != c.want {
			t.Errorf("%x: got %v want %v", c.pl, got, c.want)
		}
	}
}

func TestH264KeyframeDetection(t *testing.T) {
	cases := []struct {
		pl   []byte
		want bool
	}{
		{[]byte{0x65, 0x88}, true},  // IDR slice, whole
		{[]byte{0x67, 0x42}, true},  // sequence parameter set
		{[]byte{0x41, 0x9a}, false}, // non-IDR slice
		// STAP-A: SPS, PPS (what a browser sends before an IDR picture)
		{[]byte{0x78, 0x00, 0x02, 0x67, 0x42, 0x00, 0x02, 0x68, 0xce}, true},
		{[]byte{0x78, 0x00, 0x02, 0x06, 0x05, 0x00, 0x02, 0x68, 0xce}, false}, // SEI, PPS
		{[]byte{0x78, 0x00, 0x09, 0x67}, false},                               // a size past the end
		{[]byte{0x7c, 0x85, 0x88}, true},                                      // FU-A start of an IDR slice
		{[]byte{0x7c, 0x05, 0x88}, false},                                     // FU-A continuation
		{[]byte{0x7c, 0x81, 0x9a}, false},                                     // FU-A start of a non-IDR slice
		{nil, false},
	}
	for _, c := range cases {
		if got := IsH264KeyframeStart(c.pl); got != c.want {
			t.Errorf("%x: got %v want %v", c.pl, got, c.want)
		}
	}
	if CodecOf("video/AV1") != AV1 || !IsAV1KeyframeStart([]byte{0x18, 0x0a}) || IsAV1KeyframeStart([]byte{0x10, 0x32}) {
		t.Error("AV1: the N bit (a new coded video sequence) starts a keyframe, and nothing else")
	}
	if CodecOf("video/H264") != H264 || CodecOf("video/vp9") != VP9 || CodecOf("audio/opus") != NoKeyframes {
		t.Error("media types read wrong")
	}
}
