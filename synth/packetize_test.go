package main

import (
	"bytes"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
)

// collect keeps what a track would send: copies, since the stream reuses
// one packet and one buffer.
func collect(out *[]rtp.Packet) func(*rtp.Packet) error {
	return func(p *rtp.Packet) error {
		c := *p
		c.Payload = append([]byte(nil), p.Payload...)
		*out = append(*out, c)
		return nil
	}
}

// A frame's packets, read back by pion's VP8 depacketizer (what an SFU or
// a receiver parses), carry the frame whole, in MTU-sized packets, with a
// picture ID per frame that wraps at 15 bits.
func TestVP8PacketsAreWhatAReceiverParses(t *testing.T) {
	frames := [][]byte{bytes.Repeat([]byte{0x10, 0x02, 0x9d}, 1000), {0x31}, bytes.Repeat([]byte{7}, 1185)} // one byte past a full packet
	v := newVP8Stream()
	v.pictureID = pictureIDs - 1
	seq, ts := v.seq, v.ts
	var sent []rtp.Packet
	var sizes []int
	for _, f := range frames {
		n, b := v.send(f, 6000, collect(&sent))
		sizes = append(sizes, n)
		if b != len(f)+n*vp8DescriptorSize {
			t.Errorf("%d payload bytes counted for a frame of %d in %d packets", b, len(f), n)
		}
	}
	if want := []int{3, 1, 2}; sizes[0] != want[0] || sizes[1] != want[1] || sizes[2] != want[2] {
		t.Fatalf("packets per frame %v, want %v (at most %d bytes a packet)", sizes, want, mtu)
	}
	k := 0
	for i, f := range frames {
		var whole []byte
		for j := range sizes[i] {
			p := sent[k]
			var d codecs.VP8Packet
			payload, err := d.Unmarshal(p.Payload)
			if err != nil {
				t.Fatalf("frame %d packet %d: %v", i, j, err)
			}
			if len(p.Payload)+rtpHeaderSize > mtu || p.SequenceNumber != seq+uint16(k) ||
				p.Timestamp != ts+uint32(6000*i) || p.Marker != (j == sizes[i]-1) || (d.S == 1) != (j == 0) {
				t.Errorf("frame %d packet %d: seq %d ts %d marker %v S %d, %d bytes", i, j,
					p.SequenceNumber, p.Timestamp, p.Marker, d.S, len(p.Payload))
			}
			long := p.Payload[2]>>7 == 1 // M: the picture ID takes 15 bits
			if want := uint16((pictureIDs - 1 + i) % pictureIDs); d.I != 1 || !long || d.PictureID != want {
				t.Errorf("frame %d: picture ID %d (I %d, 15 bits %v), want %d as 15 bits", i, d.PictureID, d.I, long, want)
			}
			whole = append(whole, payload...)
			k++
		}
		if !bytes.Equal(whole, f) {
			t.Errorf("frame %d reassembled to %d bytes, want its %d", i, len(whole), len(f))
		}
	}
	v.skip(3 * 6000) // three frames a held-up sender dropped: time moves, the picture ID does not
	sent = sent[:0]
	v.send([]byte{1}, 6000, collect(&sent))
	var d codecs.VP8Packet
	if _, err := d.Unmarshal(sent[0].Payload); err != nil || sent[0].Timestamp != ts+6000*6 || d.PictureID != 2 {
		t.Errorf("after a skip: ts %d picture ID %d (%v), want %d and 2", sent[0].Timestamp, d.PictureID, err, ts+6000*6)
	}
}
