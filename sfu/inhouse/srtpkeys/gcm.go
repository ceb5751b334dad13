package srtpkeys

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"

	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// RTP is what a direct path asks of an SRTP context, for packets whose
// header it has parsed already (h, headerLen bytes of the packet). A
// context is for one goroutine at a time: its streams' state is not locked.
type RTP interface {
	EncryptRTP(dst, plaintext []byte, h *rtp.Header, headerLen int) ([]byte, error)
	DecryptRTP(dst, ciphertext []byte, h *rtp.Header, headerLen int) ([]byte, error)
	// SetROC sets a stream's rollover counter, its next packet being
	// taken as the first of that rollover.
	SetROC(ssrc, roc uint32)
}

// NewRTP is a context for the keys: for the AEAD AES-GCM and the AES-CM
// HMAC-SHA1 profiles, one of ours; else pion's. Around the cipher, pion's
// spent as much again per packet (parsing the header a second time, a map
// per stream and the options a context can have, profiled at 84
// participants in make bench); ours does what the negotiated options need
// (no MKI, no replay window, no cryptex: pion's defaults, which the
// connections here keep) and nothing else.
func NewRTP(key, salt []byte, profile srtp.ProtectionProfile) (RTP, error) {
	switch profile {
	case srtp.ProtectionProfileAeadAes128Gcm, srtp.ProtectionProfileAeadAes256Gcm:
		return newGCM(key, salt)
	case srtp.ProtectionProfileAes128CmHmacSha1_80, srtp.ProtectionProfileAes256CmHmacSha1_80:
		return newCM(key, salt, 10)
	case srtp.ProtectionProfileAes128CmHmacSha1_32, srtp.ProtectionProfileAes256CmHmacSha1_32:
		return newCM(key, salt, 4)
	}
	c, err := srtp.CreateContext(key, salt, profile)
	if err != nil {
		return nil, err
	}
	return &pionRTP{c: c}, nil
}

// pionRTP is pion's context behind RTP; it parses each header again, into
// a header of its own.
type pionRTP struct {
	c   *srtp.Context
	hdr rtp.Header
}

func (p *pionRTP) EncryptRTP(dst, plaintext []byte, _ *rtp.Header, _ int) ([]byte, error) {
	return p.c.EncryptRTP(dst, plaintext, &p.hdr)
}

func (p *pionRTP) DecryptRTP(dst, ciphertext []byte, _ *rtp.Header, _ int) ([]byte, error) {
	return p.c.DecryptRTP(dst, ciphertext, &p.hdr)
}

func (p *pionRTP) SetROC(ssrc, roc uint32) { p.c.SetROC(ssrc, roc) }

// gcm is SRTP with AEAD AES-GCM (RFC 7714) for RTP: the session key and
// salt derived from the master ones (RFC 3711 4.3.1, the AES-CM PRF, key
// derivation rate 0), each stream's packet index kept as RFC 3711 3.3.1
// estimates it.
type gcm struct {
	rollovers
	aead cipher.AEAD
	salt [12]byte
	// iv is the packet's nonce: in the context, not on the stack, as the
	// AEAD (an interface) would have it escape, an allocation a packet.
	iv [12]byte
}

const (
	labelRTPKey  = 0x00
	labelRTPSalt = 0x02
	gcmTagLen    = 16
)

var errShort = errors.New("srtpkeys: SRTP packet too short")

func newGCM(key, salt []byte) (*gcm, error) {
	if len(salt) != 12 {
		return nil, errors.New("srtpkeys: an AES-GCM master salt is 12 bytes")
	}
	block, sessionSalt, err := session(key, salt)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	g := &gcm{aead: aead, rollovers: newRollovers()}
	copy(g.salt[:], sessionSalt)
	return g, nil
}

// session is the session's cipher and salt, derived from the master key and
// salt (RFC 3711 4.3), as every profile here has them.
func session(key, salt []byte) (cipher.Block, []byte, error) {
	sessionKey, err := derive(labelRTPKey, key, salt, len(key))
	if err != nil {
		return nil, nil, err
	}
	sessionSalt, err := derive(labelRTPSalt, key, salt, len(salt))
	if err != nil {
		return nil, nil, err
	}
	block, err := aes.NewCipher(sessionKey)
	return block, sessionSalt, err
}

// derive is the AES-CM PRF of RFC 3711 4.3.1 at index 0: the master salt,
// the label at byte 7, encrypted under the master key as a counter.
func derive(label byte, key, salt []byte, n int) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	var in [16]byte
	copy(in[:], salt)
	in[7] ^= label
	out := make([]byte, (n+15)/16*16)
	for i := 0; i < n; i += 16 {
		binary.BigEndian.PutUint16(in[14:], uint16(i/16))
		block.Encrypt(out[i:], in[:])
	}
	return out[:n], nil
}

// nonce sets g.iv for a packet (RFC 7714 8.1) and returns it.
func (g *gcm) nonce(ssrc, roc uint32, seq uint16) []byte {
	var in [12]byte
	binary.BigEndian.PutUint32(in[2:], ssrc)
	binary.BigEndian.PutUint32(in[6:], roc)
	binary.BigEndian.PutUint16(in[10:], seq)
	for i := range g.iv {
		g.iv[i] = g.salt[i] ^ in[i]
	}
	return g.iv[:]
}

func (g *gcm) EncryptRTP(dst, plaintext []byte, h *rtp.Header, headerLen int) ([]byte, error) {
	if len(plaintext) < headerLen {
		return nil, errShort
	}
	roc := g.sending(h.SSRC, h.SequenceNumber)
	dst = append(dst[:0], plaintext[:headerLen]...)
	return g.aead.Seal(dst, g.nonce(h.SSRC, roc, h.SequenceNumber), plaintext[headerLen:], plaintext[:headerLen]), nil
}

func (g *gcm) DecryptRTP(dst, ciphertext []byte, h *rtp.Header, headerLen int) ([]byte, error) {
	if len(ciphertext) < headerLen+gcmTagLen {
		return nil, errShort
	}
	s := g.stream(h.SSRC)
	roc, ahead := s.guess(h.SequenceNumber)
	dst = append(dst[:0], ciphertext[:headerLen]...)
	out, err := g.aead.Open(dst, g.nonce(h.SSRC, roc, h.SequenceNumber), ciphertext[headerLen:], ciphertext[:headerLen])
	if err != nil {
		return nil, err
	}
	s.saw(h.SequenceNumber, roc, ahead)
	return out, nil
}
