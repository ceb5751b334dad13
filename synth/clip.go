package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
)

// clip is the media step's frame-coded clip, pre-encoded once: video frames
// in one codec and one or more simulcast layers (loop position i carries
// frame code i in each) and 20 ms Opus packets. Every participant plays it
// from memory, so publishing costs no encoding.
type clip struct {
	codec   *videoCodec
	layers  []layer        // smallest picture first; the last is the full picture
	svc     bool           // the layers are the spatial layers of one SVC stream
	nextKey []int          // the first position at or after each where every layer has a keyframe
	codes   map[uint64]int // a frame's digest, in any layer → its loop position
	audio   [][]byte
}

// layer is one simulcast layer's encoding of the clip.
type layer struct {
	width, height int
	frames        [][]byte
}

func (c *clip) full() *layer { return &c.layers[len(c.layers)-1] }

// digest identifies a frame by its bytes. An SFU forwards the frame data
// untouched (it rewrites only RTP headers and payload descriptors), so a
// receiver that digests what it reassembled learns which loop position it
// got, without decoding.
// digestSeed is the process's: a frame's digest is only ever compared with
// others of the same process (the clip's, loaded at start).
var digestSeed = maphash.MakeSeed()

// digest names a frame by its bytes, once per frame received: a word at a
// time, where FNV went a byte at a time and cost a twentieth of the
// generator's CPU.
func digest(b []byte) uint64 { return maphash.Bytes(digestSeed, b) }

