package recvfb

import (
	"slices"
	"testing"
	"time"

	"github.com/pion/rtcp"
)

const clock = 90000

// feed gives st the packets numbered from first on, n of them, 10 ms apart
// (900 ticks), from t0 on; the ones drop says are lost. It returns the time
// after the last.
func feed(st *Stream, first uint16, n int, t0 time.Time, drop func(seq uint16) bool) time.Time {
	at := t0
	for i := range n {
		seq := first + uint16(i)
		at = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if drop == nil || !drop(seq) {
			st.Packet(seq, 1000+uint32(i)*900, at)
		}
	}
	return at
}

// sent collects what s sends at now, one slice per write.
func sent(s *Streams, now time.Time) [][]rtcp.Packet {
	var out [][]rtcp.Packet
	s.Send(now, func(p []rtcp.Packet) error {
		out = append(out, slices.Clone(p))
		return nil
	})
	return out
}

func reports(writes [][]rtcp.Packet) []rtcp.ReceptionReport {
	var out []rtcp.ReceptionReport
	for _, w := range writes {
		for _, p := range w {
			if rr, ok := p.(*rtcp.ReceiverReport); ok {
				out = append(out, rr.Reports...)
			}
		}
	}
	return out
}

func nacked(writes [][]rtcp.Packet) []uint16 {
	var out []uint16
	for _, w := range writes {
		for _, p := range w {
			if n, ok := p.(*rtcp.TransportLayerNack); ok {
				for _, pair := range n.Nacks {
					out = append(out, pair.PacketList()...)
				}
			}
		}
	}
	return out
}

func TestAReportCountsTheLossesSinceTheLastAcrossAWrap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(t0)
	st := s.Add(7, clock, false)
	// 65500 to 65599 (the last 64 past the wrap), every packet ending in 5 lost
	end := feed(st, 65500, 100, t0, func(seq uint16) bool { return seq%10 == 5 })
	if end.Before(t0.Add(ReportInterval)) {
		end = t0.Add(ReportInterval)
	}
	got := reports(sent(s, end))
	if len(got) != 1 {
		t.Fatalf("%d reports, want 1", len(got))
	}
	r := got[0]
	if r.SSRC != 7 || r.LastSequenceNumber != 1<<16|63 || r.TotalLost != 10 || r.FractionLost != 10*256/100 {
		t.Errorf("report %+v: want the highest 1<<16|63, 10 lost, fraction %d", r, 10*256/100)
	}
	if r.Jitter != 0 {
		t.Errorf("jitter %d of packets that arrived as they were timed", r.Jitter)
	}
	// the next second: nothing lost, the total stays
	end = feed(st, 64, 50, end.Add(10*time.Millisecond), nil)
	got = reports(sent(s, end.Add(ReportInterval)))
	if len(got) != 1 || got[0].FractionLost != 0 || got[0].TotalLost != 10 || got[0].LastSequenceNumber != 1<<16|113 {
		t.Errorf("second report %+v: want nothing new lost, 10 in all, the highest 1<<16|113", got)
	}
	// nothing is due before the next second
	if w := sent(s, end.Add(ReportInterval+10*time.Millisecond)); len(w) != 0 {
		t.Errorf("sent %v between reports", w)
	}
}

func TestAReportGivesBackTheLatestSenderReportAndTheDelaySince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(t0)
	feed(s.Add(7, clock, false), 0, 10, t0, nil)
	s.SenderReport(&rtcp.SenderReport{SSRC: 8, NTPTime: 0x1111_2222_3333_4444}, t0) // another stream's
	if got := reports(sent(s, t0.Add(ReportInterval))); len(got) != 1 || got[0].LastSenderReport != 0 || got[0].Delay != 0 {
		t.Errorf("reports %+v: want no sender report given back", got)
	}
	s.SenderReport(&rtcp.SenderReport{SSRC: 7, NTPTime: 0x1111_2222_3333_4444}, t0.Add(1500*time.Millisecond))
	got := reports(sent(s, t0.Add(2*ReportInterval)))
	if len(got) != 1 || got[0].LastSenderReport != 0x2222_3333 || got[0].Delay != 65536/2 {
		t.Errorf("reports %+v: want the sender report's middle 0x22223333, half a second (32768) since", got)
	}
}

