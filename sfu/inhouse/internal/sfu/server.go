// Package sfu is the in-house selective forwarding unit: rooms in which every
// participant publishes audio and video over one PeerConnection and receives
// every other participant's tracks on the same connection.
package sfu

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/internal/signal"
	"sfubench/sfu/inhouse/internal/udpbatch"
)

// Config is the server's configuration; zero durations and limits take the
// defaults below.
type Config struct {
	// UDP is the one socket all media and ICE use.
	UDP *udpbatch.Conn
	// Announce, if set, is the IP put in the host candidate instead of the
	// socket's (for a server behind 1:1 NAT).
	Announce string

	MaxRoomPeers    int   // participants per room (default 64)
	MaxMessageBytes int64 // largest signalling message (default 1 MiB)

	JoinTimeout    time.Duration // WebSocket open without a join (default 10 s)
	AnswerTimeout  time.Duration // offer without an answer (default 15 s)
	ConnectTimeout time.Duration // join until ICE+DTLS connected (default 20 s)
	PingInterval   time.Duration // WebSocket pings (default 10 s)
	PongTimeout    time.Duration // silence after which the client is dead (default 30 s)

	ICEDisconnectedTimeout time.Duration // default 5 s
	ICEFailedTimeout       time.Duration // after disconnected; then the peer is closed (default 10 s)
	ICEKeepalive           time.Duration // default 2 s

	Log *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.MaxRoomPeers <= 0 {
		c.MaxRoomPeers = 64
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1 << 20
	}
	def(&c.JoinTimeout, 10*time.Second)
	def(&c.AnswerTimeout, 15*time.Second)
	def(&c.ConnectTimeout, 20*time.Second)
	def(&c.PingInterval, 10*time.Second)
	def(&c.PongTimeout, 30*time.Second)
	def(&c.ICEDisconnectedTimeout, 5*time.Second)
	def(&c.ICEFailedTimeout, 10*time.Second)
	def(&c.ICEKeepalive, 2*time.Second)
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Server holds the rooms.
type Server struct {
	cfg Config
	api *webrtc.API
	mux ice.UDPMux
	m   metrics

	mu     sync.Mutex
	rooms  map[string]*room
	peers  map[*peer]struct{}
	closed bool
}

type room struct {
	id     string
	peers  map[string]*peer
	tracks []*pubTrack
}

// New starts a server on cfg.UDP.
func New(cfg Config) (*Server, error) {
	if cfg.UDP == nil {
		return nil, errors.New("sfu: no UDP socket")
	}
	cfg.setDefaults()
	s := &Server{cfg: cfg, rooms: map[string]*room{}, peers: map[*peer]struct{}{}}
	s.mux = newMux(&s.cfg)
	api, err := newAPI(&s.cfg, s.mux)
	if err != nil {
		s.mux.Close()
		return nil, err
	}
	s.api = api
	return s, nil
}

// Handler serves the WebSocket signalling at / and /ws, Prometheus metrics
// at /metrics and a health check at /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", s.serveMetrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/ws", s.serveWS)
	mux.HandleFunc("/{$}", s.serveWS)
	return mux
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  16 << 10,
	WriteBufferSize: 16 << 10,
	// Client pages are served by the benchmark's own web server, on
	// another origin than the SFU.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this is the in-house SFU's WebSocket signalling endpoint", http.StatusBadRequest)
		return
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	p := newPeer(s, conn)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.peers[p] = struct{}{}
	s.mu.Unlock()
	p.serve()
}

// Close ends every session and frees the socket.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	peers := make([]*peer, 0, len(s.peers))
	for p := range s.peers {
		peers = append(peers, p)
	}
	s.mu.Unlock()
	for _, p := range peers {
		p.close(closeShutdown, nil)
	}
	for _, p := range peers {
		<-p.done
	}
	s.mux.Close()
}

var (
	errRoomFull = &signal.Error{Code: signal.CodeRoomFull, Message: "the room is full"}
	errReplaced = &signal.Error{Code: signal.CodeReplaced, Message: "the same user joined again"}
)

// join enters p into a room. It returns the tracks p must subscribe to and
// the earlier session of the same user, which the caller closes.
func (s *Server) join(p *peer, roomID string) (tracks []*pubTrack, replaced *peer, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	if r == nil {
		r = &room{id: roomID, peers: map[string]*peer{}}
		s.rooms[roomID] = r
	}
	replaced = r.peers[p.user]
	if replaced == nil && len(r.peers) >= s.cfg.MaxRoomPeers {
		if len(r.peers) == 0 {
			delete(s.rooms, roomID)
		}
		return nil, nil, errRoomFull
	}
	r.peers[p.user] = p
	p.room = r
	for _, t := range r.tracks {
		if t.owner != replaced {
			tracks = append(tracks, t)
		}
	}
	return tracks, replaced, nil
}

// publish adds t to its owner's room and returns who must subscribe, or
// false if the owner has left.
func (s *Server) publish(t *pubTrack) ([]*peer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := t.owner.room
	if r == nil || r.peers[t.owner.user] != t.owner {
		return nil, false
	}
	r.tracks = append(r.tracks, t)
	var subs []*peer
	for _, q := range r.peers {
		if q != t.owner {
			subs = append(subs, q)
		}
	}
	return subs, true
}

// leave takes p out of its room and returns p's tracks with the peers that
// were subscribed to them.
func (s *Server) leave(p *peer) (tracks []*pubTrack, others []*peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.peers, p)
	r := p.room
	if r == nil {
		return nil, nil
	}
	if r.peers[p.user] == p {
		delete(r.peers, p.user)
	}
	kept := r.tracks[:0]
	for _, t := range r.tracks {
		if t.owner == p {
			t.gone.Store(true)
			tracks = append(tracks, t)
		} else {
			kept = append(kept, t)
		}
	}
	clear(r.tracks[len(kept):])
	r.tracks = kept
	for _, q := range r.peers {
		others = append(others, q)
	}
	if len(r.peers) == 0 {
		delete(s.rooms, r.id)
	}
	return tracks, others
}
