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

// encoders encode the test pattern at size with the real ffmpeg as the media
// step does for each codec (sfubench/encoding.py VIDEO: a browser's
// realtime encoder, a keyframe every gop frames) and return the file.
var encoders = map[*videoCodec]func(t testing.TB, gop int, size, kbps string) string{
	// constrained baseline, an access unit delimiter before each frame, x264's SEI left out
	h264Codec: encodeWith(".h264", "-c:v", "libx264", "-profile:v", "baseline", "-pix_fmt", "yuv420p", "-tune",
		"zerolatency", "-bf", "0", "-sc_threshold", "0", "-bsf:v", "h264_metadata=aud=insert,filter_units=remove_types=6",
		"-f", "h264"),
	vp9Codec: encodeWith(".ivf", "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-auto-alt-ref", "0",
		"-lag-in-frames", "0", "-pix_fmt", "yuv420p", "-f", "ivf"),
	av1Codec: encodeWith(".ivf", "-c:v", "libaom-av1", "-usage", "realtime", "-cpu-used", "8", "-lag-in-frames", "0",
		"-pix_fmt", "yuv420p", "-f", "ivf"),
}

func encodeWith(ext string, args ...string) func(t testing.TB, gop int, size, kbps string) string {
	return func(t testing.TB, gop int, size, kbps string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), size+ext)
		g := strconv.Itoa(gop)
		ffmpeg(t, append(append([]string{"-f", "lavfi", "-i", "testsrc=size=" + size + ":rate=15", "-frames:v", "30",
			"-b:v", kbps, "-g", g, "-keyint_min", g}, args...), path)...)
		return path
	}
}

// The clip in each codec reads as its VP8 one does: every frame, the
// picture size from the keyframe (H.264's 160x90 is cropped from 160x96 in
// macroblocks), keyframes where they were asked for, every frame told
// apart by what a receiver reassembles of it; layers in two codecs are
// refused.
func TestClipInEachCodecIsReadAsEncoded(t *testing.T) {
	for codec, encode := range encoders {
		t.Run(codec.name, func(t *testing.T) {
			c, err := loadClip([]string{encode(t, 15, "160x90", "300k")}, encodeAudio(t), false)
			if err != nil {
				t.Fatal(err)
			}
			if l := c.full(); c.codec != codec || len(l.frames) != 30 || l.width != 160 || l.height != 90 {
				t.Fatalf("%s clip, %d frames of %dx%d, want %s, 30 frames of 160x90", c.codec.name, len(l.frames), l.width, l.height, codec.name)
			}
			for i, want := range map[int]int{0: 0, 1: 15, 15: 15, 16: 0} {
				if c.nextKey[i] != want {
					t.Errorf("next keyframe after %d is %d, want %d", i, c.nextKey[i], want)
				}
			}
			if len(c.codes) != 30 {
				t.Errorf("%d frames recognisable by their bytes, want 30", len(c.codes))
			}
			if _, err := loadClip([]string{encode(t, 15, "80x48", "100k"), encodeLayers(t, 15, "160x96")[0]}, encodeAudio(t), false); err == nil {
				t.Error("layers in two codecs were taken")
			}
		})
	}
}

// packetCheck is a receiver's view of one codec's packets: pion's
// depacketizer (what an SFU or a browser parses) gives back what the
// generator's reader reassembles of the frame; check sees each frame's
// packets, after all of them.
type packetCheck struct {
	depacketize func(t *testing.T, frame []rtp.Packet) []byte
	check       func(t *testing.T, i int, key bool, frame []rtp.Packet)
	after       func(t *testing.T)
}

