package main

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

// epoch is the clock both ends of every stream share: publishers stamp
// packets with the time since it, subscribers subtract.
var epoch = time.Now()

// Payload layout after the VP8 descriptor (video) or from the start
// (audio): "SB", publisher index, packet number, send time in ns.
const stampLen = 2 + 2 + 4 + 8

func newAPI(localIP net.IP) (*webrtc.API, error) {
	return client.NewAPI(client.APIOptions{IPFilter: func(ip net.IP) bool { return ip.Equal(localIP) }})
}

type load struct {
	videoPPS, audioPPS     int
	videoBytes, audioBytes int
}

type recvKey struct {
	from  uint16
	video bool
}

// synth is a synthetic participant: it publishes a VP8-like and an
// Opus-like stream whose payloads carry a send timestamp, and counts and
// times what it receives.
type synth struct {
	idx          uint16
	user         string
	audio, video *webrtc.TrackLocalStaticRTP
	sent         [2]atomic.Uint64 // audio, video packets
	keyframe     atomic.Bool
	stop         chan struct{}
	wg           sync.WaitGroup
	sess         Session

	collecting atomic.Bool
	mu         sync.Mutex
	recv       map[recvKey]*atomic.Uint64
	latUS      []uint32
}

func newSynth(idx uint16, user string) *synth {
	s := &synth{idx: idx, user: user, stop: make(chan struct{}), recv: map[recvKey]*atomic.Uint64{}}
	s.audio, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", user)
	s.video, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, "video", user)
	s.keyframe.Store(true)
	return s
}

func (s *synth) participant(room string, api *webrtc.API, users map[string]uint16) Participant {
	return Participant{
		Room: room, User: s.user,
		NewPeerConnection: func() (*webrtc.PeerConnection, error) { return api.NewPeerConnection(webrtc.Configuration{}) },
		Tracks:            []webrtc.TrackLocal{s.audio, s.video},
		Publishing:        s.readRTCP,
		OnTrack: func(remote string, t *webrtc.TrackRemote) {
			from, ok := users[remote]
			if !ok {
				return
			}
			s.receive(from, t)
		},
	}
}

func (s *synth) readRTCP(sender *webrtc.RTPSender) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			pkts, _, err := sender.ReadRTCP()
			if err != nil {
				return
			}
			for _, p := range pkts {
				switch p.(type) {
				case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
					s.keyframe.Store(true)
				}
			}
		}
	}()
}

// publish sends both streams at their rates, from a random phase.
func (s *synth) publish(l load) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		at := time.NewTicker(time.Second / time.Duration(l.audioPPS))
		vt := time.NewTicker(time.Second / time.Duration(l.videoPPS))
		defer at.Stop()
		defer vt.Stop()
		abuf := make([]byte, l.audioBytes)
		vbuf := make([]byte, l.videoBytes)
		var an, vn uint32
		for {
			select {
			case <-s.stop:
				return
			case <-at.C:
				s.stamp(abuf, an)
				_ = s.audio.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: uint16(an), Timestamp: an * 960}, Payload: abuf})
				s.sent[0].Add(1)
				an++
			case <-vt.C:
				frame := byte(1)
				if s.keyframe.Swap(false) {
					frame = 0
				}
				copy(vbuf, []byte{0x90, 0x80, 0x80 | byte(vn>>8&0x7f), byte(vn), frame})
				s.stamp(vbuf[5:], vn)
				_ = s.video.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, Marker: true, SequenceNumber: uint16(vn), Timestamp: vn * 3000}, Payload: vbuf})
				s.sent[1].Add(1)
				vn++
			}
		}
	}()
}

func (s *synth) stamp(b []byte, n uint32) {
	b[0], b[1] = 'S', 'B'
	binary.BigEndian.PutUint16(b[2:], s.idx)
	binary.BigEndian.PutUint32(b[4:], n)
	binary.BigEndian.PutUint64(b[8:], uint64(time.Since(epoch)))
}

func (s *synth) receive(from uint16, t *webrtc.TrackRemote) {
	video := t.Kind() == webrtc.RTPCodecTypeVideo
	key := recvKey{from, video}
	s.mu.Lock()
	count := s.recv[key]
	if count == nil {
		count = &atomic.Uint64{}
		s.recv[key] = count
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, _, err := t.Read(buf)
			if err != nil {
				return
			}
			pl := rtpPayload(buf[:n])
			if video && len(pl) > 5 {
				pl = pl[5:]
			}
			if len(pl) < stampLen || pl[0] != 'S' || pl[1] != 'B' || binary.BigEndian.Uint16(pl[2:]) != from {
				continue
			}
			count.Add(1)
			if s.collecting.Load() {
				lat := time.Since(epoch) - time.Duration(binary.BigEndian.Uint64(pl[8:]))
				s.mu.Lock()
				s.latUS = append(s.latUS, uint32(lat/time.Microsecond))
				s.mu.Unlock()
			}
		}
	}()
}

func rtpPayload(b []byte) []byte {
	if len(b) < 12 {
		return nil
	}
	off := 12 + 4*int(b[0]&0x0f)
	if b[0]&0x10 != 0 && len(b) >= off+4 {
		off += 4 + 4*int(binary.BigEndian.Uint16(b[off+2:]))
	}
	if off > len(b) {
		return nil
	}
	return b[off:]
}

// received is how many packets arrived from each publisher stream.
func (s *synth) received() map[recvKey]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[recvKey]uint64, len(s.recv))
	for k, v := range s.recv {
		out[k] = v.Load()
	}
	return out
}

func (s *synth) close() {
	close(s.stop)
	if s.sess != nil {
		_ = s.sess.Close()
	}
	s.wg.Wait()
}
