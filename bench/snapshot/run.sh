#!/usr/bin/env bash
# Snapshot benchmark: agentbox snapshot save/restore against tar + zstd on
# the same generated workspace, in one run. See README.md for the figures.
#
#   bash bench/snapshot/run.sh            # 1 GiB workspace, 3 repetitions
#   SIZE_MIB=256 REPS=1 bash bench/snapshot/run.sh
#
# Environment:
#   SIZE_MIB  workspace size in MiB (default 1024)
#   REPS      repetitions of each measurement (default 3)
#   COLD=1    drop the page cache before every measurement (needs root and a
#             writable /proc/sys/vm/drop_caches); default: warm cache
#   WORKDIR   where to put the workspace, archives and stores (default a
#             temp dir under ${TMPDIR:-/var/tmp}); removed at the end unless KEEP=1
#   AGENTBOX  an agentbox binary to use instead of building ./cmd/agentbox
#
# It installs nothing: it checks for go, tar, zstd and GNU time and says
# what is missing (Debian: apt-get install zstd time).
set -euo pipefail

SIZE_MIB=${SIZE_MIB:-1024}
REPS=${REPS:-3}
COLD=${COLD:-0}
KEEP=${KEEP:-0}
repo=$(cd "$(dirname "$0")/../.." && pwd)

