package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
)

// mediasoupDriver speaks sfu-configs/mediasoup/server.js's protocol, as its
// page does through mediasoup-client: one send transport carrying a
// producer per track and one receive transport carrying a consumer per
// remote track, each a PeerConnection. mediasoup speaks ORTC, not SDP, so,
// as mediasoup-client does, the driver writes the server's side of each
// description from the transport's ICE and DTLS parameters and the
// producers' and consumers' RTP parameters.
type mediasoupDriver struct{}

func (mediasoupDriver) Join(ctx context.Context, p Participant) (Session, error) {
	url, err := server(p)
	if err != nil {
		return nil, err
	}
	s := &msSession{p: p, pending: map[int]chan msReply{}, done: make(chan struct{}), produced: make(chan msProducerInfo, 256)}
	fail := func(err error) (Session, error) {
		s.Close()
		return nil, err
	}
	if s.ws, _, err = websocket.DefaultDialer.DialContext(ctx, url, nil); err != nil {
		return fail(fmt.Errorf("connecting to %s: %w", url, err))
	}
	s.wg.Go(s.loop)
	var joined struct {
		Caps struct {
			Codecs           []msCodec     `json:"codecs"`
			HeaderExtensions []msExtension `json:"headerExtensions"`
		} `json:"routerRtpCapabilities"`
		Producers []msProducerInfo `json:"producers"`
	}
	if err := s.request(ctx, "join", map[string]string{"room": p.Room, "user": p.User}, &joined); err != nil {
		return fail(err)
	}
	// What this client can receive: the router's Opus and the run's video
	// codec (no RTX: pion answers NACKs by resending the packet itself) with
	// the feedback pion's stack gives, and the extensions above.
	for _, c := range joined.Caps.Codecs {
		if m := strings.ToLower(c.MimeType); m == "audio/opus" || m == "video/"+p.Codec {
			c.RtcpFeedback = []msFeedback{{Type: "transport-cc"}}
			if c.Kind == "video" {
				c.RtcpFeedback = append(c.RtcpFeedback, msFeedback{Type: "nack"}, msFeedback{Type: "nack", Parameter: "pli"})
			}
			s.caps.Codecs = append(s.caps.Codecs, c)
		}
	}
	for _, e := range joined.Caps.HeaderExtensions {
		if mediasoupExtensions[e.URI] {
			s.caps.HeaderExtensions = append(s.caps.HeaderExtensions, e)
		}
	}
	if len(p.Tracks) > 0 { // a viewer, as mediasoup-client's, makes no send transport
		if err := s.publish(ctx); err != nil {
			return fail(fmt.Errorf("publishing: %w", err))
		}
	}
	if err := s.request(ctx, "createTransport", map[string]string{"direction": "recv"}, &s.recvT); err != nil {
		return fail(err)
	}
	if s.recv, err = p.NewPeerConnection(); err != nil {
		return fail(err)
	}
	s.recv.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		if user := t.StreamID(); user != msProbator {
			p.OnTrack(user, t)
		} else {
			p.OnTrack("", t) // no participant's: read and dropped
		}
	})
	for _, pr := range joined.Producers {
		if err := s.consume(ctx, pr); err != nil {
			return fail(fmt.Errorf("consuming %s: %w", pr.User, err))
		}
	}
	s.wg.Go(s.consumeLoop)
	return s, nil
}

type msReply struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error string          `json:"error"`
}

