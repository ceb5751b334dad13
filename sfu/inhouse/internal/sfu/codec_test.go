package sfu

import (
	"testing"
	"time"

	"github.com/pion/webrtc/v4"
)

// Each video codec the SFU offers reaches subscribers: they start at a
// keyframe the SFU reads in that codec's payload, which it asks the publisher
// for when they join.
func TestEveryOfferedVideoCodecIsForwardedFromAKeyframe(t *testing.T) {
	t.Parallel() // mostly waiting on its clients: beside the others, each in a server of its own
	for _, codec := range []string{webrtc.MimeTypeVP8, webrtc.MimeTypeH264, webrtc.MimeTypeVP9, webrtc.MimeTypeAV1} {
		t.Run(codec, func(t *testing.T) {
			_, url := startServer(t, nil)
			alice := join(t, url, "1", "alice", clientOptions{codec: codec})
			defer alice.close()
			alice.publish()
			bob := join(t, url, "1", "bob", clientOptions{})
			defer bob.close()
			waitFor(t, "bob to receive alice's video", 10*time.Second, func() bool { return bob.received("alice", "video") >= 30 })
			bob.mu.Lock()
			defer bob.mu.Unlock()
			if bob.corrupt != 0 {
				t.Errorf("bob received %d packets with someone else's payload: %v", bob.corrupt, bob.corruptSeen)
			}
		})
	}
}
