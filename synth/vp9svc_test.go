package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
)

// encodeSVC builds svcenc (the media step's VP9 SVC encoder, against the
// system's libvpx) and encodes the test pattern at size in layers spatial
// layers, a key picture every gop; it returns the layers' files, smallest
// first.
func encodeSVC(t testing.TB, gop, layers int, size string) []string {
	t.Helper()
	dir := t.TempDir()
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "vpx").Output()
	if err != nil {
		t.Fatalf("pkg-config vpx: %v (scripts/deps.sh apt installs libvpx-dev)", err)
	}
	bin := filepath.Join(dir, "svcenc")
	args := append([]string{"-O2", "-o", bin, filepath.Join("svcenc", "svcenc.c")}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	y4m := filepath.Join(dir, "clip.y4m")
	ffmpeg(t, "-f", "lavfi", "-i", "testsrc=size="+size+":rate=15", "-frames:v", "30", "-pix_fmt", "yuv420p", y4m)
	kbps := []string{"100", "300", "800"}[3-layers:]
	prefix := filepath.Join(dir, "svc")
	cmd := exec.Command(bin, "-layers", fmt.Sprint(layers), "-kbps", strings.Join(kbps, ","), "-gop", fmt.Sprint(gop),
		"-fps", "15", "-o", prefix, y4m)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("svcenc: %v\n%s", err, out)
	}
	var files []string
	for s := range layers {
		files = append(files, fmt.Sprintf("%s-s%d.ivf", prefix, s))
	}
	return files
}

// svcPacket is one packet of an SVC stream with its descriptor parsed.
type svcPacket struct {
	rtp.Packet
	d codecs.VP9Packet
}

// A picture is one stream's frames of every spatial layer, smallest first,
// in flexible mode: B and E around each layer's frame, the marker on the
// picture's last packet, the picture ID and timestamp shared; a key
// picture's first packet gives every layer's size, its upper layers depend
// on the layer below (D) and nothing else, and between key pictures each
// layer refers to its own frames in temporal layers 0, 2, 1, 2, each
// picture a point to switch up at.
func TestSVCPicturesAreOneStreamOfSpatialLayers(t *testing.T) {
	c, err := loadClip(encodeSVC(t, 15, 3, "320x180"), encodeAudio(t), true)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.layers[0].width, c.layers[1].width, c.layers[2].width); got != "80 160 320" || c.full().height != 180 {
		t.Fatalf("layer widths %s, full height %d", got, c.full().height)
	}
	if c.nextKey[1] != 15 || c.nextKey[15] != 15 || c.spatialLayers() != 3 {
		t.Fatalf("next key pictures %v, %d spatial layers", c.nextKey, c.spatialLayers())
	}
	s := newVP9SVCStream(c)
	var pictures [][]svcPacket
	for i := range c.layers[0].frames {
		var sent []rtp.Packet
		s.send(c.picture(i), 6000, collect(&sent))
		var pic []svcPacket
		for _, p := range sent {
			sp := svcPacket{Packet: p}
			if _, err := sp.d.Unmarshal(p.Payload); err != nil {
				t.Fatal(err)
			}
			pic = append(pic, sp)
		}
		pictures = append(pictures, pic)
	}
	for i, pic := range pictures {
		key := i%15 == 0
		tid := []uint8{0, 2, 1, 2}[i%15%4]
		for j, p := range pic {
			d := p.d
			first := j == 0 || pic[j-1].d.SID != d.SID
			last := j == len(pic)-1 || pic[j+1].d.SID != d.SID
			ok := d.F && d.L && d.I && d.B == first && d.E == last && p.Marker == (j == len(pic)-1) &&
				d.PictureID == pic[0].d.PictureID && p.Timestamp == pic[0].Timestamp && d.TID == tid && d.U &&
				d.P == !key && d.D == (key && d.SID > 0) && d.V == (key && j == 0)
			if !ok {
				t.Fatalf("picture %d packet %d: SID %d TID %d B %v E %v P %v D %v V %v F %v marker %v", i, j, d.SID, d.TID,
					d.B, d.E, d.P, d.D, d.V, d.F, p.Marker)
			}
			if d.V && fmt.Sprint(d.Width, d.Height) != fmt.Sprint([]uint16{80, 160, 320}, []uint16{
				uint16(c.layers[0].height), 90, 180}) {
				t.Fatalf("scalability structure %v x %v", d.Width, d.Height)
			}
		}
		if sids := pic[len(pic)-1].d.SID; sids != 2 {
			t.Fatalf("picture %d ends in layer %d", i, sids)
		}
	}
	// a receiver of every layer; one an SFU serves the smallest, the marker
	// moved to its last packet and its numbers closed up; and one served it
	// as LiveKit does, the marker and the numbers left as they were (each
	// picture then ends where the next begins: the last one never does); and
	// ones served as an SFU that reads the dependency descriptor serves a
	// layer above the smallest: between key pictures that layer's frame alone
	for _, r := range []struct {
		top             uint8
		moves, alone    bool
		width, pictures int
	}{{2, true, false, 320, 30}, {0, true, false, 80, 30}, {0, false, false, 80, 29},
		{2, true, true, 320, 30}, {1, true, true, 160, 30}} {
		video := &series{}
		video.follow(true)
		in := &inbound{peer: "r1u2", kind: "video", clock: 90000, clip: c, video: video}
		in.reads(vp9Codec)
		at, seq := epoch.Add(time.Second), uint16(1)
		for _, pic := range pictures {
			for _, p := range pic {
				if !r.moves {
					seq = p.SequenceNumber
				}
				if p.d.SID > r.top || r.alone && p.d.P && p.d.SID < r.top {
					continue
				}
				h := p.Header
				h.SequenceNumber, h.Marker = seq, p.Marker || r.moves && p.d.E && p.d.SID == r.top
				seq++
				in.packet(&h, p.Payload, at)
			}
			at = at.Add(time.Second / 15)
		}
		got := video.take()
		if len(got) != r.pictures {
			t.Fatalf("%+v: %d pictures followed", r, len(got))
		}
		for k, e := range got {
			if e.code != k {
				t.Fatalf("%+v: picture %d has code %d", r, k, e.code)
			}
		}
		if s := in.sample(at); s["frameWidth"] != r.width {
			t.Errorf("%+v: sample %v", r, s)
		}
	}
}
