package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

// Participant is one synthetic participant as a Driver sees it. Everything
// SFU-specific (signalling, how many PeerConnections, how remote tracks are
// named) stays inside the driver.
type Participant struct {
	Room, User string
	// Params are the adapter's client parameters (sfu.toml [client_params],
	// rendered), the same the client page gets: "server" is the signalling
	// URL.
	Params map[string]string
	// Width and Height are the published video's, for drivers whose
	// signalling announces them, and Codec its codec as sfu.toml names it
	// ("vp8", "h264", "vp9", "av1"), for those whose room names one.
	Width, Height int
	Codec         string
	// NewPeerConnection makes every PeerConnection the driver needs, all
	// with the same codecs, interceptors and network settings.
	NewPeerConnection func() (*webrtc.PeerConnection, error)
	// Tracks are published: Opus audio and video in Codec; none for a
	// viewer, which joins to receive alone.
	Tracks []webrtc.TrackLocal
	// Encodings are the video's further simulcast layers, larger pictures
	// than its track's (whose rid names the smallest), for a driver that
	// publishes layers (layeredDrivers) to add to the video's sender
	// (AddEncoding); none when the video is one stream.
	Encodings []webrtc.TrackLocal
	// SpatialLayers is, where the video is one VP9 SVC stream, how many
	// spatial layers it has (L<n>T3_KEY); 0 otherwise.
	SpatialLayers int
	// Publishing must be called with the RTPSender of each published track,
	// once its encodings are added, so its RTCP is read (PLIs, receiver
	// reports, and NACKs for the connection's Sender to answer).
	Publishing func(*webrtc.RTPSender)
	// ReceiveLayer is the simulcast layer to ask the SFU for of every
	// received video, through its own API: "smallest", "half", or
	// "largest" (what SFUs forward unasked).
	ReceiveLayer string
	// OnTrack must be called for each received track with the user id of
	// the participant who published it ("" when it is no participant's).
	OnTrack func(remoteUser string, t *webrtc.TrackRemote)
	// Ended, when the driver knows why a joined session ended without
	// Close (the SFU asked it to leave, its signalling broke), says so.
	Ended func(error)
}

// Session is a joined participant. Close leaves and closes every
// PeerConnection the driver opened, which ends the readers.
type Session interface {
	Close() error
}

// Driver joins participants to rooms of one SFU.
type Driver interface {
	Join(ctx context.Context, p Participant) (Session, error)
}

// drivers are chosen by the adapter's sfu.toml ([synthetic] driver).
var drivers = map[string]Driver{
	"inhouse":   inhouseDriver{},
	"janus":     janusDriver{},
	"livekit":   livekitDriver{},
	"mediasoup": mediasoupDriver{},
	"medooze":   medoozeDriver{},
}

// receiveIndex is the layer to ask for of every received video as its index
// among the layers published (simulcast or spatial), smallest first (every
// publisher of a run sends as many as this one), or false to leave the
// choice to the SFU.
func (p Participant) receiveIndex() (int, bool) {
	layers := max(1+len(p.Encodings), p.SpatialLayers)
	switch {
	case layers < 2 || p.ReceiveLayer == "" || p.ReceiveLayer == "largest":
		return 0, false
	case p.ReceiveLayer == "smallest":
		return 0, true
	default: // half
		return layers - 2, true
	}
}

// addLayers adds the further layers (Encodings) to the video's sender, once
// its track is added; other senders it leaves alone.
func (p Participant) addLayers(s *webrtc.RTPSender) error {
	if s.Track() == nil || s.Track().Kind() != webrtc.RTPCodecTypeVideo {
		return nil
	}
	for _, e := range p.Encodings {
		if err := s.AddEncoding(e); err != nil {
			return err
		}
	}
	return nil
}

// layeredDrivers publish Participant.Encodings; the others the video's
// track alone.
var layeredDrivers = map[string]bool{"inhouse": true, "janus": true, "livekit": true, "mediasoup": true}

