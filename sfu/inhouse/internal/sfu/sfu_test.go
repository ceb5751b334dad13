package sfu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
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
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
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
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
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

// Once connected, media takes the direct paths both ways: a publisher's
// packets are decrypted by the SFU's own reader, a subscriber's leave by the
// direct writer. The feedback both ways still counts what went by them:
// sender reports to subscribers, and to publishers receiver reports dated by
// theirs (an RTT for the sender), transport-wide congestion feedback and
// NACKs for what the network lost, whose retransmissions reach subscribers.
func TestMediaTakesTheDirectPaths(t *testing.T) {
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
	s, url := startServer(t, nil)
	var mu sync.Mutex
	lost := map[uint16]bool{}
	alice := join(t, url, "1", "alice", clientOptions{twcc: true, dropSent: func(h *rtp.Header) bool {
		if h.PayloadType != ptVP8 || h.SequenceNumber%10 != 5 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if lost[h.SequenceNumber] {
			return false
		}
		lost[h.SequenceNumber] = true
		return true
	}})
	alice.publish()
	defer alice.close()
	bob := join(t, url, "1", "bob", clientOptions{twcc: true})
	bob.publish()
	defer bob.close()
	everyoneReceivesEveryone(t, []*tc{alice, bob}, 100)
	waitFor(t, "a sender report of alice's video to bob, dated receiver reports and congestion feedback to alice",
		5*time.Second, func() bool {
			bob.mu.Lock()
			defer bob.mu.Unlock()
			return bob.reported["alice/video"] >= 50 && alice.dated.Load() >= 2 && alice.feedback.Load() >= 10
		})
	if taken, in := s.m.directIn.Load(), s.m.packetsIn.Load(); taken < in*9/10 {
		t.Errorf("%d of %d packets from publishers read by the direct path", taken, in)
	}
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

	// every packet alice's network lost was asked for and reached bob
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	dropped := len(lost)
	mu.Unlock()
	bob.mu.Lock()
	seen := bob.got["alice/video"]
	var first, last uint32 = 1 << 31, 0
	for n := range seen {
		first, last = min(first, n), max(last, n)
	}
	missing := 0
	for n := first; n+10 < last; n++ {
		if n%10 == 5 && !seen[n] {
			missing++
		}
	}
	bob.mu.Unlock()
	if dropped < 5 || alice.nacked.Load() < int64(dropped)-2 {
		t.Errorf("alice's network lost %d packets, the SFU asked for %d", dropped, alice.nacked.Load())
	}
	if missing != 0 {
		t.Errorf("%d of the packets alice's network lost never reached bob", missing)
	}
}

// Congestion feedback covers a publisher's packets from its first on: Chrome
// probes its bandwidth as media starts, and a probe without feedback leaves
// its estimate to climb slowly, with the top simulcast layer off meanwhile.
func TestCongestionFeedbackBeginsAtTheFirstPacket(t *testing.T) {
	_, url := startServer(t, nil)
	alice := join(t, url, "1", "alice", clientOptions{twcc: true})
	defer alice.close()
	// what pion numbers before its connection is up, it drops
	waitFor(t, "alice connected", 5*time.Second, func() bool {
		return alice.pc.ConnectionState() == webrtc.PeerConnectionStateConnected
	})
	alice.publish()
	waitFor(t, "congestion feedback to alice", 5*time.Second, func() bool { return alice.feedback.Load() >= 5 })
	if from := alice.fedFrom.Load() - 1; from != 0 {
		t.Errorf("feedback began at alice's packet %d, not at her first (0)", from)
	}
}

// A packet lost for good is asked for 10 times at most, as a browser asks:
// an SFU that asked on would draw retransmissions of all it ever lost.
func TestALostPacketIsAskedForTenTimesAtMost(t *testing.T) {
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
	_, url := startServer(t, nil)
	// alice's network loses packet 40 and every retransmission
	alice := join(t, url, "1", "alice", clientOptions{dropSent: func(h *rtp.Header) bool {
		return h.PayloadType == ptVP8 && h.SequenceNumber == 40 || h.PayloadType == ptRTX
	}})
	alice.publish()
	defer alice.close()
	bob := join(t, url, "1", "bob", clientOptions{})
	defer bob.close()
	waitFor(t, "bob to get 100 video packets", 15*time.Second, func() bool { return bob.received("alice", "video") >= 100 })
	waitFor(t, "the lost packet to be asked for", 5*time.Second, func() bool {
		_, ok := alice.nackedSeq.Load(uint16(40))
		return ok
	})
	time.Sleep(2 * time.Second) // 20 rounds of the generator
	count, _ := alice.nackedSeq.Load(uint16(40))
	if n := count.(*atomic.Int64).Load(); n > 10 {
		t.Errorf("a packet lost for good was asked for %d times", n)
	}
}
