package sfu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pion/rtp"

	"sfubench/sfu/inhouse/internal/rtpfwd"
)

// BenchmarkFanoutThroughPion forwards one 1 kB VP8 packet to the 6 other
// participants of a room of 7 through everything a real forward passes:
// rtpfwd, pion's RTCP-report interceptor, SRTP encryption, ICE, the UDP mux
// and udpbatch's sendmmsg, to real pion subscribers. allocs/op counts the
// whole process, the subscribers' SRTP decryption included.
func BenchmarkFanoutThroughPion(b *testing.B) {
	s, url := startServer(b, nil)
	pub := join(b, url, "1", "pub", clientOptions{})
	defer pub.close()
	var subs []*tc
	for i := range 6 {
		c := join(b, url, "1", fmt.Sprintf("sub%d", i), clientOptions{deaf: true})
		defer c.close()
		subs = append(subs, c)
	}
	pub.publish()
	var track *pubTrack
	waitFor(b, "the room to be wired", 15*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		track = nil
		for _, t := range s.rooms["1"].tracks {
			if t.owner.user == "pub" && t.video && t.fanout.Len() == len(subs) {
				track = t
			}
		}
		return track != nil && s.m.packetsOut.Load() > 100
	})
	close(pub.stop)
	time.Sleep(200 * time.Millisecond)

	raw, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SSRC: 1, Marker: true},
		Payload: payload("pub", 0, true, true, 1000)}).Marshal()
	conn := s.cfg.UDP
	seq := uint16(20000)
	sent0 := s.cfg.UDP.Stats.SentPackets.Load()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	b.SetBytes(int64(len(subs) * len(raw)))
	b.ResetTimer()
	for b.Loop() {
		p := rtpfwd.NewPacket()
		n := copy(p.Buf(), raw)
		binary.BigEndian.PutUint16(p.Buf()[2:], seq)
		binary.BigEndian.PutUint32(p.Buf()[4:], uint32(seq)*3000)
		seq++
		if err := p.Parse(n, rtpfwd.VP8); err != nil {
			b.Fatal(err)
		}
		track.sourceOf(0).history.Put(p)
		conn.Hold()
		if c := track.fanout.Forward(p); c.Sent != len(subs) {
			b.Fatalf("forwarded to %d of %d", c.Sent, len(subs))
		}
		conn.Release()
		p.Release()
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	// allocs/op rounds down; this is the exact figure.
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "mallocs/op")
	if sent := s.cfg.UDP.Stats.SentPackets.Load() - sent0; sent < uint64(b.N*len(subs)) {
		b.Fatalf("%d datagrams sent for %d forwards", sent, b.N*len(subs))
	}
	calls := s.cfg.UDP.Stats.SendCalls.Load()
	b.ReportMetric(float64(s.cfg.UDP.Stats.SentPackets.Load())/float64(calls), "datagrams/sendmmsg")
}