func driverNames() string {
	var names []string
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func server(p Participant) (string, error) {
	if url := p.Params["server"]; url != "" {
		return url, nil
	}
	return "", errors.New(`no "server" client parameter`)
}

// gathered sets d as the local description and waits for every candidate,
// so the far side gets a complete description and needs no trickle.
func gathered(ctx context.Context, pc *webrtc.PeerConnection, d webrtc.SessionDescription) (string, error) {
	done := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(d); err != nil {
		return "", err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return pc.LocalDescription().SDP, nil
}

// inhouseDriver speaks sfu/inhouse's WebSocket protocol: one PeerConnection
// per participant, server-made offers, remote tracks in streams named after
// their publisher.
type inhouseDriver struct{}

func (inhouseDriver) Join(ctx context.Context, p Participant) (Session, error) {
	url, err := server(p)
	if err != nil {
		return nil, err
	}
	pc, err := p.NewPeerConnection()
	if err != nil {
		return nil, err
	}
	for _, t := range p.Tracks {
		s, err := pc.AddTrack(t)
		if err == nil {
			err = p.addLayers(s)
		}
		if err != nil {
			pc.Close()
			return nil, fmt.Errorf("adding %s track: %w", t.Kind(), err)
		}
		p.Publishing(s)
	}
	var layer string // the SFU's choice
	if i, ok := p.receiveIndex(); ok {
		layer = client.Rids[i]
	}
	s, err := client.Join(ctx, client.Options{
		URL: url, Room: p.Room, User: p.User, PC: pc, Layers: 1 + len(p.Encodings), Layer: layer,
		OnTrack: func(user string, t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { p.OnTrack(user, t) },
	})
	if err != nil {
		pc.Close()
		return nil, err
	}
	return s, nil
}

// medoozeDriver speaks sfu-configs/medooze/server.js's protocol, as its
// client page does: one PeerConnection; the participant offers its tracks
// with the join, then answers every offer the server makes as others come
// and go; each remote participant's tracks arrive in a stream named after
// them.
type medoozeDriver struct{}

type medoozeMsg struct {
	Type    string `json:"type"`
	Room    string `json:"room,omitempty"`
	User    string `json:"user,omitempty"`
	SDP     string `json:"sdp,omitempty"`
	Message string `json:"message,omitempty"`
}

type medoozeSession struct {
	ws   *websocket.Conn
	pc   *webrtc.PeerConnection
	wmu  sync.Mutex
	done chan struct{}
	once sync.Once
}

func (medoozeDriver) Join(ctx context.Context, p Participant) (Session, error) {
	url, err := server(p)
	if err != nil {
		return nil, err
	}
	pc, err := p.NewPeerConnection()
	if err != nil {
		return nil, err
	}
	s := &medoozeSession{pc: pc, done: make(chan struct{})}
	fail := func(err error) (Session, error) {
		s.Close()
		return nil, err
	}
	pc.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { p.OnTrack(t.StreamID(), t) })
	for _, t := range p.Tracks {
		tr, err := pc.AddTransceiverFromTrack(t, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
		if err != nil {
			return fail(fmt.Errorf("adding %s track: %w", t.Kind(), err))
		}
		p.Publishing(tr.Sender())
	}
	if len(p.Tracks) == 0 { // a viewer, as its page: a section of each kind to receive (the server copies them)
		for _, kind := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeAudio, webrtc.RTPCodecTypeVideo} {
			if _, err := pc.AddTransceiverFromKind(kind,
				webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
				return fail(err)
			}
		}
	}
	if s.ws, _, err = websocket.DefaultDialer.DialContext(ctx, url, nil); err != nil {
		return fail(err)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return fail(err)
	}
	sdp, err := gathered(ctx, pc, offer)
	if err != nil {
		return fail(err)
	}
	if err := s.send(medoozeMsg{Type: "join", Room: p.Room, User: p.User, SDP: sdp}); err != nil {
		return fail(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.ws.SetReadDeadline(dl)
	}
	var m medoozeMsg
	if err := s.ws.ReadJSON(&m); err != nil {
		return fail(err)
	}
	if m.Type != "answer" {
		return fail(fmt.Errorf("join refused: %s %s", m.Type, m.Message))
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: m.SDP}); err != nil {
		return fail(err)
	}
	_ = s.ws.SetReadDeadline(time.Time{})
	go s.loop()
	return s, nil
}

func (s *medoozeSession) send(m medoozeMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return s.ws.WriteMessage(websocket.TextMessage, b)
}

// loop answers the server's offers until the connection ends.
func (s *medoozeSession) loop() {
	defer s.Close()
	for {
		var m medoozeMsg
		if err := s.ws.ReadJSON(&m); err != nil || m.Type == "error" {
			return
		}
		if m.Type != "offer" {
			continue
		}
		if err := s.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: m.SDP}); err != nil {
			return
		}
		answer, err := s.pc.CreateAnswer(nil)
		if err != nil || s.pc.SetLocalDescription(answer) != nil {
			return
		}
		if s.send(medoozeMsg{Type: "answer", SDP: s.pc.LocalDescription().SDP}) != nil {
			return
		}
	}
}

func (s *medoozeSession) Close() error {
	s.once.Do(func() {
		if s.ws != nil {
			_ = s.ws.Close()
		}
		_ = s.pc.Close()
		close(s.done)
	})
	return nil
}