func h264Check() *packetCheck {
	kinds := map[byte]int{}
	return &packetCheck{
		depacketize: func(t *testing.T, frame []rtp.Packet) []byte {
			var whole []byte
			var d codecs.H264Packet
			for _, p := range frame {
				out, err := d.Unmarshal(p.Payload)
				if err != nil {
					t.Fatal(err)
				}
				whole = append(whole, out...)
			}
			return whole
		},
		// the parameter sets travel aggregated (STAP-A), a keyframe's slice in fragments (FU-A)
		check: func(t *testing.T, _ int, _ bool, frame []rtp.Packet) {
			for _, p := range frame {
				kinds[p.Payload[0]&0x1f]++
			}
		},
		after: func(t *testing.T) {
			if kinds[nalSTAPA] == 0 || kinds[nalFUA] == 0 {
				t.Errorf("packet kinds %v: want aggregated parameter sets (24) and fragments (28)", kinds)
			}
		},
	}
}

// Every frame's packets are what a receiver parses, no larger than the
// MTU, the marker on each frame's last; the generator's own reader
// recognises each frame and reads the picture size; a keyframe that lost
// its first packet is not counted (nothing in its other packets says where
// it began), and the frame after it is.
func TestPacketsInEachCodecAreWhatAReceiverReassembles(t *testing.T) {
	for codec, encode := range encoders {
		t.Run(codec.name, func(t *testing.T) {
			c, err := loadClip([]string{encode(t, 15, "320x180", "1500k")}, encodeAudio(t), false)
			if err != nil {
				t.Fatal(err)
			}
			checks := map[*videoCodec]func() *packetCheck{h264Codec: h264Check, vp9Codec: vp9Check, av1Codec: av1Check}[codec]()
			s := codec.newStream()
			video := &series{}
			video.follow(true)
			in := &inbound{peer: "r1u2", kind: "video", clock: 90000, clip: c, video: video}
			in.reads(codec)
			at := epoch.Add(time.Second)
			for i, f := range c.full().frames {
				var sent []rtp.Packet
				s.send(f, 6000, collect(&sent))
				for j, p := range sent {
					if len(p.Payload)+rtpHeaderSize > mtu || p.Marker != (j == len(sent)-1) {
						t.Errorf("frame %d packet %d: %d bytes, marker %v", i, j, len(p.Payload), p.Marker)
					}
					if i == 15 && j == 0 {
						continue // lost
					}
					in.packet(&p.Header, p.Payload, at)
				}
				if whole, want := checks.depacketize(t, sent), codec.received(f); !bytes.Equal(whole, want) {
					t.Errorf("frame %d depacketized to %d bytes, want its %d", i, len(whole), len(want))
				}
				checks.check(t, i, codec.isKeyframe(f), sent)
				at = at.Add(time.Second / 15)
			}
			checks.after(t)
			got := video.take()
			if len(got) != 29 {
				t.Fatalf("%d frames followed, want 29 (frame 15 lost a packet)", len(got))
			}
			for k, e := range got {
				want := k + k/15 // from 15 on, one position further
				if e.code != want {
					t.Errorf("followed frame %d has code %d, want %d", k, e.code, want)
				}
			}
			if r := in.sample(at); r["frameWidth"] != 320 || r["frameHeight"] != 180 || r["packetsLost"] != int64(1) {
				t.Errorf("sample %v: want 320x180, one packet lost", r)
			}
		})
	}
}

