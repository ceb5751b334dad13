package sfu

import (
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/directrtp"
	"sfubench/sfu/inhouse/srtpkeys"
)

// The direct write path (directrtp): once a subscriber's connection is up,
// its RTP is encrypted with its own context and queued on the shared socket
// for the selected candidate's address, skipping pion's SRTP session,
// demultiplexer, ICE connection and mux (profile of 70 participants,
// `make bench`: they cost more than the encryption).

// startDirect takes pc's media off pion's paths, both ways (w and in), once
// its connection is up.
func (s *Server) startDirect(pc *webrtc.PeerConnection, w *directrtp.Writer, in *directIn) error {
	if w.Started() {
		return nil
	}
	dt := pc.SCTP().Transport()
	local, remote, err := srtpkeys.Contexts(dt)
	if err != nil {
		return err
	}
	pair, err := dt.ICETransport().GetSelectedCandidatePair()
	if err != nil {
		return err
	}
	_, to, err := directrtp.SelectedAddrs(pair)
	if err != nil {
		return err
	}
	dt.ICETransport().OnSelectedCandidatePairChange(func(p *webrtc.ICECandidatePair) {
		if _, a, err := directrtp.SelectedAddrs(p); err == nil {
			w.Redirect(a)
			s.reader.attach(in, a)
		}
	})
	w.Start(s.cfg.UDP, local, to)
	in.start(s.reader, remote, to)
	return nil
}