func TestJitterFollowsArrivalsAgainstTimestampsAcrossATimestampWrap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(t0)
	st := s.Add(7, clock, false)
	ts := uint32(1<<32 - 900*100) // wraps after 100 packets
	for i := range 400 {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if i%2 == 1 {
			at = at.Add(time.Millisecond) // every other packet 1 ms late: 90 ticks each way
		}
		st.Packet(uint16(i), ts, at)
		ts += 900
	}
	got := reports(sent(s, t0.Add(4*time.Second)))
	if len(got) != 1 || got[0].Jitter < 89 || got[0].Jitter > 90 {
		t.Errorf("reports %+v: want a jitter of 90 ticks", got)
	}
}

func TestALostPacketIsAskedForUntilItArrivesAndTenTimesAtMost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(t0)
	st := s.Add(9, clock, true)
	feed(st, 100, 50, t0, func(seq uint16) bool { return seq == 110 || seq == 120 || seq == 121 })
	now := t0.Add(NACKInterval)
	if got := nacked(sent(s, now)); !slices.Equal(got, []uint16{110, 120, 121}) {
		t.Fatalf("asked for %v, want 110, 120 and 121", got)
	}
	st.Recovered(120) // its retransmission
	asked := 1
	for range 12 {
		now = now.Add(NACKInterval)
		got := nacked(sent(s, now))
		if len(got) == 0 {
			break
		}
		if !slices.Equal(got, []uint16{110, 121}) {
			t.Fatalf("asked for %v, want 110 and 121 (120 arrived)", got)
		}
		asked++
	}
	if asked != MaxNACKs {
		t.Errorf("a packet lost for good was asked for %d times, want %d", asked, MaxNACKs)
	}
	// the recovered packet still counts as lost in the reports, as the network lost it; a report
	// with nothing new since the last adds nothing
	for _, at := range []time.Duration{2 * ReportInterval, 3 * ReportInterval} {
		if got := reports(sent(s, t0.Add(at))); len(got) != 1 || got[0].TotalLost != 3 || got[0].FractionLost != 0 {
			t.Errorf("reports %+v: want the 3 packets the network lost", got)
		}
	}
	// a stream without NACK negotiated is never asked for
	quiet := s.Add(10, clock, false)
	feed(quiet, 0, 20, now, func(seq uint16) bool { return seq == 5 })
	if got := nacked(sent(s, now.Add(NACKInterval))); len(got) != 0 {
		t.Errorf("asked for %v of a stream without NACK", got)
	}
}

func TestAPacketTooLateForTheLogIsNotTakenForANewerOne(t *testing.T) {
	s := New(time.Unix(1000, 0))
	st := s.Add(9, clock, true)
	t0 := time.Unix(1000, 0)
	feed(st, 0, 600, t0, func(seq uint16) bool { return seq == 590 })
	st.Packet(590-logSize, 0, t0) // lands where 590 would
	if got := nacked(sent(s, t0.Add(NACKInterval))); !slices.Equal(got, []uint16{590}) {
		t.Errorf("asked for %v, want 590", got)
	}
}

func TestManyStreamsLeaveInCompoundPacketsUnderAnMTUAndARemovedOneStops(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(t0)
	for ssrc := range uint32(40) {
		feed(s.Add(ssrc, clock, true), 0, 3, t0, nil)
	}
	writes := sent(s, t0.Add(ReportInterval))
	if n := len(reports(writes)); n != 40 {
		t.Fatalf("%d reports of 40 streams", n)
	}
	for _, w := range writes {
		size := 0
		for _, p := range w {
			size += p.MarshalSize()
		}
		if size > maxCompound {
			t.Errorf("a compound packet of %d bytes", size)
		}
	}
	if len(writes) != 2 {
		t.Errorf("40 reports of 32 bytes in %d writes, want 2", len(writes))
	}
	for ssrc := range uint32(39) {
		s.Remove(ssrc)
	}
	if got := reports(sent(s, t0.Add(2*ReportInterval))); len(got) != 1 || got[0].SSRC != 39 {
		t.Errorf("after the others left, reports %+v: want stream 39's alone", got)
	}
}
