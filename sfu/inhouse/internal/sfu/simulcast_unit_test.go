package sfu

import (
	"strings"
	"testing"
)

func TestAnOfferAsksForLayersOnceInThePublishSection(t *testing.T) {
	offer := "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=recvonly\r\n" +
		"m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\na=recvonly\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:10\r\n"
	got := withLayers(offer, "1", 3)
	want := "a=mid:1\r\na=rid:q recv\r\na=rid:h recv\r\na=rid:f recv\r\na=simulcast:recv q;h;f\r\na=recvonly"
	if !strings.Contains(got, want) || strings.Count(got, "a=simulcast:") != 1 {
		t.Fatalf("layers not asked for once in section 1:\n%s", got)
	}
	if again := withLayers(got, "1", 3); again != got {
		t.Fatalf("asked twice:\n%s", again)
	}
	if withLayers(offer, "1", 1) != offer || withLayers(offer, "7", 3) != offer {
		t.Fatal("an offer without layers or without the section changed")
	}
	// a later section's layers are not this one's
	other := withLayers(offer, "10", 2)
	if withLayers(other, "1", 2) == other {
		t.Fatal("section 1 taken as asking for layers by section 10's")
	}
}
