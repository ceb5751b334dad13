package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
)

// clip is the media step's frame-coded clip, pre-encoded once: VP8 frames
// (loop position i carries frame code i) and 20 ms Opus packets. Every
// participant plays it from memory, so publishing costs no encoding.
type clip struct {
	width, height int
	frames        [][]byte
	nextKey       []int // the first keyframe at or after each position
	codes         map[uint64]int
	audio         [][]byte
}

// digest identifies a VP8 frame by its bytes. An SFU forwards the frame
// data untouched (it rewrites only RTP headers and the payload
// descriptor), so a receiver that digests what it reassembled learns
// which loop position it got, without decoding.
// digestSeed is the process's: a frame's digest is only ever compared with
// others of the same process (the clip's, loaded at start).
var digestSeed = maphash.MakeSeed()

// digest names a frame by its bytes, once per frame received: a word at a
// time, where FNV went a byte at a time and cost a twentieth of the
// generator's CPU.
func digest(b []byte) uint64 { return maphash.Bytes(digestSeed, b) }

func isKeyframe(f []byte) bool { return len(f) > 0 && f[0]&1 == 0 }

// keyframeSize reads a VP8 keyframe's picture size (RFC 6386 9.1).
func keyframeSize(f []byte) (w, h int, ok bool) {
	if !isKeyframe(f) || len(f) < 10 || f[3] != 0x9d || f[4] != 0x01 || f[5] != 0x2a {
		return 0, 0, false
	}
	return int(binary.LittleEndian.Uint16(f[6:]) & 0x3fff), int(binary.LittleEndian.Uint16(f[8:]) & 0x3fff), true
}

func loadClip(ivfPath, oggPath string) (*clip, error) {
	frames, err := readIVF(ivfPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ivfPath, err)
	}
	if len(frames) == 0 || !isKeyframe(frames[0]) {
		return nil, fmt.Errorf("%s: the clip must start with a keyframe", ivfPath)
	}
	c := &clip{frames: frames, nextKey: make([]int, len(frames)), codes: make(map[uint64]int, len(frames))}
	c.width, c.height, _ = keyframeSize(frames[0])
	next := 0 // the clip loops: past the last keyframe comes position 0
	for i := len(frames) - 1; i >= 0; i-- {
		if isKeyframe(frames[i]) {
			next = i
		}
		c.nextKey[i] = next
	}
	dupes := map[uint64]bool{}
	for i, f := range frames {
		d := digest(f)
		if _, seen := c.codes[d]; seen {
			dupes[d] = true
		}
		c.codes[d] = i
	}
	for d := range dupes { // two positions with the same bytes cannot be told apart
		delete(c.codes, d)
	}
	if c.audio, err = readOggOpus(oggPath); err != nil {
		return nil, fmt.Errorf("%s: %w", oggPath, err)
	}
	if len(c.audio) == 0 {
		return nil, fmt.Errorf("%s: no Opus packets", oggPath)
	}
	return c, nil
}

// readIVF returns the frames of an IVF file (the container libvpx writes).
func readIVF(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 32 || string(b[:4]) != "DKIF" || string(b[8:12]) != "VP80" {
		return nil, errors.New("not a VP8 IVF file")
	}
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
