package sfu

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
)

// layerSpan separates the layers' packet numbers: packet n of layer l
// carries l*layerSpan + n, so a receiver tells which layer it got.
const layerSpan = 1_000_000

// publishLayers sends the video's layers at 30 packets a second each (the
// smallest c.sending of them, all unless set), a keyframe every tenth, until
// stopped (audio as publish does not: the layers are what is looked at).
func (c *tc) publishLayers() {
	c.sending.Store(int32(len(c.layered)))
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(time.Second / 30)
		defer tick.Stop()
		var mid string
		var midID, ridID uint8
		for n := uint32(0); ; n++ {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			if midID == 0 || ridID == 0 || mid == "" {
				mid, midID, ridID = c.layerHeaders()
				continue
			}
			for l, track := range c.layered[:c.sending.Load()] {
				h := rtp.Header{Version: 2, Marker: true, SequenceNumber: uint16(n), Timestamp: n * 3000}
				_ = h.SetExtension(midID, []byte(mid))
				_ = h.SetExtension(ridID, []byte(track.RID()))
				_ = track.WriteRTP(&rtp.Packet{Header: h,
					Payload: payload(c.user, uint32(l)*layerSpan+n, true, n%10 == 0, 300*(l+1))})
			}
		}
	}()
}

// layerHeaders are what a layer's packets must name, once negotiated: the
// video's mid and the ids of the mid and rid header extensions (as a
// browser names them; pion's sender leaves it to the caller).
func (c *tc) layerHeaders() (mid string, midID, ridID uint8) {
	for _, tr := range c.pc.GetTransceivers() {
		if tr.Sender() == nil || tr.Sender().Track() != c.layered[0] {
			continue
		}
		for _, e := range tr.Sender().GetParameters().HeaderExtensions {
			switch e.URI {
			case sdp.SDESMidURI:
				midID = uint8(e.ID)
			case sdp.SDESRTPStreamIDURI:
				ridID = uint8(e.ID)
			}
		}
		return tr.Mid(), midID, ridID
	}
	return "", 0, 0
}

// layersSince are the layers of the packets from `from`'s video numbered
// from `after` on (per layer: the layer's own count).
func (c *tc) layersSince(from string, after uint32) map[uint32]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[uint32]int{}
	for num := range c.got[from+"/video"] {
		if num%layerSpan >= after {
			seen[num/layerSpan]++
		}
	}
	return seen
}

// newest is the highest per-layer packet count received of from's video.
func (c *tc) newest(from string) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint32
	for num := range c.got[from+"/video"] {
		n = max(n, num%layerSpan)
	}
	return n
}

// layeredRoom starts a server with alice publishing three layers and bob
// receiving, once bob gets alice's full layer: by default the largest she
// sends (her smaller ones may come first, for a moment, as the largest there
// is so far).
func layeredRoom(t *testing.T) (*Server, *tc, *tc) {
	s, url := startServer(t, nil)
	alice := join(t, url, "1", "alice", clientOptions{layers: 3})
	alice.publishLayers()
	t.Cleanup(alice.close)
	bob := join(t, url, "1", "bob", clientOptions{})
	t.Cleanup(bob.close)
	waitFor(t, "bob to get alice's full layer", 15*time.Second, func() bool { return bob.layersSince("alice", 0)[2] >= 30 })
	return s, alice, bob
}

func TestSimulcastReceiversGetTheLayerTheyAskFor(t *testing.T) {
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
	_, alice, bob := layeredRoom(t)
	since := bob.newest("alice")
	time.Sleep(500 * time.Millisecond)
	if got := bob.layersSince("alice", since); len(got) != 1 || got[2] == 0 {
		t.Fatalf("bob got layers %v beside the largest", got)
	}
	for _, want := range []struct {
		rid   string
		layer uint32
	}{{"q", 0}, {"h", 1}, {"f", 2}} {
		if err := bob.sess.SetLayer("alice", want.rid); err != nil {
			t.Fatal(err)
		}
		// the switch lands at the layer's next keyframe (a third of a second); from then on that layer alone
		asked := bob.newest("alice")
		waitFor(t, "bob to get alice's "+want.rid+" layer", 10*time.Second, func() bool {
			return bob.layersSince("alice", asked+15)[want.layer] >= 30
		})
		if got := bob.layersSince("alice", asked+15); len(got) != 1 {
			t.Fatalf("after asking for %s, bob got layers %v", want.rid, got)
		}
	}
	// alice stops her largest layer, as a browser short of bandwidth does: bob, asking for it, is
	// served the largest she still sends, and the largest again once it is back
	for _, step := range []struct {
		sending int32
		layer   uint32
	}{{2, 1}, {3, 2}} {
		alice.sending.Store(step.sending)
		asked := bob.newest("alice")
		waitFor(t, fmt.Sprintf("bob to get layer %d of alice's %d", step.layer, step.sending), 10*time.Second, func() bool {
			return bob.layersSince("alice", asked+45)[step.layer] >= 30
		})
		if got := bob.layersSince("alice", asked+45); len(got) != 1 {
			t.Fatalf("with %d layers sent, bob got layers %v", step.sending, got)
		}
	}
	bob.mu.Lock()
	defer bob.mu.Unlock()
	if bob.corrupt != 0 {
		t.Fatalf("%d packets with another's payload: %s", bob.corrupt, strings.Join(bob.corruptSeen, "; "))
	}
}

// Bob's receiver reports say 40 % of alice's video is lost, for a few
// seconds: he is moved down to her smallest layer, a layer per report once
// the last move's reports are in. Then his reports are pion's own, clear:
// he is tried one layer up, then the largest.
func TestSimulcastReceiversAreMovedByTheLossTheyReport(t *testing.T) {
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
	s, _, bob := layeredRoom(t)

	bob.mu.Lock()
	ssrc := bob.ssrcs["alice/video"]
	bob.mu.Unlock()
	narrow := time.Now()
	for time.Since(narrow) < 2*reportLag+time.Second {
		_ = bob.pc.WriteRTCP([]rtcp.Packet{&rtcp.ReceiverReport{SSRC: 1,
			Reports: []rtcp.ReceptionReport{{SSRC: ssrc, FractionLost: 102}}}})
		time.Sleep(200 * time.Millisecond)
	}
	asked := bob.newest("alice")
	waitFor(t, "bob to get alice's smallest layer alone", 10*time.Second, func() bool {
		got := bob.layersSince("alice", asked+15)
		return got[0] >= 30 && len(got) == 1
	})
	if down := s.m.ceilingsDown.Load(); down != 2 {
		t.Fatalf("%d ceilings lowered, want 2 (full to half to quarter)", down)
	}
	asked = bob.newest("alice")
	waitFor(t, "bob to get alice's full layer again", 3*holdBase+5*time.Second, func() bool {
		return bob.layersSince("alice", asked)[2] >= 30
	})
	if up := s.m.ceilingsUp.Load(); up != 2 {
		t.Fatalf("%d ceilings raised, want 2 (quarter to half to full)", up)
	}
}