// vp9Check: B on a frame's first packet and E on its last, P on every
// frame but a keyframe, the scalability structure with the picture size
// on a keyframe's first packet, the picture ID one more each frame.
func vp9Check() *packetCheck {
	var last uint16
	return &packetCheck{
		depacketize: func(t *testing.T, frame []rtp.Packet) []byte {
			var whole []byte
			for _, p := range frame {
				var d codecs.VP9Packet
				if _, err := d.Unmarshal(p.Payload); err != nil {
					t.Fatal(err)
				}
				whole = append(whole, d.Payload...)
			}
			return whole
		},
		check: func(t *testing.T, i int, key bool, frame []rtp.Packet) {
			for j, p := range frame {
				var d codecs.VP9Packet
				if _, err := d.Unmarshal(p.Payload); err != nil {
					t.Fatal(err)
				}
				if d.B != (j == 0) || d.E != (j == len(frame)-1) || d.P == key || d.V != (key && j == 0) || !d.I ||
					i > 0 && d.PictureID != (last+1)%pictureIDs {
					t.Errorf("frame %d packet %d (keyframe %v): B %v E %v P %v V %v, picture ID %d after %d", i, j, key,
						d.B, d.E, d.P, d.V, d.PictureID, last)
				}
				if d.V && (d.NS != 0 || len(d.Width) != 1 || d.Width[0] != 320 || d.Height[0] != 180) {
					t.Errorf("frame %d: scalability structure of %d layers, %v x %v", i, d.NS+1, d.Width, d.Height)
				}
			}
			var d codecs.VP9Packet
			_, _ = d.Unmarshal(frame[0].Payload)
			last = d.PictureID
		},
		after: func(*testing.T) {},
	}
}

// av1Check: N on a keyframe's first packet only, an OBU too large for a
// packet continued in the next (Y, then Z), W naming up to three elements.
func av1Check() *packetCheck {
	var fragments, counted int
	return &packetCheck{
		depacketize: func(t *testing.T, frame []rtp.Packet) []byte {
			var whole []byte
			var d codecs.AV1Depacketizer
			for _, p := range frame {
				out, err := d.Unmarshal(p.Payload)
				if err != nil {
					t.Fatal(err)
				}
				whole = append(whole, out...)
			}
			return av1Reassembled(whole)
		},
		check: func(t *testing.T, i int, key bool, frame []rtp.Packet) {
			continued := false
			for j, p := range frame {
				h := p.Payload[0]
				if (h&av1N != 0) != (key && j == 0) || (h&av1Z != 0) != continued {
					t.Errorf("frame %d packet %d (keyframe %v): aggregation header %08b", i, j, key, h)
				}
				continued = h&av1Y != 0
				if continued {
					fragments++
				}
				if h&0x30 != 0 {
					counted++
				}
			}
			if continued {
				t.Errorf("frame %d: its last packet says its last OBU goes on", i)
			}
		},
		after: func(t *testing.T) {
			if fragments == 0 || counted == 0 {
				t.Errorf("%d fragmented OBUs, %d packets with W set: want both", fragments, counted)
			}
		},
	}
}

// A stream that begins mid-way (as Medooze starts a new receiver) has no
// keyframe to start from: the receiver asks for one as it sees the first
// frame, again each keyframeRetry while none comes, and no more once one
// has, counting them as getStats's pliCount.
func TestAReceiverAsksForAKeyframeUntilOneComes(t *testing.T) {
	c := testClip(t)
	asked := make(chan time.Time, 10)
	in := &inbound{peer: "r1u2", kind: "video", clock: 90000, clip: c, video: &series{}}
	in.reads(c.codec)
	var at time.Time
	in.askKey = func() { asked <- at }
	s := c.codec.newStream()
	var order []int
	for range 2 {
		for i := 1; i < 15; i++ {
			order = append(order, i) // 28 frames between keyframes: 1.87 s
		}
	}
	order = append(order, 0, 1, 2, 3) // a keyframe, then more that need none
	at = epoch.Add(time.Second)
	for _, i := range order {
		var sent []rtp.Packet
		s.send(c.full().frames[i], 6000, collect(&sent))
		for _, p := range sent {
			in.packet(&p.Header, p.Payload, at)
		}
		at = at.Add(time.Second / 15)
	}
	if r := in.sample(at); r["pliCount"] != uint64(2) || r["frameHeight"] != 96 {
		t.Errorf("sample %v: want 2 keyframe requests (at the first frame and a second later), the keyframe's size", r)
	}
	for range 2 {
		select {
		case <-asked:
		case <-time.After(time.Second):
			t.Fatal("a keyframe request was counted but not made")
		}
	}
}
