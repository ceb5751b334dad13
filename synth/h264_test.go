package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
)

// encodeH264 encodes the test pattern at size with the real ffmpeg as the
// media step does for H.264 (constrained baseline, no B-frames, a keyframe
// every gop frames, an access unit delimiter before each frame, x264's SEI
// left out) and returns the file.
func encodeH264(t testing.TB, gop int, size, kbps string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), size+".h264")
	ffmpeg(t, "-f", "lavfi", "-i", "testsrc=size="+size+":rate=15", "-frames:v", "30", "-c:v", "libx264",
		"-profile:v", "baseline", "-pix_fmt", "yuv420p", "-tune", "zerolatency", "-bf", "0", "-b:v", kbps, "-g", strconv.Itoa(gop),
		"-keyint_min", strconv.Itoa(gop), "-sc_threshold", "0", "-bsf:v", "h264_metadata=aud=insert,filter_units=remove_types=6",
		"-f", "h264", path)
	return path
}

// The clip in H.264 reads as its VP8 one does: every frame, the picture
// size from the sequence parameter set (160x90 is cropped from 160x96 in
// macroblocks), keyframes where they were asked for, every frame told
// apart by its bytes.
func TestH264ClipIsReadAsEncoded(t *testing.T) {
	c, err := loadClip([]string{encodeH264(t, 15, "160x90", "300k")}, encodeAudio(t))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.full(); c.codec != h264Codec || len(l.frames) != 30 || l.width != 160 || l.height != 90 {
		t.Fatalf("%s clip, %d frames of %dx%d, want H.264, 30 frames of 160x90", c.codec.name, len(l.frames), l.width, l.height)
	}
	for i, want := range map[int]int{0: 0, 1: 15, 15: 15, 16: 0} {
		if c.nextKey[i] != want {
			t.Errorf("next keyframe after %d is %d, want %d", i, c.nextKey[i], want)
		}
	}
	if len(c.codes) != 30 {
		t.Errorf("%d frames recognisable by their bytes, want 30", len(c.codes))
	}
	if _, err := loadClip([]string{encodeH264(t, 15, "80x48", "100k"), encodeLayers(t, 15, "160x96")[0]}, encodeAudio(t)); err == nil {
		t.Error("layers in two codecs were taken")
	}
}

// Every frame's packets are what a receiver parses (pion's H.264
// depacketizer gives the frame back whole), no larger than the MTU, the
// marker on each frame's last; the parameter sets travel aggregated and a
// keyframe's slice in fragments. The generator's own reader recognises
// each frame and reads the picture size; a frame that lost its first
// packet is not counted (nothing in its other packets says where it
// began), and the one after it is.
func TestH264PacketsAreWhatAReceiverReassembles(t *testing.T) {
	c, err := loadClip([]string{encodeH264(t, 15, "320x180", "1500k")}, encodeAudio(t))
	if err != nil {
		t.Fatal(err)
	}
	s := newH264Stream()
	video := &series{}
	video.follow(true)
	in := &inbound{peer: "r1u2", kind: "video", clock: 90000, clip: c, video: video}
	in.reads(h264Codec)
	kinds := map[byte]int{}
	at := epoch.Add(time.Second)
	for i, f := range c.full().frames {
		var sent []rtp.Packet
		s.send(f, 6000, collect(&sent))
		var whole []byte
		var d codecs.H264Packet
		for j, p := range sent {
			kinds[p.Payload[0]&0x1f]++
			if len(p.Payload)+rtpHeaderSize > mtu || p.Marker != (j == len(sent)-1) {
				t.Errorf("frame %d packet %d: %d bytes, marker %v", i, j, len(p.Payload), p.Marker)
			}
			out, err := d.Unmarshal(p.Payload)
			if err != nil {
				t.Fatalf("frame %d packet %d: %v", i, j, err)
			}
			whole = append(whole, out...)
			if i == 20 && j == 0 {
				continue // lost
			}
			in.packet(&p.Header, p.Payload, at)
		}
		if !bytes.Equal(whole, f) {
			t.Errorf("frame %d depacketized to %d bytes, want its %d", i, len(whole), len(f))
		}
		at = at.Add(time.Second / 15)
	}
	if kinds[nalSTAPA] == 0 || kinds[nalFUA] == 0 {
		t.Errorf("packet kinds %v: want aggregated parameter sets (24) and fragments (28)", kinds)
	}
	got := video.take()
	if len(got) != 29 {
		t.Fatalf("%d frames followed, want 29 (frame 20 lost a packet)", len(got))
	}
	for k, e := range got {
		want := k + k/20 // from 20 on, one position further
		if e.code != want {
			t.Errorf("followed frame %d has code %d, want %d", k, e.code, want)
		}
	}
	if r := in.sample(at); r["frameWidth"] != 320 || r["frameHeight"] != 180 || r["packetsLost"] != int64(1) {
		t.Errorf("sample %v: want 320x180, one packet lost", r)
	}
}
