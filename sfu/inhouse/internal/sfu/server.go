// Package sfu is the in-house selective forwarding unit: rooms in which every
// participant publishes audio and video over one PeerConnection and receives
// every other participant's tracks on the same connection.
package sfu

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/directrtp"
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
	MaxRooms        int   // rooms at once (default 1000)
	MaxPeers        int   // signalling connections at once (default 4096)
	MaxMessageBytes int64 // largest signalling message (default 1 MiB)
	// MessageRate is how many messages a second a connection may send on
	// average (default 20), MessageBurst how many at once (default 50),
	// answers to the server's outstanding offer aside.
	MessageRate  float64
	MessageBurst int
	// AllowOrigins lists the page origins allowed to open a session from a
	// browser: scheme://host:port, host:port, or a bare host for any port and
	// scheme; "*" allows every origin. Requests without an Origin header
	// (non-browser clients) and same-host ones are always allowed.
	AllowOrigins []string
	// ReplaceSessions lets a second join of a live user id take over its
	// session; by default it is refused.
	ReplaceSessions bool
	// DropVideoFrom names a user whose published video is received and
	// never forwarded: a deliberate fault, so that tests can check that
	// exactly the checks of that video fail.
	DropVideoFrom string

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
	if c.MaxRooms <= 0 {
		c.MaxRooms = 1000
	}
	if c.MaxPeers <= 0 {
		c.MaxPeers = 4096
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1 << 20
	}
	if c.MessageRate <= 0 {
		c.MessageRate = 20
	}
	if c.MessageBurst <= 0 {
		c.MessageBurst = 50
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
	cfg    Config
	api    *webrtc.API
	mux    ice.UDPMux
	direct *directrtp.Factory
	reader *directReader
	m      metrics

	mu    sync.Mutex
	rooms map[string]*room
	peers map[*peer]struct{}
	// upgrading counts connections admitted but not yet in peers, so that
	// a client answered 101 always holds one of MaxPeers' places.
	upgrading int
	closed    bool
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
	s.reader = newDirectReader(cfg.UDP, &s.m.directIn)
	s.mux = newMux(s.reader)
	s.direct = &directrtp.Factory{Sent: &s.m.directPackets}
	api, err := newAPI(&s.cfg, s.mux, s.direct)
	if err != nil {
		s.mux.Close()
		return nil, err
	}
	s.api = api
	return s, nil
}

// Handler serves the WebSocket signalling at / and /ws, Prometheus metrics
// at /metrics and a health check at /healthz. Metrics (and whatever Private
// wraps, such as pprof) answer only clients on loopback or private addresses.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Private(http.HandlerFunc(s.serveMetrics)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/ws", s.serveWS)
	mux.HandleFunc("/{$}", s.serveWS)
	return mux
}

// Private serves h only to clients on loopback, private or link-local
// addresses: the lab, a VPC, an operator's tunnel; everyone else gets 403.
func Private(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		if err != nil || ip == nil || !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast()) {
			http.Error(w, "forbidden: private addresses only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// originAllowed says whether a browser page at r's Origin may open a session.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, allowed := range s.cfg.AllowOrigins {
		if allowed == "*" || strings.EqualFold(allowed, u.Host) || strings.EqualFold(allowed, u.Hostname()) ||
			strings.EqualFold(allowed, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this is the in-house SFU's WebSocket signalling endpoint", http.StatusBadRequest)
		return
	}
	if !s.originAllowed(r) {
		s.m.refused[refusedOrigin].Add(1)
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	full := len(s.peers)+s.upgrading >= s.cfg.MaxPeers
	if !full {
		s.upgrading++
	}
	s.mu.Unlock()
	if full {
		s.m.refused[refusedPeers].Add(1)
		http.Error(w, "too many connections", http.StatusServiceUnavailable)
		return
	}
	upgrader := websocket.Upgrader{ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10,
		CheckOrigin: func(*http.Request) bool { return true }} // checked above
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.mu.Lock()
		s.upgrading--
		s.mu.Unlock()
		return
	}
	p := newPeer(s, conn)
	s.mu.Lock()
	s.upgrading--
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
	errRoomFull   = &signal.Error{Code: signal.CodeRoomFull, Message: "the room is full"}
	errTooMany    = &signal.Error{Code: signal.CodeRoomFull, Message: "no room for another room on this server"}
	errReplaced   = &signal.Error{Code: signal.CodeReplaced, Message: "the same user joined again"}
	errUserActive = &signal.Error{Code: signal.CodeUserActive, Message: "this user id has a live session in the room"}
)

// join enters p into a room. It returns the tracks p must subscribe to and
// the earlier session of the same user, which the caller closes.
func (s *Server) join(p *peer, roomID string, admitted func()) (tracks []*pubTrack, replaced *peer, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	if r == nil {
		if len(s.rooms) >= s.cfg.MaxRooms {
			return nil, nil, errTooMany
		}
		r = &room{id: roomID, peers: map[string]*peer{}}
		s.rooms[roomID] = r
	}
	replaced = r.peers[p.user]
	if replaced != nil && !s.cfg.ReplaceSessions {
		return nil, nil, errUserActive
	}
	if replaced == nil && len(r.peers) >= s.cfg.MaxRoomPeers {
		if len(r.peers) == 0 {
			delete(s.rooms, roomID)
		}
		return nil, nil, errRoomFull
	}
	r.peers[p.user] = p
	p.room = r
	admitted() // before any track published from now on can be offered to p
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
