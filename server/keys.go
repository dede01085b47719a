package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// An API key is "abx_<id>_<secret>": the id finds its row, the secret is
// 32 random bytes of which only the SHA-256 is stored. A fast hash is
// enough for a secret of that entropy (no dictionary to try), and it keeps
// authentication off the request's latency.
const keyPrefix = "abx_"

// Key is an API key's row, without its secret.
type Key struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// tenantName is what a tenant may be called: it appears in logs, metrics,
// labels and the data directory.
var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// validTenant refuses a tenant name that is not tenantName.
func validTenant(t string) error {
	if !tenantName.MatchString(t) {
		return fmt.Errorf("tenant %q: a tenant name is 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit", t)
	}
	return nil
}

// CreateKey makes a key for tenant and returns its row and the token,
// which is shown once and never stored.
func (r *Registry) CreateKey(tenant string) (Key, string, error) {
	if err := validTenant(tenant); err != nil {
		return Key{}, "", err
	}
	var id [8]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Key{}, "", err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Key{}, "", err
	}
	k := Key{ID: hex.EncodeToString(id[:]), Tenant: tenant, CreatedAt: time.Now().UTC()}
	sec := hex.EncodeToString(secret[:])
	k.Hash = hashSecret(sec)
	if err := r.put(bucketKeys, []byte(k.ID), k); err != nil {
		return Key{}, "", fmt.Errorf("registry: save key: %w", err)
	}
	return k, keyPrefix + k.ID + "_" + sec, nil
}

func hashSecret(sec string) string {
	h := sha256.Sum256([]byte(sec))
	return hex.EncodeToString(h[:])
}

// Keys lists every key, revoked ones included.
func (r *Registry) Keys() ([]Key, error) {
	var out []Key
	err := each(r, bucketKeys, func(k Key) error { out = append(out, k); return nil })
	return out, err
}

// RevokeKey revokes the key id; it fails when there is no such key.
func (r *Registry) RevokeKey(id string) (Key, error) {
	var k Key
	err := r.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		v := b.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("no key %q (agentbox serve token list shows them)", id)
		}
		if err := json.Unmarshal(v, &k); err != nil {
			return err
		}
		if k.RevokedAt.IsZero() {
			k.RevokedAt = time.Now().UTC()
		}
		data, err := json.Marshal(k)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), data)
	})
	return k, err
}

// Authenticate returns the tenant of a live key whose token is tok, or
// "" when there is none (unknown, malformed, wrong secret, revoked: the
// caller learns nothing of which).
func (r *Registry) Authenticate(tok string) string {
	rest, ok := strings.CutPrefix(tok, keyPrefix)
	if !ok {
		return ""
	}
	id, sec, ok := strings.Cut(rest, "_")
	if !ok || id == "" || sec == "" {
		return ""
	}
	var k Key
	err := r.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketKeys).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("no key")
		}
		return json.Unmarshal(v, &k)
	})
	if err != nil || !k.RevokedAt.IsZero() {
		return ""
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(sec)), []byte(k.Hash)) != 1 {
		return ""
	}
	return k.Tenant
}
