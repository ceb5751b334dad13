package sfu

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pion/rtp"
)

func everyoneReceivesEveryone(t *testing.T, clients []*tc, min int) {
	t.Helper()
	for _, c := range clients {
		for _, o := range clients {
			if o == c {
				continue
			}
			for _, kind := range []string{"audio", "video"} {
				waitFor(t, fmt.Sprintf("%s to get %s's %s", c.user, o.user, kind), 15*time.Second,
					func() bool { return c.received(o.user, kind) >= min })
			}
		}
	}
}

func TestRoomForwardsEveryoneToEveryone(t *testing.T) {
	s, url := startServer(t, nil)
	var clients []*tc
	for _, u := range []string{"alice", "bob", "carol"} {
		c := join(t, url, "1", u, clientOptions{})
		c.publish()
		defer c.close()
		clients = append(clients, c)
	}
	everyoneReceivesEveryone(t, clients, 30)

	// carol leaves and dave joins: alice and bob renegotiate twice, and
	// dave's tracks take the m-lines carol's freed.
	clients[2].close()
	waitFor(t, "carol's tracks to go", 5*time.Second, func() bool { return s.Snapshot().Tracks == 4 })
	dave := join(t, url, "1", "dave", clientOptions{})
	dave.publish()
	defer dave.close()
	clients = []*tc{clients[0], clients[1], dave}
	everyoneReceivesEveryone(t, clients, 30)

	for _, c := range clients {
		c.mu.Lock()
		if c.corrupt != 0 {
			t.Errorf("%s received %d packets with someone else's payload", c.user, c.corrupt)
		}
		c.mu.Unlock()
	}
	if n := len(clients[0].pc.GetTransceivers()); n != 6 {
		t.Errorf("alice has %d transceivers, want 6 (2 sent, 2 per remote, carol's reused)", n)
	}
	if snap := s.Snapshot(); snap != (Snapshot{Rooms: 1, Peers: 3, Tracks: 6, Subscriptions: 12}) {
		t.Errorf("server state %+v", snap)
	}
	if s.m.keyframeRequests.Load() == 0 || dave.plis.Load() == 0 {
		t.Errorf("%d keyframe requests, %d reached dave: new subscribers must make the SFU ask publishers for keyframes",
			s.m.keyframeRequests.Load(), dave.plis.Load())
	}
}

func TestLostPacketsAreResentAsRTX(t *testing.T) {
	s, url := startServer(t, nil)
	alice := join(t, url, "1", "alice", clientOptions{})
	alice.publish()
	defer alice.close()
	// bob's network loses every 10th video packet once; his NACKs must be
	// served from the SFU's history, as RTX.
	var mu sync.Mutex
	dropped := map[uint16]bool{}
	bob := join(t, url, "1", "bob", clientOptions{drop: func(h *rtp.Header) bool {
		if h.PayloadType != 96 || h.SequenceNumber%10 != 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if dropped[h.SequenceNumber] {
			return false
		}
		dropped[h.SequenceNumber] = true
		return true
	}})
	defer bob.close()
	waitFor(t, "bob to get 100 video packets", 15*time.Second, func() bool { return bob.received("alice", "video") >= 100 })
	time.Sleep(300 * time.Millisecond)
	bob.mu.Lock()
	got := bob.got["alice/video"]
	var first, last uint32 = 1 << 31, 0
	for n := range got {
		first, last = min(first, n), max(last, n)
	}
	missing := 0
	for n := first; n < last-10; n++ {
		if !got[n] {
			missing++
		}
	}
	bob.mu.Unlock()
	mu.Lock()
	lost := len(dropped)
	mu.Unlock()
	if lost < 5 {
		t.Fatalf("only %d packets were dropped", lost)
	}
	if missing != 0 {
		t.Errorf("%d of %d dropped packets never arrived", missing, lost)
	}
	if r := s.m.retransmits.Load(); r < uint64(lost)-2 {
		t.Errorf("%d retransmissions for %d losses", r, lost)
	}
}

// Once connected, a subscriber's RTP leaves by the direct path, and the
// sender reports above it still count what it sent.
func TestForwardedMediaTakesTheDirectPath(t *testing.T) {
	s, url := startServer(t, nil)
	alice := join(t, url, "1", "alice", clientOptions{})
	alice.publish()
	defer alice.close()
	bob := join(t, url, "1", "bob", clientOptions{})
	bob.publish()
	defer bob.close()
	everyoneReceivesEveryone(t, []*tc{alice, bob}, 100)
	waitFor(t, "a sender report of alice's video to bob", 5*time.Second, func() bool {
		bob.mu.Lock()
		defer bob.mu.Unlock()
		return bob.reported["alice/video"] >= 50
	})
	direct := s.m.directPackets.Load()
	got := uint64(alice.received("bob", "audio") + alice.received("bob", "video") +
		bob.received("alice", "audio") + bob.received("alice", "video"))
	// What arrived before the connection was up came by pion's path.
	if direct < got*9/10 {
		t.Errorf("%d packets by the direct path of %d received", direct, got)
	}
	bob.mu.Lock()
	reported := bob.reported["alice/video"]
	bob.mu.Unlock()
	received := bob.received("alice", "video")
	// A report is at most a second old: 30 packets of video.
	if int(reported) > received+5 || int(reported) < received-60 {
		t.Errorf("sender report counts %d packets, bob received %d", reported, received)
	}
}
