// Package recvfb is a receiver's RTCP feedback on the streams of one
// connection, as pion's NACK generator and receiver report interceptors
// give it (the stack a synthetic participant brings): every 100 ms a NACK
// for each stream with packets missing, each packet asked for 10 times at
// most (libwebrtc's kMaxNackRetries), and every second a receiver report of
// each stream (RFC 3550 6.4.2, jitter as A.8).
//
// The interceptors cost a packet a chain of readers, two locks, a clock
// read and a map of attributes; here it costs one uncontended lock and a
// few field updates. The owner feeds it each packet's sequence number,
// timestamp and arrival time, and sends what is due from its own timer.
package recvfb

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pion/rtcp"
)

const (
	// NACKInterval and ReportInterval are pion's defaults.
	NACKInterval   = 100 * time.Millisecond
	ReportInterval = time.Second
	// MaxNACKs is how often a lost packet is asked for at most: pion's
	// default never gives up, and an SFU short of CPU then drew
	// retransmissions of what it had dropped until they were most of its
	// input (674 Mbps in against 31 at 49 synthetic participants).
	MaxNACKs = 10
	// maxCompound bounds the bytes of one compound RTCP packet, which leaves
	// in one datagram: under an MTU with SRTCP's trailer and the headers.
	maxCompound = 1000
)

// Streams is the feedback on one connection's received streams.
type Streams struct {
	mu         sync.Mutex
	streams    map[uint32]*Stream
	order      []*Stream // the streams as added: what is due leaves in a stable order
	nackSSRC   uint32    // the sender SSRC of the connection's NACKs
	nextNACK   time.Time
	nextReport time.Time
	missing    []uint16
	due        []rtcp.Packet // Send's, which one goroutine calls at a time
}

// New starts the feedback's timers at now.
func New(now time.Time) *Streams {
	return &Streams{streams: map[uint32]*Stream{}, nackSSRC: rand.Uint32(),
		nextNACK: now.Add(NACKInterval), nextReport: now.Add(ReportInterval), missing: make([]uint16, logSize)}
}

// Add starts the feedback on stream ssrc in a Stream of its own; see Start.
func (s *Streams) Add(ssrc, clockRate uint32, nack bool) *Stream {
	st := new(Stream)
	s.Start(st, ssrc, clockRate, nack)
	return st
}

// Start starts the feedback on stream ssrc, whose timestamps count
// clockRate a second, in st, which a caller may keep within its own state
// of the stream (among thousands of streams a packet's is out of the cache:
// a pointer fewer to follow); nack says whether its losses are asked for
// (its codec negotiated "nack"). A stream started again starts over.
func (s *Streams) Start(st *Stream, ssrc, clockRate uint32, nack bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(ssrc)
	*st = Stream{mu: &s.mu, ssrc: ssrc, reporter: rand.Uint32(), clock: float64(clockRate), asks: nack}
	st.report.received, st.log.received = st.reportBits[:], st.logBits[:]
	if nack {
		st.asked = map[uint16]uint16{}
	}
	s.streams[ssrc] = st
	s.order = append(s.order, st)
}

// Remove ends the feedback on stream ssrc.
func (s *Streams) Remove(ssrc uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(ssrc)
}

