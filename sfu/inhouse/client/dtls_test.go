package client

import (
	"testing"
	"time"
)

// Chrome's first DTLS retransmission on a link: twice ICE's round trip,
// within 50 ms and 3 s; pion's would be a second on every link.
func TestDTLSTimeoutIsChromesForTheLinksRoundTrip(t *testing.T) {
	for rtt, want := range map[time.Duration]time.Duration{
		0:                       50 * time.Millisecond,
		20 * time.Millisecond:   50 * time.Millisecond,
		100 * time.Millisecond:  200 * time.Millisecond,
		2000 * time.Millisecond: 3 * time.Second,
	} {
		if got := DTLSTimeout(rtt); got != want {
			t.Errorf("DTLSTimeout(%v) = %v, want %v", rtt, got, want)
		}
	}
}
