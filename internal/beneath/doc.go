// Package beneath opens paths beneath a directory descriptor without ever
// leaving it: the one safe-path walker of the repository, for what Go's
// os.Root cannot express.
//
// Threat: the tree below the directory belongs to someone else (a sandbox's
// workspace, a read-write mount, a source tree an agent can change), who can
// plant symlinks and swap a component for one while the host walks the path,
// hoping the host follows it out of the tree (the race of runc's
// CVE-2021-30465) or onto another file inside it that a policy protects by
// name. So no name is ever resolved twice and the kernel never follows a
// link for us:
//
//   - Open refuses a symlink in any component. The fast path is one
//     openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS); the
//     fallback, for kernels before 5.6, seccomp filters that predate openat2,
//     a refusal to explain and anything to make, opens one component at a
//     time from its parent's descriptor with O_NOFOLLOW. Mounts on the way
//     are entered (no RESOLVE_NO_XDEV), so a walk inside a mount namespace
//     sees the tree as that namespace does. Missing components can be made,
//     owned like their parent or by given ids.
//   - OpenInRoot resolves symlinks as if the directory were "/", the way
//     openat2(RESOLVE_IN_ROOT) does (its fast path): absolute targets and
//     ".." are clamped at the directory. The fallback reads each link itself
//     and splices its target into the walk, holding a descriptor of every
//     directory so that ".." never reaches the kernel.
//
// os.Root differs from both: it follows links that stay inside and refuses
// absolute ones. Use it where those are the wanted semantics.
//
// What replaces what (sandbox/linux is switched over separately):
//
//	rootfs openInRoot(root, p, existing)  Open(rootfd, p, Options{Flags: unix.O_PATH})
//	rootfs openInRoot(root, p, dirPoint)  Open(rootfd, p, Options{Flags: unix.O_PATH, Kind: Dir, Make: MakeMissing})
//	rootfs openInRoot(root, p, filePoint) Open(rootfd, p, Options{Flags: unix.O_PATH, Kind: NonDir, Make: MakeMissing})
//	rootfs walkError, walkErr             *Error (errors.As for the component, errors.Is for the errno)
//	rootfs openLast, makeDirAt, makeFileAt, chownLikeParent: inside Open (a nil Owner is the parent's)
//	rootfs noSymlinks(root, p)            not needed: Open refuses a link itself, naming it
//	session openParent(d, rel)            base := unix.Open(d.Base, O_PATH|O_DIRECTORY|O_NOFOLLOW);
//	                                      OpenParent(base, rel, Options{Expect: Identity{d.Dev, d.Ino}})
//	wsfs walkOpen, haveOpenat2            OpenInRoot (Open with RefuseSymlinks)
//	manifest openDirNoFollow, openFileNoFollow, artifact openDir: OpenPath
//	manifest openRegularAt, mkdirAt, createAt, writer.parent: Open, OpenParent
//	snapshot source.open (openat2, then os.Root): Open
package beneath