// loadClip reads the clip's layers (files of one codec, smallest picture
// first) and its audio. The layers must have the same frames and their
// keyframes at the same positions, so that a keyframe asked for arrives in
// every layer at once. With svc they are the spatial layers of one VP9
// stream (svcenc's files): a key picture is a keyframe in the smallest only,
// the others predicted from the layer below.
func loadClip(videoPaths []string, oggPath string, svc bool) (*clip, error) {
	c := &clip{codes: map[uint64]int{}, svc: svc}
	for _, path := range videoPaths {
		codec, err := codecOfFile(path)
		if err != nil {
			return nil, err
		}
		if c.codec != nil && codec != c.codec {
			return nil, fmt.Errorf("%s: %s, the other layers %s", path, codec.name, c.codec.name)
		}
		c.codec = codec
		frames, err := codec.readFrames(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(frames) == 0 || (!svc || len(c.layers) == 0) && !codec.isKeyframe(frames[0]) {
			return nil, fmt.Errorf("%s: the clip must start with a keyframe", path)
		}
		if len(c.layers) > 0 && len(frames) != len(c.layers[0].frames) {
			return nil, fmt.Errorf("%s: %d frames, the other layers %d", path, len(frames), len(c.layers[0].frames))
		}
		l := layer{frames: frames}
		l.width, l.height, _ = codec.keyframeSize(codec.received(frames[0]))
		if svc { // an upper layer's size is in no frame of its own: its file's header has it
			l.width, l.height, err = ivfSize(path)
			if err != nil {
				return nil, err
			}
		}
		c.layers = append(c.layers, l)
	}
	if len(c.layers) == 0 {
		return nil, errors.New("no video layer")
	}
	if svc && (c.codec != vp9Codec || len(c.layers) < 2) {
		return nil, fmt.Errorf("SVC needs two or three VP9 spatial layers, not %d of %s", len(c.layers), c.codec.name)
	}
	n := len(c.layers[0].frames)
	c.nextKey = make([]int, n)
	next := 0 // the clip loops: past the last keyframe comes position 0
	for i := n - 1; i >= 0; i-- {
		keys := 0
		for _, l := range c.layers {
			if c.codec.isKeyframe(l.frames[i]) {
				keys++
			}
		}
		if svc && keys > 1 || !svc && keys != 0 && keys != len(c.layers) {
			return nil, fmt.Errorf("frame %d is a keyframe in %d layers of %d: the layers' keyframes must be at the same positions", i, keys, len(c.layers))
		}
		if keys != 0 {
			next = i
		}
		c.nextKey[i] = next
	}
	dupes := map[uint64]bool{}
	add := func(d uint64, i int) {
		if _, seen := c.codes[d]; seen {
			dupes[d] = true
		}
		c.codes[d] = i
	}
	for k := range c.layers {
		for i := range c.layers[k].frames {
			add(digest(c.received(i, k)), i)
			if svc && k > 0 && c.nextKey[i] != i {
				// the picture as an SFU that reads the dependency descriptor forwards it: its
				// frames between key pictures refer to their own layer alone
				add(digest(c.layers[k].frames[i]), i)
			}
		}
	}
	for d := range dupes { // two frames with the same bytes cannot be told apart
		delete(c.codes, d)
	}
	var err error
	if c.audio, err = readOggOpus(oggPath); err != nil {
		return nil, fmt.Errorf("%s: %w", oggPath, err)
	}
	if len(c.audio) == 0 {
		return nil, fmt.Errorf("%s: no Opus packets", oggPath)
	}
	return c, nil
}

// received is what a receiver reassembles of loop position i in layer k:
// with SVC the picture's frames of every spatial layer up to k, in order.
func (c *clip) received(i, k int) []byte {
	if !c.svc {
		return c.codec.received(c.layers[k].frames[i])
	}
	var b []byte
	for _, l := range c.layers[:k+1] {
		b = append(b, l.frames[i]...)
	}
	return b
}

// spatialLayers is how many spatial layers the clip's SVC stream has, 0
// for a clip of simulcast layers.
func (c *clip) spatialLayers() int {
	if !c.svc {
		return 0
	}
	return len(c.layers)
}

// picture is loop position i in every spatial layer, smallest first.
func (c *clip) picture(i int) [][]byte {
	frames := make([][]byte, len(c.layers))
	for k, l := range c.layers {
		frames[k] = l.frames[i]
	}
	return frames
}

// ivfSize is the picture size an IVF file's header gives.
func ivfSize(path string) (w, h int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	head := make([]byte, 32)
	if _, err := io.ReadFull(f, head); err != nil || ivfFourCC(head) == "" {
		return 0, 0, fmt.Errorf("%s: not an IVF file", path)
	}
	return int(binary.LittleEndian.Uint16(head[12:])), int(binary.LittleEndian.Uint16(head[14:])), nil
}

// ivfFourCC is the codec an IVF file's header names ("VP80", "VP90",
// "AV01"), or "" for a file that is not IVF.
func ivfFourCC(b []byte) string {
	if len(b) < 32 || string(b[:4]) != "DKIF" {
		return ""
	}
	return string(b[8:12])
}

// ivfFrames returns a reader of the frames of an IVF file (the container
// libvpx and libaom write) holding the codec fourcc names.
func ivfFrames(fourcc string) func(path string) ([][]byte, error) {
	return func(path string) ([][]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if got := ivfFourCC(b); got != fourcc {
			return nil, fmt.Errorf("not an IVF file of %s (%q)", fourcc, got)
		}
		return readIVF(b)
	}
}

func readIVF(b []byte) ([][]byte, error) {
	var frames [][]byte
	for off := int(binary.LittleEndian.Uint16(b[6:])); off < len(b); {
		if off+12 > len(b) {
			return nil, errors.New("truncated frame header")
		}
		n := int(binary.LittleEndian.Uint32(b[off:]))
		off += 12
		if off+n > len(b) {
			return nil, errors.New("truncated frame")
		}
		frames = append(frames, b[off:off+n])
		off += n
	}
	return frames, nil
}

// readOggOpus returns the Opus packets of an Ogg file, without its two
// header packets (OpusHead, OpusTags).
func readOggOpus(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var packets [][]byte
	var cur []byte
	for off := 0; off < len(b); {
		if off+27 > len(b) || string(b[off:off+4]) != "OggS" {
			return nil, fmt.Errorf("no Ogg page at byte %d", off)
		}
		nseg := int(b[off+26])
		table := off + 27
		data := table + nseg
		if data > len(b) {
			return nil, errors.New("truncated page")
		}
		for _, l := range b[table:data] {
			if data+int(l) > len(b) {
				return nil, errors.New("truncated segment")
			}
			cur = append(cur, b[data:data+int(l)]...)
			data += int(l)
			if l < 255 { // a packet ends with a segment shorter than 255
				packets = append(packets, cur)
				cur = nil
			}
		}
		off = data
	}
	out := packets[:0]
	for _, p := range packets {
		if !bytes.HasPrefix(p, []byte("OpusHead")) && !bytes.HasPrefix(p, []byte("OpusTags")) {
			out = append(out, p)
		}
	}
	return out, nil
}
