package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// TokenPrefix starts every token NewToken makes, so a leaked one is easy to
// recognize (and to find with a secret scanner).
const TokenPrefix = "rbk_"

// NewToken returns a new token: TokenPrefix and 256 random bits, base64url.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashToken returns the SHA-256 of token, hex: the only form in which a
// token is stored.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

var hashRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

// CheckHash returns an error when h is not a hex SHA-256 (64 lower-case
// hex digits).
func CheckHash(h string) error {
	if !hashRE().MatchString(h) {
		return fmt.Errorf("token_sha256 must be 64 lower-case hex digits (the SHA-256 of the token: printf %%s TOKEN | sha256sum)")
	}
	return nil
}

// sameHash compares two hex hashes in constant time.
func sameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$`) })

// CheckName returns an error when name cannot name a user or token.
func CheckName(name string) error {
	if !nameRE().MatchString(name) {
		return fmt.Errorf("invalid name %q: use 1-128 letters, digits, '_', '.', '@' or '-', starting with a letter or digit", name)
	}
	if strings.Contains(name, ":") {
		return fmt.Errorf("invalid name %q: ':' is reserved", name)
	}
	return nil
}
