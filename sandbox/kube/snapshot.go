package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/snapshot"
)

// tarStore is a snapshot store that also reads and writes tar streams,
// which is how a workspace leaves and enters a Pod (snapshot.Store is one).
type tarStore interface {
	sandbox.SnapshotStore
	Import(ctx context.Context, r io.Reader) (snapshot.Info, error)
	Export(ctx context.Context, ref string, w io.Writer) error
}

// importer is the client's store when it can take tar streams.
func (c *Client) importer() tarStore {
	ts, _ := c.opts.Snapshots.(tarStore)
	return ts
}

// Snapshot streams the workspace out of the Pod (tar, run as the session's
// user) into the store's Import, which treats the archive as untrusted
// (names, links, entries, sizes). File sizes beyond the session's disk
// limit are refused before the store keeps anything.
func (s *session) Snapshot(ctx context.Context) (string, error) {
	const op = "kube: snapshot"
	store := s.c.importer()
	if store == nil {
		return "", sandbox.Errorf(sandbox.ErrUnsupported, "%s: the client has no snapshot store that imports tar streams", op)
	}
	if err := s.live(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	raw, rawW := io.Pipe()
	var errb sandbox.CappedBuffer
	errb.Max = 4 << 10
	streamed := make(chan error, 1)
	go func() {
		err := s.stream(ctx, []string{"tar", "-C", s.spec.Workdir, "-cf", "-", "."}, remotecommand.StreamOptions{Stdout: rawW, Stderr: &errb})
		st, serr := exitStatus(err)
		switch {
		case serr != nil:
			err = serr
		case st.ExitCode == 1 && bytes.Contains(errb.Bytes(), []byte("as we read it")):
			// GNU tar's "some files differ": a file changed or went
			// while it was read. The archive is whole; a Pod cannot be
			// paused, so a snapshot of a session whose commands write
			// is not a point-in-time copy, and says so in the log.
			s.c.log.Warn("kube: snapshot of a running session: files changed while they were read", "session", s.id, "tar", string(errb.Bytes()))
			err = nil
		case st.ExitCode != 0:
			err = fmt.Errorf("tar in the pod: exit %d: %s", st.ExitCode, errb.Bytes())
		default:
			err = nil
		}
		rawW.CloseWithError(err)
		streamed <- err
	}()
	bounded, boundedW := io.Pipe()
	go func() {
		err := copyTar(boundedW, raw, s.spec.Policy.Resources.DiskBytes, false)
		raw.CloseWithError(errors.Join(err, sandbox.ErrClosed))
		boundedW.CloseWithError(err)
	}()
	info, err := store.Import(ctx, bounded)
	bounded.CloseWithError(sandbox.ErrClosed)
	if err != nil {
		cancel()
		<-streamed
		return "", sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	if err := <-streamed; err != nil {
		return "", sandbox.Wrap(op, nil, err)
	}
	s.mu.Lock()
	s.snapshot = info.ID
	s.mu.Unlock()
	return info.ID, nil
}

// restore writes snapshot ref into the Pod's (empty) workspace: the
// store's export, bounded by the disk limit, extracted by tar in the Pod
// with the modes it records.
func (s *session) restore(ctx context.Context, ref string) error {
	op := "kube: restore snapshot " + ref
	store := s.c.importer()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exported, exportW := io.Pipe()
	go func() { exportW.CloseWithError(store.Export(ctx, ref, exportW)) }()
	in, inW := io.Pipe()
	go func() {
		// The root entry is skipped: the emptyDir's root belongs to
		// root, and its mode is the Pod's, not the snapshot's.
		err := copyTar(inW, exported, s.spec.Policy.Resources.DiskBytes, true)
		exported.CloseWithError(errors.Join(err, sandbox.ErrClosed))
		inW.CloseWithError(err)
	}()
	var errb sandbox.CappedBuffer
	errb.Max = 4 << 10
	err := s.stream(ctx, []string{"tar", "-C", s.spec.Workdir, "-xpf", "-", "--no-same-owner"}, remotecommand.StreamOptions{Stdin: in, Stdout: io.Discard, Stderr: &errb})
	in.CloseWithError(sandbox.ErrClosed)
	st, serr := exitStatus(err)
	switch {
	case serr != nil:
		return sandbox.Wrap(op, nil, serr)
	case st.ExitCode != 0:
		return sandbox.Errorf(sandbox.ErrInvalid, "%s: tar in the pod: exit %d: %s", op, st.ExitCode, errb.Bytes())
	}
	return nil
}

// copyTar copies the tar stream src to dst, entry by entry, without the
// PAX records (agentbox's own and the global header, which other tars
// warn about), and refuses once the regular files' sizes total more than
// maxBytes (when positive). With skipRoot the entry of the root itself
// is left out.
func copyTar(dst io.Writer, src io.Reader, maxBytes int64, skipRoot bool) error {
	tr := tar.NewReader(src)
	tw := tar.NewWriter(dst)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader || skipRoot && (h.Name == "./" || h.Name == "." || h.Name == "/") {
			continue
		}
		if h.Typeflag == tar.TypeReg {
			total += h.Size
			if maxBytes > 0 && total > maxBytes {
				return sandbox.Errorf(sandbox.ErrInvalid, "the workspace's files total more than the session's disk limit of %d bytes", maxBytes)
			}
		}
		h.PAXRecords = nil
		h.Format = tar.FormatUnknown
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write tar: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("copy %s: %w", h.Name, err)
		}
	}
}
