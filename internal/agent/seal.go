package agent

import (
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/crypto/nacl/box"
)

// keyPair is a process's ephemeral X25519 key pair: an agent's (for the
// params of its attempts) or a replica's (for what comes back through the
// store). The private key never leaves the memory of its process.
type keyPair struct {
	pub, priv *[32]byte
}

func newKeyPair() keyPair {
	pub, priv, err := box.GenerateKey(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("generate an X25519 key: %v", err)) // crypto/rand does not fail
	}
	return keyPair{pub: pub, priv: priv}
}

var errBadKey = errors.New("not an X25519 public key (32 bytes)")

// sealTo seals msg to the holder of the public key (an anonymous sender:
// nacl box with an ephemeral key).
func sealTo(key []byte, msg []byte) ([]byte, error) {
	if len(key) != 32 {
		return nil, errBadKey
	}
	return box.SealAnonymous(nil, msg, (*[32]byte)(key), rand.Reader)
}

// open opens what was sealed to k's public key.
func (k keyPair) open(sealed []byte) ([]byte, bool) {
	return box.OpenAnonymous(nil, sealed, k.pub, k.priv)
}
