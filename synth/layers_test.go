package main

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

func TestLayeredClipIsOneLoopInEveryLayer(t *testing.T) {
	c, err := loadClip(encodeLayers(t, 15, "80x48", "160x96"), encodeAudio(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.layers) != 2 || c.layers[0].width != 80 || c.layers[0].height != 48 || c.full().width != 160 {
		t.Fatalf("layers %dx%d and %dx%d, want 80x48 then 160x96", c.layers[0].width, c.layers[0].height,
			c.full().width, c.full().height)
	}
	for i, want := range map[int]int{0: 0, 1: 15, 15: 15, 16: 0} {
		if c.nextKey[i] != want {
			t.Errorf("next keyframe after %d is %d, want %d", i, c.nextKey[i], want)
		}
	}
	// Every frame of both layers names its loop position.
	if len(c.codes) != 60 {
		t.Errorf("%d frames recognisable by their bytes, want 60", len(c.codes))
	}
	for i, f := range c.layers[0].frames {
		if code, ok := c.codes[digest(f)]; !ok || code != i {
			t.Errorf("the small layer's frame %d reads as %d (%v)", i, code, ok)
		}
	}
}

// A keyframe asked for must come in every layer at once: layers encoded
// with keyframes apart are refused rather than published out of step.
func TestLayersWithKeyframesApartAreRefused(t *testing.T) {
	ivfs := append(encodeLayers(t, 15, "80x48"), encodeLayers(t, 10, "160x96")...)
	_, err := loadClip(ivfs, encodeAudio(t), false)
	if err == nil || !strings.Contains(err.Error(), "same positions") {
		t.Fatalf("loadClip: %v, want a refusal naming the keyframes' positions", err)
	}
}

// A layered publisher's video reaches a pion receiver (which, as an SFU's,
// needs each packet to name its section and layer) as one track per layer,
// each carrying its own layer's frames, recognised by their codes.
func TestLayeredPublisherSendsEachLayerUnderItsRid(t *testing.T) {
	c, err := loadClip(encodeLayers(t, 15, "80x48", "160x96"), encodeAudio(t), false)
	if err != nil {
		t.Fatal(err)
	}
	loopback := client.APIOptions{IPFilter: func(ip net.IP) bool { return ip.IsLoopback() }, Simulcast: true}
	pc, conns := fastConnection(t, loopback)
	midOf := func(s *webrtc.RTPSender) string {
		for _, tr := range pc.GetTransceivers() {
			if tr.Sender() == s {
				return tr.Mid()
			}
		}
		return ""
	}
	pub := newPublisher(c, 15, "pub", &series{}, midOf, conns.sentStream)
	s, err := pc.AddTrack(pub.tracks()[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := (Participant{Encodings: pub.encodings()}).addLayers(s); err != nil {
		t.Fatal(err)
	}
	pub.watch(s)

	sub := testSubscriber(t, loopback)
	var mu sync.Mutex
	received := map[string]*inbound{}
	sub.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		video := &series{}
		video.follow(true)
		in := newInbound("pub", tr, c, video)
		mu.Lock()
		received[tr.RID()] = in
		mu.Unlock()
		in.read(tr)
	})
	connect(t, pc, sub)
	for range 30 { // two seconds of video
		pub.sendVideo(0)
		time.Sleep(time.Second / 15)
	}
	for i, l := range pub.video {
		if l.out.direct.Load() == nil { // the receiver's checks below then say it arrived past pion's track
			t.Errorf("layer %d went through pion's track all along: its bound stream was not found", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != 2 {
		t.Fatalf("tracks received for rids %v, want q and h", keys(received))
	}
	for i, rid := range client.Rids[:2] {
		in := received[rid]
		if in == nil {
			t.Fatalf("no track for rid %q (got %v)", rid, keys(received))
		}
		s := in.sample(time.Now())
		l := c.layers[i]
		if s["frameWidth"] != l.width || s["frameHeight"] != l.height || s["framesReceived"].(uint64) < 20 {
			t.Errorf("rid %s: %v frames of %vx%v, want 20 or more of %dx%d", rid, s["framesReceived"],
				s["frameWidth"], s["frameHeight"], l.width, l.height)
		}
		recognised := 0
		for _, e := range in.video.take() {
			if e.code >= 0 {
				recognised++
			}
		}
		if recognised < 20 {
			t.Errorf("rid %s: %d frames recognised by their codes, want 20 or more", rid, recognised)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