type msSession struct {
	p          Participant
	ws         *websocket.Conn
	wmu        sync.Mutex
	mu         sync.Mutex
	next       int
	pending    map[int]chan msReply
	send, recv *webrtc.PeerConnection
	recvT      msTransport
	nmu        sync.Mutex // one renegotiation of the receive connection at a time
	recvDone   bool       // the receive transport is connected
	probing    bool       // the probation stream has its section
	consumers  []*msConsumer
	caps       struct {
		Codecs           []msCodec     `json:"codecs"`
		HeaderExtensions []msExtension `json:"headerExtensions"`
	}
	produced chan msProducerInfo
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func (s *msSession) request(ctx context.Context, method string, data, out any) error {
	s.mu.Lock()
	s.next++
	id := s.next
	ch := make(chan msReply, 1)
	s.pending[id] = ch
	s.mu.Unlock()
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "data": data})
	if err != nil {
		return err
	}
	s.wmu.Lock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	err = s.ws.WriteMessage(websocket.TextMessage, b)
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	select {
	case r := <-ch:
		if !r.OK {
			return fmt.Errorf("%s: %s", method, r.Error)
		}
		if out != nil {
			return json.Unmarshal(r.Data, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	case <-s.done:
		return fmt.Errorf("%s: the signalling connection closed", method)
	}
}

// loop hands replies to their requests and new producers to consumeLoop.
func (s *msSession) loop() {
	defer s.Close()
	for {
		var m struct {
			ID           int             `json:"id"`
			Notification string          `json:"notification"`
			Data         json.RawMessage `json:"data"`
			msReply
		}
		if err := s.ws.ReadJSON(&m); err != nil {
			return
		}
		switch {
		case m.Notification == "newProducer":
			var pr msProducerInfo
			if json.Unmarshal(m.Data, &pr) == nil {
				select {
				case s.produced <- pr:
				case <-s.done:
					return
				}
			}
		case m.Notification == "consumerClosed":
			var c struct {
				ConsumerID string `json:"consumerId"`
			}
			if json.Unmarshal(m.Data, &c) == nil {
				go s.closeConsumer(c.ConsumerID) // it may need a reply this loop reads
			}
		case m.ID != 0:
			s.mu.Lock()
			ch := s.pending[m.ID]
			delete(s.pending, m.ID)
			s.mu.Unlock()
			if ch != nil {
				m.msReply.Data = m.Data
				ch <- m.msReply
			}
		}
	}
}

func (s *msSession) consumeLoop() {
	for {
		select {
		case <-s.done:
			return
		case pr := <-s.produced:
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := s.consume(ctx, pr)
			cancel()
			if err != nil {
				s.Close()
				return
			}
		}
	}
}

// publish sends the tracks: the participant offers, the driver answers for
// mediasoup, then produces each track with the RTP parameters the offer
// settled on.
func (s *msSession) publish(ctx context.Context) error {
	var t msTransport
	if err := s.request(ctx, "createTransport", map[string]string{"direction": "send"}, &t); err != nil {
		return err
	}
	var err error
	if s.send, err = s.p.NewPeerConnection(); err != nil {
		return err
	}
	var senders []*webrtc.RTPTransceiver
	for _, track := range s.p.Tracks {
		tr, err := s.send.AddTransceiverFromTrack(track, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
		if err == nil {
			err = s.p.addLayers(tr.Sender())
		}
		if err != nil {
			return fmt.Errorf("adding %s track: %w", track.Kind(), err)
		}
		s.p.Publishing(tr.Sender())
		senders = append(senders, tr)
	}
	offer, err := s.send.CreateOffer(nil)
	if err != nil {
		return err
	}
	local, err := gathered(ctx, s.send, offer)
	if err != nil {
		return err
	}
	var parsed sdp.SessionDescription
	if err := parsed.UnmarshalString(local); err != nil {
		return err
	}
	fp, err := dtlsFingerprint(&parsed)
	if err != nil {
		return err
	}
	if err := s.request(ctx, "connectTransport", map[string]any{"transportId": t.ID, "dtlsParameters": map[string]any{
		"role": "client", "fingerprints": []map[string]string{fp}}}, nil); err != nil {
		return err
	}
	var answer strings.Builder
	sessionHead(&answer, &t, parsed.MediaDescriptions)
	var params []msRTPParameters
	for _, m := range parsed.MediaDescriptions {
		rp, err := s.producerParameters(m)
		if err != nil {
			return err
		}
		params = append(params, rp)
		media(&answer, &t, rp, m.MediaName.Media, "recvonly", "passive", nil)
		acceptLayers(&answer, m)
	}
	if err := s.send.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.String()}); err != nil {
		return fmt.Errorf("the answer for mediasoup: %w", err)
	}
	for i, tr := range senders {
		enc := tr.Sender().GetParameters().Encodings
		if len(enc) == 0 {
			return errors.New("a sender without an SSRC")
		}
		// Each layer by its SSRC, smallest first, as mediasoup orders them.
		rp := params[i]
		rp.Encodings = rp.Encodings[:0]
		for _, e := range enc {
			rp.Encodings = append(rp.Encodings, msEncoding{SSRC: uint32(e.SSRC)})
		}
		if n := s.p.SpatialLayers; n > 0 && tr.Kind() == webrtc.RTPCodecTypeVideo {
			rp.Encodings[0].ScalabilityMode = fmt.Sprintf("L%dT3_KEY", n) // as mediasoup-client's page sends it
		}
		rp.Rtcp.Cname, rp.Rtcp.ReducedSize = s.p.User, true
		if err := s.request(ctx, "produce", map[string]any{"transportId": t.ID, "kind": tr.Kind().String(),
			"rtpParameters": rp}, nil); err != nil {
			return err
		}
	}
	return nil
}

