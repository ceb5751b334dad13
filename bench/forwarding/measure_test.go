package main

import (
	"os"
	"testing"
	"time"
)

func TestCPUSecondsOfThisProcess(t *testing.T) {
	a, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := b - a; d < 0.1 || d > 5 {
		t.Fatalf("300 ms of spinning counted as %.2f CPU s", d)
	}
}

func TestRTPPayloadSkipsHeaderAndExtension(t *testing.T) {
	pkt := []byte{0x91, 96, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9, 0xbe, 0xde, 0, 1, 1, 2, 3, 4, 'S', 'B'}
	if got := string(rtpPayload(pkt)); got != "SB" {
		t.Fatalf("payload %q", got)
	}
	if rtpPayload(pkt[:8]) != nil {
		t.Fatal("short packet has a payload")
	}
}

func TestPercentile(t *testing.T) {
	if got := pct([]uint32{1000, 2000, 3000, 4000, 5000}, 0.5); got != 3*time.Millisecond {
		t.Fatalf("median %v", got)
	}
	if pct(nil, 0.5) != 0 {
		t.Fatal("empty")
	}
}
