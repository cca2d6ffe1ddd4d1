// cosignature/v1 (c2sp.org/tlog-cosignature) as a note.Signer and a note.Verifier, written
// here from the specification: x/mod's note package knows only Ed25519 note signatures (type
// 0x01), and takes any Signer or Verifier, which is how cosignatures plug into it.
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const algCosignatureV1 = 0x04

func cosignerKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte("\n"))
	h.Write([]byte{algCosignatureV1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func cosignedMessage(timestamp uint64, text []byte) []byte {
	return append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", timestamp)), text...)
}

// cosigner signs cosignatures with the current time.
type cosigner struct {
	name string
	priv ed25519.PrivateKey
}

func (c *cosigner) Name() string { return c.name }
func (c *cosigner) KeyHash() uint32 {
	return cosignerKeyHash(c.name, c.priv.Public().(ed25519.PublicKey))
}
func (c *cosigner) Sign(text []byte) ([]byte, error) {
	ts := uint64(time.Now().Unix())
	out := make([]byte, 8, 8+ed25519.SignatureSize)
	binary.BigEndian.PutUint64(out, ts)
	return append(out, ed25519.Sign(c.priv, cosignedMessage(ts, text))...), nil
}

func (c *cosigner) vkey() string {
	pub := c.priv.Public().(ed25519.PublicKey)
	return fmt.Sprintf("%s+%08x+%s", c.name, c.KeyHash(),
		base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, pub...)))
}

// cosignatureVerifier checks one witness's cosignatures.
type cosignatureVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v *cosignatureVerifier) Name() string    { return v.name }
func (v *cosignatureVerifier) KeyHash() uint32 { return v.hash }
func (v *cosignatureVerifier) Verify(text, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig[:8])
	if ts > math.MaxInt64 {
		return false
	}
	return ed25519.Verify(v.pub, cosignedMessage(ts, text), sig[8:])
}

// parseCosignerKey reads a vkey of signature type 0x04.
func parseCosignerKey(vkey string) (*cosignatureVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3) // the base64 key may hold a "+"
	if len(parts) != 3 || len(parts[1]) != 8 {
		return nil, errors.New("malformed cosigner vkey")
	}
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return nil, errors.New("malformed cosigner key id")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != algCosignatureV1 {
		return nil, errors.New("not an Ed25519 cosignature/v1 key")
	}
	pub := ed25519.PublicKey(raw[1:])
	if uint32(hash) != cosignerKeyHash(parts[0], pub) {
		return nil, errors.New("cosigner key id does not match the key")
	}
	return &cosignatureVerifier{name: parts[0], hash: uint32(hash), pub: pub}, nil
}

// cosignatureTime is the timestamp of a base64 cosignature (key id, time, signature).
func cosignatureTime(b64 string) uint64 {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) < 12 {
		return 0
	}
	return binary.BigEndian.Uint64(raw[4:12])
}
