// Package client joins the in-house SFU from Go with a pion PeerConnection.
// The SFU's tests and sfubench's forwarding benchmark use it in place of a
// browser; it speaks the same protocol as sfu-configs/inhouse/client.html.
package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/internal/signal"
)

// Rids name the simulcast layers Options.Layers sends, smallest first.
var Rids = signal.Rids

// Options describe one participant.
type Options struct {
	URL  string // ws://host:port/
	Room string
	User string
	// PC already holds the tracks to publish (added with AddTrack, so they
	// take the offer's recvonly m-lines).
	PC *webrtc.PeerConnection
	// OnTrack is called for each received track with the user it comes from.
	OnTrack func(user string, t *webrtc.TrackRemote, r *webrtc.RTPReceiver)
	// Layers is how many simulcast layers the video sender sends (its track
	// and encodings with the rids "q", "h", "f", smallest first; an API
	// with APIOptions.Simulcast; the packets naming their mid and rid in
	// header extensions, which pion's sender leaves to the caller); 0 or 1
	// is one stream.
	Layers int
	// Layer, if set, is the layer (a rid of Rids) asked for of every
	// publisher's video as it arrives; unset leaves the choice to the SFU.
	Layer string
}

// Session is a joined participant.
type Session struct {
	ws   *websocket.Conn
	pc   *webrtc.PeerConnection
	wmu  sync.Mutex
	done chan struct{}
	err  error
	once sync.Once
}

type message struct {
	Type    string `json:"type"`
	Seq     uint64 `json:"seq,omitempty"`
	SDP     string `json:"sdp,omitempty"`
	Room    string `json:"room,omitempty"`
	User    string `json:"user,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Layers  int    `json:"layers,omitempty"`
	Layer   string `json:"layer,omitempty"`
}

// Join connects, joins and answers offers until Close or an error; it
// returns once the server confirmed the join.
func Join(ctx context.Context, o Options) (*Session, error) {
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, o.URL, nil)
	if err != nil {
		return nil, err
	}
	s := &Session{ws: ws, pc: o.PC, done: make(chan struct{})}
	o.PC.OnTrack(func(t *webrtc.TrackRemote, r *webrtc.RTPReceiver) {
		if o.Layer != "" && t.Kind() == webrtc.RTPCodecTypeVideo {
			_ = s.write(message{Type: "layer", User: t.StreamID(), Layer: o.Layer})
		}
		if o.OnTrack != nil {
			o.OnTrack(t.StreamID(), t, r)
		}
	})
	if err := s.write(message{Type: "join", Room: o.Room, User: o.User, Layers: o.Layers}); err != nil {
		ws.Close()
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = ws.SetReadDeadline(dl)
	}
	var m message
	if err := ws.ReadJSON(&m); err != nil {
		ws.Close()
		return nil, err
	}
	if m.Type != "joined" {
		ws.Close()
		return nil, fmt.Errorf("join refused: %s %s %s", m.Type, m.Code, m.Message)
	}
	_ = ws.SetReadDeadline(time.Time{})
	go s.loop()
	return s, nil
}

func (s *Session) write(m message) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return s.ws.WriteJSON(m)
}

func (s *Session) loop() {
	for {
		var m message
		if err := s.ws.ReadJSON(&m); err != nil {
			s.finish(err)
			return
		}
		switch m.Type {
		case "offer":
			if err := s.answer(m); err != nil {
				s.finish(err)
				return
			}
		case "error":
			s.finish(fmt.Errorf("server error %s: %s", m.Code, m.Message))
			return
		}
	}
}

func (s *Session) answer(m message) error {
	offer, err := s.keepStoppedTransceivers(withoutLayers(m.SDP))
	if err != nil {
		return err
	}
	if err := s.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return err
	}
	ans, err := s.pc.CreateAnswer(nil)
	if err != nil {
		return err
	}
	if err := s.pc.SetLocalDescription(ans); err != nil {
		return err
	}
	// The server is ICE-lite: it learns this side's address from the
	// connectivity checks, so no candidates need to be sent.
	return s.write(message{Type: "answer", Seq: m.Seq, SDP: s.pc.LocalDescription().SDP})
}

// withoutLayers takes out of an offer the layers it asks for: pion's answerer
// would echo them as layers it receives, beside those its sender sends
// (which it writes in the answer by itself).
func withoutLayers(offer string) string {
	lines := strings.SplitAfter(offer, "\r\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, "a=rid:") && !strings.HasPrefix(l, "a=simulcast:") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// SetLayer asks for one layer ("q", "h" or "f") of user's video.
func (s *Session) SetLayer(user, rid string) error {
	return s.write(message{Type: "layer", User: user, Layer: rid})
}

// keepStoppedTransceivers works around pion's answerer, which stops a
// transceiver again on every offer that has it inactive, and so kills the
// receiver it prepared for the m-line's reuse by the next subscription. An
// m-line that is already inactive here is presented as recvonly, which pion
// answers as inactive without stopping anything. The real offer and this
// answer stay consistent.
func (s *Session) keepStoppedTransceivers(offer string) (string, error) {
	inactive := map[string]bool{}
	for _, t := range s.pc.GetTransceivers() {
		if t.Mid() != "" && t.Direction() == webrtc.RTPTransceiverDirectionInactive {
			inactive[t.Mid()] = true
		}
	}
	if len(inactive) == 0 {
		return offer, nil
	}
	var d sdp.SessionDescription
	if err := d.UnmarshalString(offer); err != nil {
		return "", err
	}
	for _, md := range d.MediaDescriptions {
		mid, _ := md.Attribute(sdp.AttrKeyMID)
		if !inactive[mid] {
			continue
		}
		for i, a := range md.Attributes {
			if a.Key == sdp.AttrKeyInactive {
				md.Attributes[i] = sdp.NewPropertyAttribute(sdp.AttrKeyRecvOnly)
			}
		}
	}
	b, err := d.Marshal()
	return string(b), err
}

func (s *Session) finish(err error) {
	s.once.Do(func() {
		s.err = err
		s.ws.Close()
		close(s.done)
	})
}

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err tells why the session ended.
func (s *Session) Err() error {
	<-s.done
	return s.err
}

var errClosed = errors.New("client: closed")

// Close leaves the room and closes the PeerConnection.
func (s *Session) Close() error {
	_ = s.write(message{Type: "leave"})
	s.finish(errClosed)
	return s.pc.Close()
}
