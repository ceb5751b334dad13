package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
)

// A LiveKit participant's offers and the server's answers (livekit.go): the
// participant stays the offerer, one offer out at a time, and offers again
// when the server asks for more receiving sections.

// offer makes an offer with every candidate in it, so the server needs no
// trickle from us.
func (s *livekitSession) offer(ctx context.Context) (*livekit.SessionDescription, error) {
	o, err := s.pc.CreateOffer(nil)
	if err != nil {
		return nil, err
	}
	sdp, err := gathered(ctx, s.pc, o)
	if err != nil {
		return nil, err
	}
	id := s.offers.Add(1)
	mids := map[string]string{}
	for _, tr := range s.pc.GetTransceivers() {
		if tr.Sender() != nil && tr.Sender().Track() != nil && tr.Mid() != "" {
			mids[tr.Mid()] = tr.Sender().Track().ID()
		}
	}
	return &livekit.SessionDescription{Type: "offer", Sdp: sdp, Id: id, MidToTrackId: mids}, nil
}

// stale says why an answer is not the one the offer out waits for, or ""
// when it is. LiveKit may answer an offer twice, or answer one since
// replaced: applied, either fails in pion and ends the session (a
// participant lost in a CI run, answering nobody); livekit-client ignores
// both, and so do we.
func (s *livekitSession) stale(d *livekit.SessionDescription) string {
	if latest := s.offers.Load(); d.Id > 0 && d.Id != latest {
		return fmt.Sprintf("offer %d's, not the latest's (%d)", d.Id, latest)
	}
	if s.pc.SignalingState() != webrtc.SignalingStateHaveLocalOffer {
		return fmt.Sprintf("offer %d's, already answered", d.Id)
	}
	return ""
}

// answer applies the server's answer; false when it is stale, and left.
func (s *livekitSession) answer(d *livekit.SessionDescription) (bool, error) {
	if why := s.stale(d); why != "" {
		fmt.Fprintf(os.Stderr, "synth: %s (livekit): an answer ignored: %s\n", s.p.User, why)
		return false, nil
	}
	answer := d.Sdp
	if offer := s.pc.PendingLocalDescription(); offer != nil {
		answer = withMids(answer, offer.SDP)
	}
	if err := s.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		return false, fmt.Errorf("the server's answer: %w", err)
	}
	s.mu.Lock()
	pending := s.pending
	s.pending, s.remote = nil, true
	s.notify() // the answer may name a track's stream
	s.mu.Unlock()
	for _, c := range pending {
		_ = s.pc.AddICECandidate(c)
	}
	return true, nil
}

// withMids names each media section of an answer that has no mid after the
// offer's section in its place: an answer keeps the offer's sections in
// order (RFC 3264 6). LiveKit once answered a renegotiation with a section
// without one (one participant in a ramp of 84): pion took the answer, then
// refused every later offer, the participant's session ended, and what
// followed flooded the SFU's signalling (1.1 MB/s at 14 participants). An
// answer that does not parse is left as it is, for pion to refuse.
func withMids(answer, offer string) string {
	var a, o sdp.SessionDescription
	if a.UnmarshalString(answer) != nil || o.UnmarshalString(offer) != nil {
		return answer
	}
	named := false
	for i, m := range a.MediaDescriptions {
		if _, ok := m.Attribute(sdp.AttrKeyMID); ok || i >= len(o.MediaDescriptions) {
			continue
		}
		if mid, ok := o.MediaDescriptions[i].Attribute(sdp.AttrKeyMID); ok {
			m.WithValueAttribute(sdp.AttrKeyMID, mid)
			named = true
		}
	}
	if !named {
		return answer
	}
	b, err := a.Marshal()
	if err != nil {
		return answer
	}
	return string(b)
}

// ask wakes the negotiator, which offers if one is owed; offers go out one
// at a time.
func (s *livekitSession) ask() {
	select {
	case s.renegotiate <- struct{}{}:
	default:
	}
}

func (s *livekitSession) negotiate() {
	for {
		select {
		case <-s.done:
			return
		case <-s.renegotiate:
		}
		if s.pc.SignalingState() != webrtc.SignalingStateStable {
			continue // the answer on its way asks again
		}
		if !s.owed.Swap(false) {
			continue // nothing asked since the last offer: another would only be answered, and again
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		o, err := s.offer(ctx)
		cancel()
		if err == nil {
			err = s.send(&livekit.SignalRequest{Message: &livekit.SignalRequest_Offer{Offer: o}})
		}
		if err != nil {
			s.ended(fmt.Errorf("renegotiating: %w", err))
			return
		}
	}
}
