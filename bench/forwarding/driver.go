package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

// Participant is one synthetic participant as a Driver sees it. Everything
// SFU-specific (signalling, how many PeerConnections, how remote tracks are
// named) stays inside the driver.
type Participant struct {
	Room, User string
	// NewPeerConnection makes every PeerConnection the driver needs, all
	// with the benchmark's codecs, interceptors and network settings.
	NewPeerConnection func() (*webrtc.PeerConnection, error)
	// Tracks are published: one Opus-sized and one VP8-sized stream.
	Tracks []webrtc.TrackLocal
	// Publishing must be called with the RTPSender of each published
	// track, so the benchmark reads its RTCP (answering PLIs, and letting
	// pion's NACK responder work).
	Publishing func(*webrtc.RTPSender)
	// OnTrack must be called for each received track with the user id of
	// the participant who published it.
	OnTrack func(remoteUser string, t *webrtc.TrackRemote)
}

// Session is a joined participant. Close leaves and closes every
// PeerConnection the driver opened, which ends the benchmark's readers.
type Session interface {
	Close() error
}

// Driver joins participants to rooms of one SFU.
type Driver interface {
	Join(ctx context.Context, url string, p Participant) (Session, error)
}

var drivers = map[string]Driver{
	"inhouse": inhouseDriver{},
	"janus":   janusDriver{},
}

func driverNames() string {
	var names []string
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// inhouseDriver speaks sfu/inhouse's WebSocket protocol: one PeerConnection
// per participant, server-made offers, remote tracks in streams named after
// their publisher.
type inhouseDriver struct{}

func (inhouseDriver) Join(ctx context.Context, url string, p Participant) (Session, error) {
	pc, err := p.NewPeerConnection()
	if err != nil {
		return nil, err
	}
	for _, t := range p.Tracks {
		s, err := pc.AddTrack(t)
		if err != nil {
			pc.Close()
			return nil, fmt.Errorf("adding %s track: %w", t.Kind(), err)
		}
		p.Publishing(s)
	}
	s, err := client.Join(ctx, client.Options{
		URL: url, Room: p.Room, User: p.User, PC: pc,
		OnTrack: func(user string, t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { p.OnTrack(user, t) },
	})
	if err != nil {
		pc.Close()
		return nil, err
	}
	return s, nil
}
