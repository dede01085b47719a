// Package snapshot is agentbox's on-disk snapshot store: a workspace saved
// as content, so a later session (or another machine, through Export and
// Import) gets exactly the same files back.
//
// # Layout
//
// A store is a directory:
//
//	lock                    flock: Save/Restore/Verify share it, Delete takes it alone
//	objects/ab/cdef...      contents over 1 MiB, one zstd frame per distinct sha256
//	packs/<name>.pack|.idx  smaller contents, one pack (zstd frames) per save
//	snapshots/<id>.json     manifests; <id> is the sha256 of the manifest bytes
//	tmp/                    staging of saves in progress (each locked by its owner)
//
// A manifest lists every entry of the tree (path, type, mode, size,
// sha256, mtime, symlink target, the holes of a sparse file) in path
// order, plus the snapshot's parent, creation time and labels. A save reads
// only the data of a sparse file (SEEK_DATA, SEEK_HOLE) and a restore
// leaves its holes unallocated, so `truncate -s 512M f` stays a few blocks
// (sparse.go). Manifests without holes are written in format version 1,
// which every release reads; with holes, in version 2. Contents are stored by their sha256,
// so a file that did not change since an earlier snapshot (or that appears
// twice) is stored once: snapshots are incremental by construction. Small
// contents are packed (a workspace of 30,000 small files would otherwise
// cost 30,000 inodes per save, which is what dominated saving such trees);
// a pack is removed once none of its contents is referenced, so deleting
// snapshots frees the space of a pack only when all of it is unused.
//
// # Durability
//
// A save writes its new objects into a private staging directory, flushes
// the file system (syncfs), renames them into objects/, flushes again, and
// only then writes the manifest to a temporary file, fsyncs it, renames it
// into snapshots/ and fsyncs that directory. An interrupted save (a crash,
// kill -9, a full disk) therefore never shows a snapshot whose contents are
// missing, and never touches an earlier snapshot; its staging directory is
// removed by the next Open once no process holds its lock.
//
// # Restore and import safety
//
// Restore builds the tree in a private directory beside the target,
// checking every object's sha256 and size as it goes, and renames it into
// place only when everything verified: a corrupted snapshot restores
// nothing. Manifests and imported archives are validated the same way: no
// absolute or escaping paths, no entries below a symlink, symlinks only
// when they provably stay inside the root, no device, fifo or socket
// entries, and Limits on entry count, total bytes and expansion ratio.
// Setuid and setgid bits are never restored. Ownership is not recorded:
// restored files belong to the user who restores them.
package snapshot
