package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/agentbox/agentbox/sandbox"
)

// Registry is the server's durable state in one bbolt file under the data
// directory: API keys (hashed), sessions (their backend State, so a
// restarted server finds them again), the sessions a warm pool holds (so
// that one a killed server left is ended by the next) and the snapshot
// index, each keyed by tenant so that a lookup can only ever find the
// asking tenant's rows.
// bbolt locks the file: one server per data directory.
type Registry struct {
	db *bolt.DB
}

var (
	bucketKeys      = []byte("keys")
	bucketSessions  = []byte("sessions")
	bucketSnapshots = []byte("snapshots")
	bucketPooled    = []byte("pooled")
)

// registryFile is the registry's file in the data directory.
const registryFile = "registry.db"

// ErrLocked is returned by OpenRegistry when another process (a running
// server) holds the registry.
var ErrLocked = errors.New("the registry is in use by another process")

// OpenRegistry opens (creating if needed) the registry in dir.
func OpenRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("registry: create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, registryFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 200 * time.Millisecond})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("registry %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketKeys, bucketSessions, bucketSnapshots, bucketPooled} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("registry: init %s: %w", path, err)
	}
	return &Registry{db: db}, nil
}

// Close closes the registry file.
func (r *Registry) Close() error { return r.db.Close() }

// tenantKey is the key of a tenant's row: tenant, NUL, id. Tenant names
// hold no NUL (validTenant), so no two tenants' keys share a prefix.
func tenantKey(tenant, id string) []byte { return []byte(tenant + "\x00" + id) }

// SessionRecord is a session's row.
type SessionRecord struct {
	Tenant      string        `json:"tenant"`
	State       sandbox.State `json:"state"`
	CreatedAt   time.Time     `json:"created_at"`
	ExpiresAt   time.Time     `json:"expires_at,omitzero"`
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// Gone is set when the sandbox was found dead (a restart, a kill from
	// outside); the row stays until the tenant deletes it.
	Gone bool `json:"gone,omitempty"`
	// Workspace is the directory the server made for the session's
	// manifest, removed with the row.
	Workspace string `json:"server_workspace,omitempty"`
}

func (r *Registry) put(bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return r.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, data) })
}

func (r *Registry) del(bucket, key []byte) error {
	return r.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete(key) })
}

// each calls f with every row of bucket (all tenants).
func each[T any](r *Registry, bucket []byte, f func(T) error) error {
	return r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var rec T
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("registry: row %q of %s: %w", k, bucket, err)
			}
			return f(rec)
		})
	})
}

// PutSession writes a session's row. A session a warm pool handed out
// leaves the pool's rows in the same transaction, so that a crash can
// neither lose it nor leave it to be reaped as a pooled one.
func (r *Registry) PutSession(rec SessionRecord) error {
	data, err := json.Marshal(rec)
	if err == nil {
		key := tenantKey(rec.Tenant, rec.State.ID)
		err = r.db.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketPooled).Delete(key); err != nil {
				return err
			}
			return tx.Bucket(bucketSessions).Put(key, data)
		})
	}
	if err != nil {
		return fmt.Errorf("registry: save session %s: %w", rec.State.ID, err)
	}
	return nil
}

// DeleteSession removes a session's row.
func (r *Registry) DeleteSession(tenant, id string) error {
	if err := r.del(bucketSessions, tenantKey(tenant, id)); err != nil {
		return fmt.Errorf("registry: delete session %s: %w", id, err)
	}
	return nil
}

// Sessions lists every session row.
func (r *Registry) Sessions() ([]SessionRecord, error) {
	var out []SessionRecord
	err := each(r, bucketSessions, func(rec SessionRecord) error { out = append(out, rec); return nil })
	return out, err
}

// SnapshotRecord is a snapshot's row: which tenant's session saved it.
type SnapshotRecord struct {
	Tenant    string    `json:"tenant"`
	ID        string    `json:"id"`
	Session   string    `json:"session,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// PutSnapshot records a tenant's snapshot.
func (r *Registry) PutSnapshot(rec SnapshotRecord) error {
	return r.put(bucketSnapshots, tenantKey(rec.Tenant, rec.ID), rec)
}

// HasSnapshot reports whether tenant has the snapshot id.
func (r *Registry) HasSnapshot(tenant, id string) bool {
	var found bool
	_ = r.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketSnapshots).Get(tenantKey(tenant, id)) != nil
		return nil
	})
	return found
}

// Snapshots lists tenant's snapshots.
func (r *Registry) Snapshots(tenant string) ([]SnapshotRecord, error) {
	var out []SnapshotRecord
	err := each(r, bucketSnapshots, func(rec SnapshotRecord) error {
		if rec.Tenant == tenant {
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// PooledRecord is a session a tenant's warm pool made and has not handed
// out. Pooled sessions are detached, so they outlive a server killed with
// SIGKILL; the next server ends those its rows list.
type PooledRecord struct {
	Tenant string        `json:"tenant"`
	State  sandbox.State `json:"state"`
}

// PutPooled writes a pooled session's row.
func (r *Registry) PutPooled(rec PooledRecord) error {
	if err := r.put(bucketPooled, tenantKey(rec.Tenant, rec.State.ID), rec); err != nil {
		return fmt.Errorf("registry: save pooled session %s: %w", rec.State.ID, err)
	}
	return nil
}

// DeletePooled removes a pooled session's row.
func (r *Registry) DeletePooled(tenant, id string) error {
	if err := r.del(bucketPooled, tenantKey(tenant, id)); err != nil {
		return fmt.Errorf("registry: delete pooled session %s: %w", id, err)
	}
	return nil
}

// Pooled lists every pooled session's row.
func (r *Registry) Pooled() ([]PooledRecord, error) {
	var out []PooledRecord
	err := each(r, bucketPooled, func(rec PooledRecord) error { out = append(out, rec); return nil })
	return out, err
}
