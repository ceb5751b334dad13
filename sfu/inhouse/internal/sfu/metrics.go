package sfu

import (
	"bufio"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
)

const (
	dropMalformed = iota // publisher packet that is not RTP
	dropWrite            // subscriber write refused (stream closing)
	numDrops
)

var dropNames = [numDrops]string{"malformed", "write_failed"}

const (
	refusedOrigin = iota // a browser page from an origin not allowed
	refusedPeers         // the connection limit reached
	numRefusals
)

var refusedNames = [numRefusals]string{"origin", "connections"}

type metrics struct {
	packetsIn, bytesIn   atomic.Uint64
	packetsOut, bytesOut atomic.Uint64
	directPackets        atomic.Uint64
	directIn             atomic.Uint64
	drops                [numDrops]atomic.Uint64
	nacks, nackMisses    atomic.Uint64
	retransmits          atomic.Uint64
	keyframeRequests     atomic.Uint64
	ceilingsDown         atomic.Uint64
	ceilingsUp           atomic.Uint64
	badMessages          atomic.Uint64
	closed               [numCloseReasons]atomic.Uint64
	refused              [numRefusals]atomic.Uint64
}

// Snapshot is the server's state in numbers, for tests and the metrics page.
type Snapshot struct {
	Rooms, Peers, Tracks, Subscriptions int
}

// Snapshot counts rooms, participants, published tracks and subscriptions.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n Snapshot
	n.Rooms = len(s.rooms)
	n.Peers = len(s.peers)
	for _, r := range s.rooms {
		n.Tracks += len(r.tracks)
		for _, t := range r.tracks {
			n.Subscriptions += t.fanout.Len()
		}
	}
	return n
}

func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	b := bufio.NewWriter(w)
	defer b.Flush()
	gauge := func(name, help string, v any) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %v\n", name, help, name, name, v)
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	labelled := func(name, help, label string, names []string, vals []atomic.Uint64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for i := range vals {
			fmt.Fprintf(b, "%s{%s=%q} %d\n", name, label, names[i], vals[i].Load())
		}
	}
	n := s.Snapshot()
	m := &s.m
	gauge("sfu_rooms", "Rooms with at least one participant.", n.Rooms)
	gauge("sfu_peers", "Connected signalling sessions.", n.Peers)
	gauge("sfu_published_tracks", "Tracks being published.", n.Tracks)
	gauge("sfu_subscriptions", "Published tracks times their subscribers.", n.Subscriptions)
	counter("sfu_rtp_packets_received_total", "RTP packets received from publishers.", m.packetsIn.Load())
	counter("sfu_rtp_bytes_received_total", "RTP bytes (header included) received from publishers.", m.bytesIn.Load())
	counter("sfu_rtp_packets_forwarded_total", "RTP packets written to subscribers.", m.packetsOut.Load())
	counter("sfu_rtp_bytes_forwarded_total", "RTP payload bytes written to subscribers.", m.bytesOut.Load())
	counter("sfu_rtp_packets_direct_total", "RTP packets to subscribers encrypted and queued by the SFU itself, not pion's write path.", m.directPackets.Load())
	counter("sfu_rtp_packets_direct_received_total", "RTP packets from publishers decrypted and forwarded by the SFU's own reader, not pion's read path.", m.directIn.Load())
	labelled("sfu_rtp_drops_total", "RTP packets dropped.", "reason", dropNames[:], m.drops[:])
	counter("sfu_nacks_received_total", "Packets subscribers asked to be resent.", m.nacks.Load())
	counter("sfu_nack_misses_total", "Asked-for packets no longer (or never) in the history.", m.nackMisses.Load())
	counter("sfu_retransmissions_total", "Packets resent to subscribers.", m.retransmits.Load())
	counter("sfu_keyframe_requests_total", "PLIs sent to publishers.", m.keyframeRequests.Load())
	counter("sfu_layer_ceilings_lowered_total", "Times a subscriber's link was taken as too narrow for its simulcast layer (its receiver reports' loss).", m.ceilingsDown.Load())
	counter("sfu_layer_ceilings_raised_total", "Times a subscriber was tried one simulcast layer up after its reports stayed clear.", m.ceilingsUp.Load())
	counter("sfu_signalling_errors_total", "Invalid signalling messages answered with an error.", m.badMessages.Load())
	labelled("sfu_sessions_closed_total", "Ended sessions by reason.", "reason", closeReasonNames[:], m.closed[:])
	labelled("sfu_connections_refused_total", "Signalling connections refused.", "reason", refusedNames[:], m.refused[:])
	u := &s.cfg.UDP.Stats
	counter("sfu_udp_send_calls_total", "sendmmsg system calls.", u.SendCalls.Load())
	counter("sfu_udp_sent_packets_total", "Datagrams sent.", u.SentPackets.Load())
	counter("sfu_udp_send_errors_total", "Datagrams the kernel refused.", u.SendErrors.Load())
	counter("sfu_udp_recv_calls_total", "recvmmsg system calls.", u.RecvCalls.Load())
	counter("sfu_udp_received_packets_total", "Datagrams received.", u.RecvPackets.Load())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gauge("go_goroutines", "Goroutines.", runtime.NumGoroutine())
	gauge("go_memstats_heap_inuse_bytes", "Heap bytes in use.", ms.HeapInuse)
}
