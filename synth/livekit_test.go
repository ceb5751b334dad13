package main

import (
	"strings"
	"testing"

	"github.com/livekit/protocol/livekit"
	"github.com/pion/webrtc/v4"
)

// An answer with a media section that lost its mid (as LiveKit once sent)
// is taken with the mid of the offer's section in its place, and the
// participant can offer again; without it pion refuses every later offer.
func TestAnAnswerMissingAMidTakesTheOffersAndRenegotiationGoesOn(t *testing.T) {
	offerer, answerer := newPC(t), newPC(t)
	for _, k := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeAudio, webrtc.RTPCodecTypeVideo, webrtc.RTPCodecTypeVideo} {
		if _, err := offerer.AddTransceiverFromKind(k, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			t.Fatal(err)
		}
	}
	offer, err := offerer.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err = offerer.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	if err = answerer.SetRemoteDescription(offer); err != nil {
		t.Fatal(err)
	}
	answer, err := answerer.CreateAnswer(nil)
	if err != nil {
		t.Fatal(err)
	}
	// the last section's mid dropped, as in LiveKit's answer
	cut := strings.LastIndex(answer.SDP, "a=mid:2\r\n")
	if cut < 0 {
		t.Fatalf("no third section in the answer:\n%s", answer.SDP)
	}
	broken := answer.SDP[:cut] + answer.SDP[cut+len("a=mid:2\r\n"):]
	fixed := withMids(broken, offerer.PendingLocalDescription().SDP)
	if !strings.Contains(fixed, "a=mid:2\r\n") || strings.Count(fixed, "a=mid:") != 3 {
		t.Fatalf("the section was not named after the offer's:\n%s", fixed)
	}
	if withMids(answer.SDP, offer.SDP) != answer.SDP || withMids("not sdp", offer.SDP) != "not sdp" {
		t.Error("a whole answer, or one that does not parse, must be left as it is")
	}
	if err = offerer.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: fixed}); err != nil {
		t.Fatal(err)
	}
	if _, err = offerer.CreateOffer(nil); err != nil {
		t.Fatalf("offering again after the fixed answer: %v", err)
	}
}

func newPC(t *testing.T) *webrtc.PeerConnection {
	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc
}

// An answer to an offer since replaced, or to one already answered, is
// left as livekit-client leaves it: pion refuses either, which ended the
// session.
func TestAStaleOrRepeatedAnswerIsLeftAndTheSessionGoesOn(t *testing.T) {
	offerer, answerer := newPC(t), newPC(t)
	if _, err := offerer.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	offer, err := offerer.CreateOffer(nil)
	if err == nil {
		err = offerer.SetLocalDescription(offer)
	}
	if err == nil {
		err = answerer.SetRemoteDescription(offer)
	}
	answer, err2 := answerer.CreateAnswer(nil)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	s := &livekitSession{pc: offerer, names: map[string]string{}, named: make(chan struct{})}
	s.offers.Store(2) // the offer out is the second
	for _, c := range []struct {
		id      uint32
		applied bool
	}{{1, false}, {2, true}, {2, false}} {
		applied, err := s.answer(&livekit.SessionDescription{Type: "answer", Sdp: answer.SDP, Id: c.id})
		if err != nil || applied != c.applied {
			t.Fatalf("answer to offer %d: applied %v, %v; want applied %v", c.id, applied, err, c.applied)
		}
	}
	if offerer.SignalingState() != webrtc.SignalingStateStable {
		t.Fatalf("signalling state %s after the answer", offerer.SignalingState())
	}
	if err := offerer.SetRemoteDescription(answer); err == nil {
		t.Error("pion took a repeated answer: the guard would not be needed")
	}
}
