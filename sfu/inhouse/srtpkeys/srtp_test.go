package srtpkeys

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// Our AES-GCM and AES-CM contexts against pion's, packet for packet, each
// side encrypting what the other decrypts: sequence numbers that wrap,
// packets late from before the wrap, repeats, a forged packet in between.

var ourProfiles = []srtp.ProtectionProfile{
	srtp.ProtectionProfileAeadAes128Gcm, srtp.ProtectionProfileAeadAes256Gcm,
	srtp.ProtectionProfileAes128CmHmacSha1_80, srtp.ProtectionProfileAes128CmHmacSha1_32,
	srtp.ProtectionProfileAes256CmHmacSha1_80, srtp.ProtectionProfileAes256CmHmacSha1_32,
}

func keys(t *testing.T, profile srtp.ProtectionProfile) (key, salt []byte) {
	t.Helper()
	keyLen, err := profile.KeyLen()
	if err != nil {
		t.Fatal(err)
	}
	saltLen, err := profile.SaltLen()
	if err != nil {
		t.Fatal(err)
	}
	key, salt = make([]byte, keyLen), make([]byte, saltLen)
	for i := range key {
		key[i] = byte(3*i + 1)
	}
	for i := range salt {
		salt[i] = byte(5*i + 2)
	}
	return key, salt
}

// contexts are ours and pion's for the same keys.
func contexts(t *testing.T, profile srtp.ProtectionProfile) (RTP, *srtp.Context) {
	t.Helper()
	key, salt := keys(t, profile)
	ours, err := NewRTP(key, salt, profile)
	if err != nil {
		t.Fatal(err)
	}
	pion, err := srtp.CreateContext(key, salt, profile)
	if err != nil {
		t.Fatal(err)
	}
	return ours, pion
}

// order is the sequence numbers sent: a wrap, a late packet from before it,
// a repeat, and other streams between (106 in the state slot of 42, which
// took it first).
var order = []uint16{65530, 65531, 65533, 65532, 65534, 65535, 0, 1, 65535, 2, 3, 3, 100, 101}

func packet(t *testing.T, seq uint16, ssrc uint32) (plain []byte, h *rtp.Header, headerLen int) {
	t.Helper()
	p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, SSRC: ssrc,
		Timestamp: uint32(seq) * 3000, Extension: true, ExtensionProfile: 0xbede},
		Payload: bytes.Repeat([]byte{byte(seq)}, 50+int(seq%7))}
	if err := p.SetExtension(1, []byte{byte(seq >> 8), byte(seq)}); err != nil {
		t.Fatal(err)
	}
	plain, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return plain, &p.Header, p.Header.MarshalSize()
}

func TestOursEncryptsWhatPionDecrypts(t *testing.T) {
	for _, profile := range ourProfiles {
		t.Run(profile.String(), func(t *testing.T) {
			ours, pion := contexts(t, profile)
			if _, ok := ours.(*pionRTP); ok {
				t.Fatalf("pion's context for %v, want ours", profile)
			}
			for i, seq := range order {
				for _, ssrc := range []uint32{42, 43, 106} {
					plain, h, n := packet(t, seq+uint16(ssrc-42)*7, ssrc)
					enc, err := ours.EncryptRTP(nil, plain, h, n)
					if err != nil {
						t.Fatal(err)
					}
					got, err := pion.DecryptRTP(nil, enc, nil)
					if err != nil {
						t.Fatalf("packet %d (seq %d, ssrc %d): pion could not decrypt ours: %v", i, seq, ssrc, err)
					}
					if !bytes.Equal(got, plain) {
						t.Fatalf("packet %d: pion decrypted other bytes", i)
					}
				}
			}
		})
	}
}

func TestOursDecryptsWhatPionEncrypts(t *testing.T) {
	for _, profile := range ourProfiles {
		t.Run(profile.String(), func(t *testing.T) {
			ours, pion := contexts(t, profile)
			for k, seq := range append(order, order...) { // 42's, then 106's
				ssrc := []uint32{42, 106}[k/len(order)]
				i := k % len(order)
				plain, h, n := packet(t, seq, ssrc)
				enc, err := pion.EncryptRTP(nil, plain, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, at := range []int{len(enc) - 1, n} { // its tag, its payload
					forged := bytes.Clone(enc)
					forged[at] ^= 1
					if _, err := ours.DecryptRTP(nil, forged, h, n); err == nil {
						t.Fatalf("packet %d: a packet forged at byte %d was taken", i, at)
					}
				}
				got, err := ours.DecryptRTP(make([]byte, 0, 1500), enc, h, n)
				if err != nil {
					t.Fatalf("packet %d (seq %d): %v", i, seq, err)
				}
				if !bytes.Equal(got, plain) {
					t.Fatalf("packet %d: other bytes", i)
				}
			}
		})
	}
}

// SetROC as pion's: the stream's next packet is taken in that rollover.
func TestSetROCStartsTheStreamInThatRollover(t *testing.T) {
	for _, profile := range []srtp.ProtectionProfile{srtp.ProtectionProfileAeadAes128Gcm, srtp.ProtectionProfileAes128CmHmacSha1_80} {
		t.Run(profile.String(), func(t *testing.T) { setROC(t, profile) })
	}
}

func setROC(t *testing.T, profile srtp.ProtectionProfile) {
	ours, pion := contexts(t, profile)
	pion.SetROC(42, 3)
	ours.SetROC(42, 3)
	for _, seq := range []uint16{40000, 40001, 65535, 0, 5} {
		plain, h, n := packet(t, seq, 42)
		enc, err := pion.EncryptRTP(nil, plain, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ours.DecryptRTP(nil, enc, h, n); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
	}
	ours.SetROC(42, 2)
	plain, h, n := packet(t, 6, 42)
	enc, err := pion.EncryptRTP(nil, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ours.DecryptRTP(nil, enc, h, n); err == nil {
		t.Fatal("decrypted in the wrong rollover")
	}
}

func TestOtherProfilesArePions(t *testing.T) {
	key, salt := make([]byte, 16), make([]byte, 14)
	c, err := NewRTP(key, salt, srtp.ProtectionProfileNullHmacSha1_80)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%T", c); got != "*srtpkeys.pionRTP" {
		t.Fatalf("%s for NULL-HMAC-SHA1, want pion's", got)
	}
}