// consume asks for one remote producer and renegotiates the receive
// connection with every consumer so far in the server's offer.
func (s *msSession) consume(ctx context.Context, pr msProducerInfo) error {
	c := &msConsumer{user: pr.User}
	req := map[string]any{"transportId": s.recvT.ID, "producerId": pr.ProducerID, "rtpCapabilities": s.caps}
	if i, ok := s.p.receiveIndex(); ok {
		req["preferredLayers"] = map[string]int{"spatialLayer": i} // as the page asks (server.js)
	}
	if err := s.request(ctx, "consume", req, c); err != nil {
		return err
	}
	s.mu.Lock()
	if c.RtpParameters.Mid == "" {
		c.RtpParameters.Mid = strconv.Itoa(len(s.consumers))
	}
	s.consumers = append(s.consumers, c)
	if c.Kind == "video" && !s.probing && len(c.RtpParameters.Codecs) > 0 {
		s.consumers = append(s.consumers, probator(c))
		s.probing = true
	}
	s.mu.Unlock()
	if err := s.renegotiate(ctx); err != nil {
		return err
	}
	return s.request(ctx, "resume", map[string]string{"consumerId": c.ID}, nil)
}

func (s *msSession) closeConsumer(id string) {
	s.mu.Lock()
	for _, c := range s.consumers {
		if c.ID == id {
			c.closed = true
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.renegotiate(ctx)
}

func (s *msSession) renegotiate(ctx context.Context) error {
	s.nmu.Lock()
	defer s.nmu.Unlock()
	s.mu.Lock()
	consumers := append([]*msConsumer(nil), s.consumers...)
	s.mu.Unlock()
	if len(consumers) == 0 {
		return nil
	}
	var offer strings.Builder
	var mids []*sdp.MediaDescription
	for _, c := range consumers {
		mids = append(mids, &sdp.MediaDescription{Attributes: []sdp.Attribute{{Key: "mid", Value: c.RtpParameters.Mid}}})
	}
	sessionHead(&offer, &s.recvT, mids)
	for _, c := range consumers {
		direction := "sendonly"
		if c.closed {
			direction = "inactive"
		}
		media(&offer, &s.recvT, c.RtpParameters, c.Kind, direction, "actpass", c)
	}
	if err := s.recv.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer.String()}); err != nil {
		return fmt.Errorf("mediasoup's offer: %w", err)
	}
	answer, err := s.recv.CreateAnswer(nil)
	if err != nil {
		return err
	}
	if err := s.recv.SetLocalDescription(answer); err != nil {
		return err
	}
	if s.recvDone {
		return nil
	}
	var parsed sdp.SessionDescription
	if err := parsed.UnmarshalString(s.recv.LocalDescription().SDP); err != nil {
		return err
	}
	fp, err := dtlsFingerprint(&parsed)
	if err != nil {
		return err
	}
	role := "client" // pion answers actpass as the DTLS client unless told otherwise
	if setup := setupOf(&parsed); setup == "passive" {
		role = "server"
	}
	if err := s.request(ctx, "connectTransport", map[string]any{"transportId": s.recvT.ID, "dtlsParameters": map[string]any{
		"role": role, "fingerprints": []map[string]string{fp}}}, nil); err != nil {
		return err
	}
	s.recvDone = true
	return nil
}

func (s *msSession) Close() error {
	s.once.Do(func() {
		close(s.done)
		if s.ws != nil {
			_ = s.ws.Close()
		}
		if s.send != nil {
			_ = s.send.Close()
		}
		if s.recv != nil {
			_ = s.recv.Close()
		}
	})
	return nil
}
