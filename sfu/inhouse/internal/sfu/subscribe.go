package sfu

import (
	"errors"
	"fmt"
	"time"

	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/internal/rtpfwd"
	"sfubench/sfu/inhouse/internal/signal"
)

// A peer's subscriptions (peer.go): each remote track it receives has a
// sending transceiver, reused once an offer has made it inactive, and every
// change goes out in the server's next offer, one offer at a time.

// freed is a transceiver an ended subscription left: reused once the offer
// that makes it inactive is answered.
type freed struct {
	tr    *webrtc.RTPTransceiver
	video bool
	after uint64 // the offer that makes it inactive
}

func kindIndex(video bool) int {
	if video {
		return 1
	}
	return 0
}

func (p *peer) subscribe(t *pubTrack) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.subscribeLocked(t) {
		p.negotiateLocked()
	}
}

func (p *peer) subscribeLocked(t *pubTrack) bool {
	if p.closed || p.subs[t] != nil || t.gone.Load() {
		return false
	}
	s := &subTrack{pub: t}
	s.dt = rtpfwd.NewDownTrack(t.video)
	k := kindIndex(t.video)
	if n := len(p.free[k]); n > 0 {
		tr := p.free[k][n-1]
		p.free[k] = p.free[k][:n-1]
		sender, err := p.s.api.NewRTPSender(s, p.pc.SCTP().Transport())
		if err == nil {
			err = tr.SetSender(sender, s)
		}
		if err != nil {
			if sender != nil {
				_ = sender.Stop()
			}
			return false
		}
		s.sender, s.tr = sender, tr
	} else {
		tr, err := p.pc.AddTransceiverFromTrack(s, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
		if err != nil {
			return false
		}
		s.sender, s.tr = tr.Sender(), tr
	}
	p.subs[t] = s
	t.fanout.Add(s.dt)
	go s.readRTCP()
	return true
}

// setLayer asks for one layer of the video of a participant whose video p
// receives.
func (p *peer) setLayer(m signal.Layer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, s := range p.subs {
		if t.video && t.owner.user == m.User {
			s.dt.SetLayer(uint8(signal.LayerIndex(m.Layer)))
			return nil
		}
	}
	return &signal.Error{Code: signal.CodeBadState, Message: fmt.Sprintf("%q's video is not received here", m.User)}
}

// unsubscribe ends the subscriptions to tracks, all in one offer.
func (p *peer) unsubscribe(tracks []*pubTrack) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for _, t := range tracks {
		s := p.subs[t]
		if p.closed || s == nil {
			continue
		}
		delete(p.subs, t)
		t.fanout.Remove(s.dt)
		if err := p.pc.RemoveTrack(s.sender); err != nil {
			// The connection is closing; stopping the sender ends its
			// RTCP reader all the same.
			_ = s.sender.Stop()
			continue
		}
		p.freeing = append(p.freeing, freed{tr: s.tr, video: t.video, after: p.offerSeq + 1})
		changed = true
	}
	if changed {
		p.negotiateLocked()
	}
}

// negotiateLocked sends a new offer, or, while one is out, remembers to send
// one after its answer: only the server offers, one offer at a time.
func (p *peer) negotiateLocked() {
	if p.closed {
		return
	}
	if p.awaiting != 0 {
		p.pending = true
		return
	}
	p.pending = false
	fail := func(err error) {
		go p.close(closeError, &signal.Error{Code: signal.CodeInternal, Message: "offer failed: " + err.Error()})
	}
	offer, err := p.pc.CreateOffer(nil)
	if err != nil {
		fail(err)
		return
	}
	gathered := webrtc.GatheringCompletePromise(p.pc)
	if err := p.pc.SetLocalDescription(offer); err != nil {
		fail(err)
		return
	}
	// One host candidate on the shared socket: gathering takes no time.
	select {
	case <-gathered:
	case <-time.After(5 * time.Second):
		fail(errors.New("ICE gathering did not complete"))
		return
	}
	p.offerSeq++
	seq := p.offerSeq
	p.awaiting = seq
	sdp := withLayers(p.pc.LocalDescription().SDP, p.pubVideo.Mid(), p.layers)
	p.send(signal.Encode(signal.Offer{Type: "offer", Seq: seq, SDP: sdp}))
	if p.answerTimer != nil {
		p.answerTimer.Stop()
	}
	p.answerTimer = time.AfterFunc(p.s.cfg.AnswerTimeout, func() {
		p.mu.Lock()
		late := p.awaiting == seq
		p.mu.Unlock()
		if late {
			p.close(closeTimeout, &signal.Error{Code: signal.CodeTimeout,
				Message: fmt.Sprintf("no answer to offer %d within %v", seq, p.s.cfg.AnswerTimeout)})
		}
	})
}

func (p *peer) handleAnswer(a signal.Answer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if a.Seq != p.awaiting {
		return &signal.Error{Code: signal.CodeBadState,
			Message: fmt.Sprintf("answer %d does not match the outstanding offer (%d)", a.Seq, p.awaiting)}
	}
	if err := p.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: a.SDP}); err != nil {
		return &signal.Error{Code: signal.CodeBadRequest, Message: "answer rejected: " + err.Error()}
	}
	p.awaiting = 0
	p.answerTimer.Stop()
	kept := p.freeing[:0]
	for _, f := range p.freeing {
		if f.after <= a.Seq {
			k := kindIndex(f.video)
			p.free[k] = append(p.free[k], f.tr)
		} else {
			kept = append(kept, f)
		}
	}
	clear(p.freeing[len(kept):])
	p.freeing = kept
	if p.pending {
		p.negotiateLocked()
	}
	return nil
}