func (s *Streams) remove(ssrc uint32) {
	st := s.streams[ssrc]
	if st == nil {
		return
	}
	delete(s.streams, ssrc)
	for i, o := range s.order {
		if o == st {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// SenderReport dates the reports of the stream sr is of: a receiver report
// gives back its time and the delay since it came (RFC 3550 6.4.1), which
// tells the sender the round trip.
func (s *Streams) SenderReport(sr *rtcp.SenderReport, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[sr.SSRC]; st != nil {
		st.report.lastSR, st.report.lastSRAt = uint32(sr.NTPTime>>16), now
	}
}

// Send writes what is due at now, reports first, in compound packets of at
// most maxCompound bytes (one packet may be larger); write's errors are the
// connection's to tell. One goroutine calls it at a time; it writes without
// the lock, as the packets keep coming.
func (s *Streams) Send(now time.Time, write func([]rtcp.Packet) error) {
	s.mu.Lock()
	s.due = s.due[:0]
	if due(&s.nextReport, now, ReportInterval) {
		for _, st := range s.order {
			if st.report.started {
				s.due = append(s.due, st.receiverReport(now))
			}
		}
	}
	if due(&s.nextNACK, now, NACKInterval) {
		for _, st := range s.order {
			if n := st.nack(s.nackSSRC, s.missing); n != nil {
				s.due = append(s.due, n)
			}
		}
	}
	s.mu.Unlock()
	for len(s.due) > 0 {
		n, size := 1, s.due[0].MarshalSize()
		for ; n < len(s.due) && size+s.due[n].MarshalSize() <= maxCompound; n++ {
			size += s.due[n].MarshalSize()
		}
		_ = write(s.due[:n])
		s.due = s.due[n:]
	}
}

// due says whether the timer at next has fired by now, and sets it again:
// an interval on, or from now if the caller fell behind (no burst).
func due(next *time.Time, now time.Time, interval time.Duration) bool {
	if now.Before(*next) {
		return false
	}
	if *next = next.Add(interval); !now.Before(*next) {
		*next = now.Add(interval)
	}
	return true
}

// Stream is the feedback on one received stream. What a packet updates
// comes first and its bitmaps are in the same allocation: among thousands of
// streams a packet's stream is out of the cache, and each pointer followed
// was a miss of its own.
type Stream struct {
	mu       *sync.Mutex // its Streams'
	clock    float64
	report   reportState
	log      receiveLog
	asks     bool // its losses are asked for
	ssrc     uint32
	reporter uint32            // the sender SSRC of its receiver reports
	asked    map[uint16]uint16 // sequence number → NACKs that asked for it, while missing

	logBits    [logSize / 64]uint64
	reportBits [reportHistory / 64]uint64
}

// Packet notes the stream's packet numbered seq, of RTP timestamp ts,
// arrived at now.
func (st *Stream) Packet(seq uint16, ts uint32, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.report.add(seq, ts, now, st.clock)
	if st.asks {
		st.log.add(seq)
	}
}

// Recovered notes the stream's packet numbered seq, come again in a
// retransmission: it is no longer asked for. The reports leave it out, as a
// browser's receive statistics do (its loss was the network's).
func (st *Stream) Recovered(seq uint16) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.asks {
		st.log.add(seq)
	}
}

// nack is the NACK of the packets missing now that were asked for fewer
// than MaxNACKs times, nil for none; buf holds the missing numbers.
func (st *Stream) nack(sender uint32, buf []uint16) *rtcp.TransportLayerNack {
	if !st.asks {
		return nil
	}
	missing := st.log.missing(buf)
	if len(missing) == 0 {
		clear(st.asked)
		return nil
	}
	still := make(map[uint16]uint16, len(missing))
	ask := missing[:0:0]
	for _, seq := range missing {
		n := st.asked[seq]
		if n < MaxNACKs {
			ask = append(ask, seq)
		}
		still[seq] = n + 1
	}
	st.asked = still // forgets what arrived meanwhile
	if len(ask) == 0 {
		return nil
	}
	return &rtcp.TransportLayerNack{SenderSSRC: sender, MediaSSRC: st.ssrc, Nacks: rtcp.NackPairsFromSequenceNumbers(ask)}
}

// receiverReport reports what arrived since the last one, at now.
func (st *Stream) receiverReport(now time.Time) *rtcp.ReceiverReport {
	r := &st.report
	lost, expected := r.lostSinceReport()
	r.totalLost = min(r.totalLost+lost, 0xffffff)
	fraction := uint8(0)
	if expected > 0 {
		fraction = uint8(lost * 256 / expected)
	}
	r.lastReported = r.last
	delay := uint32(0)
	if !r.lastSRAt.IsZero() {
		delay = uint32(now.Sub(r.lastSRAt).Seconds() * 65536)
	}
	return &rtcp.ReceiverReport{SSRC: st.reporter, Reports: []rtcp.ReceptionReport{{
		SSRC: st.ssrc, LastSequenceNumber: uint32(r.cycles)<<16 | uint32(r.last),
		FractionLost: fraction, TotalLost: r.totalLost, Jitter: uint32(r.jitter),
		LastSenderReport: r.lastSR, Delay: delay,
	}}}
}

// reportHistory is how many packets back a report's loss count reaches, as
// pion's (128 words of 64).
const reportHistory = 128 * 64

// reportState is what a receiver report of a stream tells.
type reportState struct {
	started      bool
	received     seqBits   // reportHistory of them
	last         uint16    // the highest sequence number received
	lastReported uint16    // last, at the previous report
	cycles       uint16    // wraps of the sequence numbers
	lastTS       uint32    // the latest packet's timestamp
	lastAt       time.Time // and arrival
	jitter       float64   // in timestamp units
	totalLost    uint32
	lastSR       uint32    // the middle of the latest sender report's NTP time
	lastSRAt     time.Time // and its arrival
}

func (r *reportState) add(seq uint16, ts uint32, now time.Time, clock float64) {
	if !r.started {
		r.started, r.last, r.lastReported = true, seq, seq-1
		r.lastTS, r.lastAt = ts, now
		r.received.set(seq)
		return
	}
	r.received.set(seq)
	if d := seq - r.last; d > 0 && d < 1<<15 {
		if seq < r.last {
			r.cycles++
		}
		for i := r.last + 1; i != seq; i++ {
			r.received.unset(i) // what a lap of the history ago left there
		}
		r.last = seq
	}
	// RFC 3550 A.8, between consecutive arrivals; the timestamps' difference
	// taken across a wrap
	d := now.Sub(r.lastAt).Seconds()*clock - float64(int32(ts-r.lastTS))
	if d < 0 {
		d = -d
	}
	r.jitter += (d - r.jitter) / 16
	r.lastTS, r.lastAt = ts, now
}

// lostSinceReport counts the sequence numbers between the last report's
// highest and the highest now that did not arrive, and those expected.
func (r *reportState) lostSinceReport() (lost, expected uint32) {
	expected = uint32(r.last - r.lastReported)
	if expected == 0 {
		return 0, 0 // nothing came since: the loop below would go round all numbers
	}
	for i := r.lastReported + 1; i != r.last; i++ {
		if !r.received.has(i) {
			lost++
		}
	}
	return lost, expected
}

// logSize is how many packets back a NACK reaches, as pion's generator.
const logSize = 512

// receiveLog is what arrived of the latest logSize sequence numbers.
type receiveLog struct {
	received    seqBits // logSize of them
	started     bool
	end         uint16 // the highest received
	consecutive uint16 // the highest below which nothing is missing
}

func (l *receiveLog) add(seq uint16) {
	if !l.started {
		l.started, l.end, l.consecutive = true, seq, seq
		l.received.set(seq)
		return
	}
	switch d := seq - l.end; {
	case d == 0:
		return
	case d < 1<<15: // ahead of the highest
		for i := l.end + 1; i != seq; i++ {
			l.received.unset(i)
		}
		l.end = seq
		if l.consecutive+1 == seq {
			l.consecutive = seq
		} else if seq-l.consecutive > logSize {
			l.consecutive = seq - logSize // too old to ask for
			l.received.set(seq)
			l.advance()
			return
		}
	case l.end-seq >= logSize:
		return // too late to tell from a newer one in its place
	case l.consecutive+1 == seq: // a late one that closes the gap
		l.consecutive = seq
		l.received.set(seq)
		l.advance()
		return
	}
	l.received.set(seq)
}

// advance moves consecutive over the packets received after it.
func (l *receiveLog) advance() {
	i := l.consecutive + 1
	for i != l.end+1 && l.received.has(i) {
		i++
	}
	l.consecutive = i - 1
}

// missing fills buf with the sequence numbers after consecutive and up to
// end that did not arrive.
func (l *receiveLog) missing(buf []uint16) []uint16 {
	if !l.started || l.end-l.consecutive >= 1<<15 {
		return buf[:0]
	}
	n := 0
	for i := l.consecutive + 1; i != l.end+1; i++ {
		if !l.received.has(i) {
			buf[n] = i
			n++
		}
	}
	return buf[:n]
}

// seqBits holds a bit for each sequence number, modulo its size: a power
// of two words of 64 (a mask, where a modulo was a division a packet).
type seqBits []uint64

func (b seqBits) set(seq uint16) {
	pos := int(seq) & (64*len(b) - 1)
	b[pos/64] |= 1 << (pos % 64)
}

func (b seqBits) unset(seq uint16) {
	pos := int(seq) & (64*len(b) - 1)
	b[pos/64] &^= 1 << (pos % 64)
}

func (b seqBits) has(seq uint16) bool {
	pos := int(seq) & (64*len(b) - 1)
	return b[pos/64]&(1<<(pos%64)) != 0
}
