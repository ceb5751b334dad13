package directrtp

import (
	"net/netip"
	"testing"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"

	"sfubench/sfu/inhouse/srtpkeys"
)

// collected keeps what was written to it.
type collected [][]byte

func (c *collected) WriteToAddrPort(b []byte, _ netip.AddrPort) (int, error) {
	*c = append(*c, append([]byte(nil), b...))
	return len(b), nil
}

// The keys of every context here; the writer's context is ours (AES-GCM),
// pion's stands on both sides of it.
var (
	testProfile = srtp.ProtectionProfileAeadAes128Gcm
	testKey     = []byte{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}
	testSalt    = make([]byte, 12)
)

func context(t *testing.T) *srtp.Context {
	t.Helper()
	c, err := srtp.CreateContext(testKey, testSalt, testProfile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A stream's first packets go through pion's context; when its sequence
// numbers wrap before the writer starts, the writer's context must go on
// from the rollover pion's reached, or the receiver can decrypt nothing
// after the switch. What pion drops before it has keys never reached its
// context, and counts for nothing.
func TestAStreamGoesOnFromTheRolloverPionsContextReached(t *testing.T) {
	for _, c := range []struct {
		name                string
		dropped, pion, ours []uint16
		repeat              int // the written packet that repeats an earlier one (a retransmission), or -1
	}{
		// the late retransmission of 65534 moves the rollover nothing
		{"wrapped through pion", nil, []uint16{65532, 65533, 65534, 65535, 0, 1, 65534}, []uint16{2, 3, 4, 5}, 6},
		{"wrapped before pion had keys", []uint16{65534, 65535, 0}, []uint16{1, 2}, []uint16{3, 4}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pion, receiver := context(t), context(t)
			ours, err := srtpkeys.NewRTP(testKey, testSalt, testProfile)
			if err != nil {
				t.Fatal(err)
			}
			var wire collected
			keys := false
			w := (&Factory{}).mustMake(t)
			// What pion's SRTP session does below the writer, stood in for by a
			// context of the same keys (the real session is synth's
			// TestPublishedMediaTakesTheDirectWriterOnceConnected): nothing before
			// DTLS has given keys, then each packet encrypted.
			write := w.BindLocalStream(&interceptor.StreamInfo{SSRC: 42}, interceptor.RTPWriterFunc(
				func(h *rtp.Header, payload []byte, _ interceptor.Attributes) (int, error) {
					if !keys {
						return 0, nil // as pion's writer before DTLS is done
					}
					plain, err := (&rtp.Packet{Header: *h, Payload: payload}).Marshal()
					if err != nil {
						return 0, err
					}
					out, err := pion.EncryptRTP(nil, plain, nil)
					wire = append(wire, out)
					return len(out), err
				}))
			send := func(seqs []uint16) {
				for _, seq := range seqs {
					h := &rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, SSRC: 42, Timestamp: uint32(seq)}
					if _, err := write.Write(h, []byte{1, 2, 3, 4, 5}, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			send(c.dropped)
			keys = true
			send(c.pion)
			w.Start(&wire, ours, netip.MustParseAddrPort("127.0.0.1:9"))
			send(c.ours)
			if want := len(c.pion) + len(c.ours); len(wire) != want {
				t.Fatalf("%d packets written, want %d", len(wire), want)
			}
			for i, b := range wire {
				if _, err := receiver.DecryptRTP(nil, b, nil); err != nil && i != c.repeat { // a repeat fails the replay check
					t.Fatalf("packet %d: %v", i, err)
				}
			}
		})
	}
}

func (f *Factory) mustMake(t *testing.T) *Writer {
	i, err := f.NewInterceptor("")
	if err != nil {
		t.Fatal(err)
	}
	return i.(*Writer)
}
