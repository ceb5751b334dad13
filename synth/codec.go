package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"
)

// videoCodec is what the generator needs of one codec: the clip's frames
// as its file holds them, packetized as Chrome does, and found again in the
// packets a receiver gets. A frame is kept in the form a receiver
// reassembles it to (VP8, VP9: the frame; H.264: its NAL units, each after
// a start code), so that the digest of what arrived names its loop
// position; where the packets carry less than the file (AV1 leaves out the
// OBUs' sizes), reassembled gives what a receiver gets of a frame.
type videoCodec struct {
	name, mime string
	fmtp       string // the track's format parameters, as Chrome offers them
	fourcc     string // an IVF file's name for the codec; "": not in IVF
	readFrames func(path string) ([][]byte, error)
	isKeyframe func(frame []byte) bool
	// keyframeSize reads the picture size from the first bytes a receiver
	// reassembles of a keyframe (at most frameHeadSize of them).
	keyframeSize func(head []byte) (w, h int, ok bool)
	reassembled  func(frame []byte) []byte // nil: the frame as it is
	newStream    func() videoStream
	newReader    func() frameReader
}

// frameHeadSize is how many of a frame's first bytes a receiver keeps for
// keyframeSize: an H.264 sequence parameter set's picture size lies within.
const frameHeadSize = 48

// videoStream packetizes one published stream's frames.
type videoStream interface {
	// send writes frame's packets, then moves the timestamp on by ticks; it
	// returns the packets and payload bytes written.
	send(frame []byte, ticks uint32, write func(*rtp.Packet) error) (packets, bytes int)
	// header is the stream's numbering and the extensions its packets carry.
	header() *rtpStream
}

// frameReader finds a codec's frames in the packets of one received stream.
type frameReader interface {
	// unpack reads a packet's payload: whether it begins a frame, given
	// whether it follows the previous frame's last packet with nothing
	// lost between; ok is false for a payload this codec cannot read.
	unpack(payload []byte, afterFrame bool) (starts, ok bool)
	// emit hands the frame data the payload last unpacked carries to sink.
	emit(sink frameSink)
}

// frameSink takes a frame's data as it is reassembled.
type frameSink interface{ take(data []byte) }

var videoCodecs = []*videoCodec{vp8Codec, h264Codec, vp9Codec, av1Codec}

// codecOfFile is the codec of a clip file: an IVF file's by the codec its
// header names, an Annex B stream's (.h264) H.264.
func codecOfFile(path string) (*videoCodec, error) {
	if strings.EqualFold(filepath.Ext(path), ".h264") {
		return h264Codec, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 32)
	_, _ = io.ReadFull(f, head)
	if fourcc := ivfFourCC(head); fourcc != "" {
		for _, c := range videoCodecs {
			if c.fourcc == fourcc {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: not a clip file the generator reads (IVF of VP8, VP9 or AV1; .h264: H.264)", path)
}

// received is what a receiver reassembles of frame.
func (c *videoCodec) received(frame []byte) []byte {
	if c.reassembled == nil {
		return frame
	}
	return c.reassembled(frame)
}

// codecOfMime is the codec of a received track, or nil for one no
// synthetic participant reads.
func codecOfMime(mime string) *videoCodec {
	for _, c := range videoCodecs {
		if strings.EqualFold(c.mime, mime) {
			return c
		}
	}
	return nil
}

func (c *videoCodec) capability() webrtc.RTPCodecCapability {
	return webrtc.RTPCodecCapability{MimeType: c.mime, ClockRate: 90000, SDPFmtpLine: c.fmtp}
}

var vp8Codec = &videoCodec{
	name: "vp8", mime: webrtc.MimeTypeVP8, fourcc: "VP80", readFrames: ivfFrames("VP80"),
	isKeyframe: vp8IsKeyframe, keyframeSize: vp8KeyframeSize,
	newStream: func() videoStream { return newVP8Stream() },
	newReader: func() frameReader { return &vp8Reader{} },
}

func vp8IsKeyframe(f []byte) bool { return len(f) > 0 && f[0]&1 == 0 }

// vp8KeyframeSize reads a VP8 keyframe's picture size (RFC 6386 9.1).
func vp8KeyframeSize(f []byte) (w, h int, ok bool) {
	if !vp8IsKeyframe(f) || len(f) < 10 || f[3] != 0x9d || f[4] != 0x01 || f[5] != 0x2a {
		return 0, 0, false
	}
	return int(binary.LittleEndian.Uint16(f[6:]) & 0x3fff), int(binary.LittleEndian.Uint16(f[8:]) & 0x3fff), true
}

// vp8Reader reads the payload descriptor (RFC 7741 4.2): a frame begins
// with the start of its first partition, whatever came before it.
type vp8Reader struct {
	descriptor codecs.VP8Packet
	data       []byte
}

func (r *vp8Reader) unpack(payload []byte, _ bool) (starts, ok bool) {
	data, err := r.descriptor.Unmarshal(payload)
	if err != nil {
		return false, false
	}
	r.data = data
	return r.descriptor.S == 1 && r.descriptor.PID == 0, true
}

func (r *vp8Reader) emit(sink frameSink) { sink.take(r.data) }