missing=()
for tool in go tar zstd awk; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -x /usr/bin/time ] || missing+=("/usr/bin/time (apt-get install time)")
if [ ${#missing[@]} -gt 0 ]; then
	echo "run.sh: missing: ${missing[*]}" >&2
	exit 2
fi
if [ "$COLD" = 1 ] && ! { [ -w /proc/sys/vm/drop_caches ] || [ "$(id -u)" = 0 ]; }; then
	echo "run.sh: COLD=1 needs root to write /proc/sys/vm/drop_caches" >&2
	exit 2
fi

work=${WORKDIR:-$(mktemp -d "${TMPDIR:-/var/tmp}/agentbox-snapbench.XXXXXX")}
mkdir -p "$work"
cleanup() {
	if [ "$KEEP" != 1 ]; then
		rm -rf "$work"
	else
		rm -rf "$work"/out-* "$work"/store-* "$work"/ws-*.tar.zst
	fi
}
trap cleanup EXIT

# The binary under test: agentbox, or (when the CLI does not build at this
# commit) the same store through bench/snapshot/snapbench.
if [ -n "${AGENTBOX:-}" ]; then
	bin=$AGENTBOX
	save_cmd() { "$bin" snapshot save --store "$1" "$2"; }
	restore_cmd() { "$bin" snapshot restore --store "$1" "$2" "$3"; }
	tool="agentbox ($AGENTBOX)"
elif (cd "$repo" && go build -o "$work/agentbox" ./cmd/agentbox) 2>"$work/build.log"; then
	bin=$work/agentbox
	save_cmd() { "$bin" snapshot save --store "$1" "$2"; }
	restore_cmd() { "$bin" snapshot restore --store "$1" "$2" "$3"; }
	tool="agentbox snapshot"
else
	echo "run.sh: ./cmd/agentbox does not build here (see below); measuring the store through bench/snapshot/snapbench" >&2
	head -5 "$work/build.log" >&2
	(cd "$repo" && go build -o "$work/snapbench" ./bench/snapshot/snapbench)
	bin=$work/snapbench
	save_cmd() { "$bin" save "$1" "$2"; }
	restore_cmd() { "$bin" restore "$1" "$2" "$3"; }
	tool="snapbench (snapshot package)"
fi
(cd "$repo" && go build -o "$work/gen" ./bench/snapshot/gen)

ws=$work/ws
if [ ! -d "$ws" ]; then
	echo "generating a ${SIZE_MIB} MiB workspace in $ws ..." >&2
	"$work/gen" -dir "$ws" -mib "$SIZE_MIB"
fi
bytes=$(du -sb --apparent-size "$ws" | awk '{print $1}')
files=$(find "$ws" -type f | wc -l)

prepare() {
	sync
	if [ "$COLD" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

# measure NAME FUNC [SETUP]: runs SETUP untimed, then the exported shell
# function FUNC under GNU time, and records "NAME wall cpu".
measure() {
	local name=$1 fn=$2 setup=${3:-}
	if [ -n "$setup" ]; then bash -c "$setup"; fi
	prepare
	if ! /usr/bin/time -f "%e %U %S" bash -c "$fn" >/dev/null 2>"$work/err"; then
		echo "run.sh: $name failed:" >&2
		cat "$work/err" >&2
		exit 1
	fi
	local wall user sys
	read -r wall user sys < <(tail -1 "$work/err")
	echo "$name $wall $(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" >>"$work/results"
	printf '  %-20s %6.2f s wall, %6.2f s CPU (user+sys)\n' "$name" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" >&2
}

# Every repetition writes to fresh paths (suffix $rep) and nothing is
# deleted until the end: creating files where thousands were just deleted
# makes ext4's inode allocation several times slower (recently_deleted),
# which would measure the deletion instead of the tools.
tar_save() { tar -C "$ws" -cf - . | zstd -q -f -o "$work/ws-$rep.tar.zst"; }
tar_save_sync() { tar_save && sync -f "$work/ws-$rep.tar.zst"; }
tar_restore() { mkdir "$work/out-tar-$rep" && zstd -q -d -c "$work/ws-$rep.tar.zst" | tar -C "$work/out-tar-$rep" -xf -; }
ab_save() { save_cmd "$work/store-$rep" "$ws" >"$work/id"; }
ab_save_again() { save_cmd "$work/store-$rep" "$ws" >/dev/null; }
ab_restore() { restore_cmd "$work/store-$rep" "$(cat "$work/id")" "$work/out-ab-$rep"; }

export ws work bin
export -f save_cmd restore_cmd tar_save tar_save_sync tar_restore ab_save ab_save_again ab_restore
: >"$work/results"
echo "workspace: $files files, $bytes bytes; cache: $([ "$COLD" = 1 ] && echo cold || echo warm); $REPS repetitions" >&2
# Outputs of an earlier run in a kept WORKDIR (the workspace stays).
rm -rf "$work"/out-* "$work"/store-* "$work"/ws-*.tar.zst
sync
for rep in $(seq "$REPS"); do
	echo "repetition $rep" >&2
	export rep
	measure tar_save tar_save
	measure tar_save_sync tar_save_sync
	measure ab_save ab_save
	measure ab_save_unchanged ab_save_again
	measure tar_restore tar_restore
	measure ab_restore ab_restore
done

# The restored trees must equal the workspace.
diff -r "$ws" "$work/out-ab-$REPS" >/dev/null || { echo "run.sh: the restored tree differs from the workspace" >&2; exit 1; }

tar_size=$(stat -c %s "$work/ws-$REPS.tar.zst")
store_size=$(du -sb --apparent-size "$work/store-$REPS/objects" "$work/store-$REPS/packs" | awk '{s+=$1} END {print s}')

echo
echo "snapshot benchmark: $files files, $(awk -v b="$bytes" 'BEGIN{printf "%.0f", b/1048576}') MiB, page cache $([ "$COLD" = 1 ] && echo "dropped before each step" || echo "warm"), $REPS reps, $(nproc) CPUs, tool: $tool"
awk -v bytes="$bytes" '
	function sorted(list, a,   n, i, j, x) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
		return n
	}
	function median(list,   a, n) { n = sorted(list, a); return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	{ t[$1] = t[$1] " " $2; c[$1] = c[$1] " " $3 }
	END {
		printf "%-18s %-22s %9s %9s %8s %8s %9s %8s\n", "step", "wall s (each rep)", "median s", "MB/s", "vs tar", "best", "CPU s", "vs tar"
		split("tar_save tar_save_sync ab_save ab_save_unchanged tar_restore ab_restore", order, " ")
		ref["ab_save"] = "tar_save"; ref["ab_save_unchanged"] = "tar_save"; ref["ab_restore"] = "tar_restore"
		ref["tar_save_sync"] = "tar_save"
		for (k in t) { m[k] = median(t[k]); sorted(t[k], a); best[k] = a[1]; mc[k] = median(c[k]) }
		for (i = 1; i <= 6; i++) {
			k = order[i]
			r = (k in ref) ? sprintf("%.2fx", m[k] / m[ref[k]]) : "-"
			rb = (k in ref) ? sprintf("%.2fx", best[k] / best[ref[k]]) : "-"
			rc = (k in ref) ? sprintf("%.2fx", mc[k] / mc[ref[k]]) : "-"
			printf "%-18s %-22s %9.2f %9.1f %8s %8s %9.2f %8s\n", k, t[k], m[k], bytes / m[k] / 1e6, r, rb, mc[k], rc
		}
		printf "(vs tar: median against median; best: fastest against fastest; CPU: median user+sys)\n"
		printf "ab_save vs tar_save_sync (both durable on disk): %.2fx median\n", m["ab_save"] / m["tar_save_sync"]
	}' "$work/results"
awk -v b="$bytes" -v t="$tar_size" -v s="$store_size" 'BEGIN {
	printf "size: workspace %.1f MB, tar.zst %.1f MB (ratio %.2f), store %.1f MB (ratio %.2f)\n", b/1e6, t/1e6, b/t, s/1e6, b/s }'
