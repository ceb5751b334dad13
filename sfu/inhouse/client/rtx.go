package client

import "encoding/binary"

// UnwrapRTX turns the retransmission in b, whose header is headerLen bytes,
// back into the packet it repeats (RFC 4588: the original sequence number
// leads the payload) of payload type pt and SSRC ssrc, in place; its new
// length, or 0 for one that repeats nothing (a bandwidth probe's padding).
func UnwrapRTX(b []byte, headerLen int, pt uint8, ssrc uint32) int {
	padding := 0
	if b[0]&0x20 != 0 {
		padding = int(b[len(b)-1])
	}
	if len(b)-headerLen-padding <= 2 {
		return 0
	}
	b[1] = b[1]&0x80 | pt
	copy(b[2:4], b[headerLen:headerLen+2])
	binary.BigEndian.PutUint32(b[8:12], ssrc)
	copy(b[headerLen:], b[headerLen+2:])
	return len(b) - 2
}
