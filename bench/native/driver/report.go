package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// row is one line of the summary table.
type row struct {
	what, agentbox, peer, ratio, target, result string
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "**FAIL**"
}

// results gathers every measurement of one run.
type results struct {
	when      time.Time
	took      time.Duration
	loadStart string
	gap       time.Duration // quiet time before each cold-start run
	cold      *coldResult
	live      *liveResult
	session   *sessionResult
	idleCLI   *idleResult
	cliClient procMem
	idleLib   *idleResult
	many      *manyResult
	manyCLI   *manyResult
}

// Cold-start contenders, in the order runCold gets them.
const (
	cAgentbox = iota
	cBwrap
	cBwrapCG
	cUnshare
	cBare
	cHelp
	cSelf
	cFull
	cBwrapAll
	cTmpfs
)

// Targets from issue 2.
const (
	coldRatioTarget = 1.5
	liveOverTarget  = 2 * time.Millisecond
	// sessionOverTarget is issue 14's: a command through the CLI in a live
	// session, over a bare fork/exec.
	sessionOverTarget = 3 * time.Millisecond
	idleTarget        = 8 << 20
)

func (r *results) rows() []row {
	var rows []row
	if c := r.cold; c != nil {
		ab, bw, cg, all := c.cmds[cAgentbox], c.cmds[cBwrap], c.cmds[cBwrapCG], c.cmds[cBwrapAll]
		q := float64(ab.p50()) / float64(bw.p50())
		qall := float64(ab.p50()) / float64(all.p50())
		rows = append(rows,
			row{"cold start p50: `agentbox exec -- true` vs bwrap (namespaces and mounts only: no limits, no filter)", ms(ab.p50()), ms(bw.p50()), ratio(ab.p50(), bw.p50()), "≤ 1.5x bwrap", verdict(q <= coldRatioTarget)},
			row{"cold start p50: `agentbox exec -- true` vs bwrap with the same limits (a fresh cgroup, 1 GiB, 512 pids) and seccomp filter", ms(ab.p50()), ms(all.p50()), ratio(ab.p50(), all.p50()), "≤ 1.5x bwrap confining alike", verdict(qall <= coldRatioTarget)},
			row{"cold start p50 vs bwrap in a cgroup with the same limits, no filter", ms(ab.p50()), ms(cg.p50()), ratio(ab.p50(), cg.p50()), "", ""},
			row{"cold start p95: `agentbox exec -- true` vs bwrap", ms(ab.p95()), ms(bw.p95()), ratio(ab.p95(), bw.p95()), "", ""},
			row{"cold start p95: `agentbox exec -- true` vs bwrap confining alike", ms(ab.p95()), ms(all.p95()), ratio(ab.p95(), all.p95()), "", ""},
			row{"cold start p50 vs `unshare ... --fork true`", ms(ab.p50()), ms(c.cmds[cUnshare].p50()), ratio(ab.p50(), c.cmds[cUnshare].p50()), "", ""},
			row{"cold start p50 vs bare `/bin/true`", ms(ab.p50()), ms(c.cmds[cBare].p50()), ratio(ab.p50(), c.cmds[cBare].p50()), "", ""},
			row{"cold start p50 with the session state on a tmpfs (as /run is on a standard host) vs bwrap confining alike", ms(c.cmds[cTmpfs].p50()), ms(all.p50()), ratio(c.cmds[cTmpfs].p50(), all.p50()), "", ""},
			row{"cold start p50 of the full CLI (`agentbox-full exec -- true`: every command linked in) vs bwrap", ms(c.cmds[cFull].p50()), ms(bw.p50()), ratio(c.cmds[cFull].p50(), bw.p50()), "", ""},
			row{"cold start p50 through the library in-process (Create + Exec + Close) vs bwrap confining alike", ms(c.lib.total.p50()), ms(all.p50()), ratio(c.lib.total.p50(), all.p50()), "≤ 1.5x bwrap confining alike", verdict(float64(c.lib.total.p50())/float64(all.p50()) <= coldRatioTarget)},
			row{"cold start p50 through the library in-process vs bwrap", ms(c.lib.total.p50()), ms(bw.p50()), ratio(c.lib.total.p50(), bw.p50()), "", ""},
		)
	}
	if l := r.live; l != nil {
		over := l.exec.p50() - l.bare.p50()
		rows = append(rows,
			row{"exec in a live session p50: Session.Exec vs os/exec of /bin/true", ms(l.exec.p50()), ms(l.bare.p50()), fmt.Sprintf("+%s", ms(over)), "< +2 ms", verdict(over < liveOverTarget)},
			row{"exec in a live session p95", ms(l.exec.p95()), ms(l.bare.p95()), fmt.Sprintf("+%s", ms(l.exec.p95()-l.bare.p95())), "", ""},
		)
	}
	if x := r.session; x != nil {
		over := x.cli.p50() - x.bare.p50()
		rows = append(rows,
			row{"a command in a live session through the CLI p50: `agentbox exec --session ID -- true` vs a bare fork/exec of /bin/true", ms(x.cli.p50()), ms(x.bare.p50()), fmt.Sprintf("+%s", ms(over)), "≤ +3 ms", verdict(over <= sessionOverTarget)})
		if x.dockerSkipped == "" {
			rows = append(rows, row{"a command in a live session through the CLI p50 vs `docker exec CONTAINER true`", ms(x.cli.p50()), ms(x.docker.p50()), ratio(x.cli.p50(), x.docker.p50()), "", ""})
		} else {
			rows = append(rows, row{"`docker exec` peer", "", "skipped: " + x.dockerSkipped, "", "", ""})
		}
	}
	if i := r.idleCLI; i != nil {
		rows = append(rows, row{fmt.Sprintf("idle session host memory, `agentbox exec` as installed (PSS of init + helpers; init %s)", filepath.Base(i.init)), mib(i.mem.PSS), "", "", "< 8 MiB", verdict(i.mem.PSS < idleTarget)})
	}
	if i := r.idleLib; i != nil {
		rows = append(rows, row{fmt.Sprintf("idle session host memory, fallback without agentbox-init (init %s)", filepath.Base(i.init)), mib(i.mem.PSS), "", "", "", ""})
	}
	if m := r.many; m != nil {
		rows = append(rows, row{fmt.Sprintf("%d concurrent sessions (Create, exec, Close): failures", m.n),
			fmt.Sprintf("%d failed; all up in %s, all closed after %s; peak memory charged to the sessions' memory groups %s, client RSS growth %s; inits' PSS %s",
				len(m.failures), ms(m.up), ms(m.wall), mib(m.peakGroups), mib(m.peakClient), mib(m.initsPSS)),
			"", "", "0 failures", verdict(len(m.failures) == 0)})
	}
	if m := r.manyCLI; m != nil {
		rows = append(rows, row{fmt.Sprintf("%d concurrent `agentbox exec -- true`: failures", m.n),
			fmt.Sprintf("%d failed; all done after %s", len(m.failures), ms(m.wall)),
			"", "", "0 failures", verdict(len(m.failures) == 0)})
	}
	return rows
}

// write prints the Markdown report: the machine, the summary table, every
// series, and where the time and memory go.
func (r *results) write(w io.Writer) {
	fmt.Fprintf(w, "Machine: %d cores (%s), kernel %s, %s; run %s, %s; load average %s at the start, %s at the end.\n\n",
		runtime.NumCPU(), cpuModel(), kernel(), memTotal(), r.when.UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second), r.loadStart, loadAvg())
	if r.cold != nil {
		fmt.Fprintf(w, "Cold starts: each run after %s of quiet (the machine at rest, as between an agent's commands), contenders interleaved.\n\n", r.gap)
	}
	fmt.Fprintln(w, "| measurement | agentbox | peer | ratio | target | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, x := range r.rows() {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", x.what, x.agentbox, x.peer, x.ratio, x.target, x.result)
	}
	fmt.Fprintln(w)
	var all []*series
	if r.cold != nil {
		all = append(all, r.cold.cmds...)
		l := &r.cold.lib
		l.create.name, l.exec.name, l.close.name, l.total.name = "in-process Create", "in-process first Exec of true", "in-process Close", "in-process Create + Exec + Close"
		all = append(all, &l.create, &l.exec, &l.close, &l.total)
	}
	if r.live != nil {
		all = append(all, &r.live.bare, &r.live.exec)
	}
	if r.session != nil {
		all = append(all, &r.session.bare, &r.session.cli)
		if r.session.dockerSkipped == "" {
			all = append(all, &r.session.docker)
		}
	}
	fmt.Fprintln(w, "| series | n | p50 | p95 |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, s := range all {
		fmt.Fprintf(w, "| %s | %d | %s | %s |\n", s.name, len(s.d), ms(s.p50()), ms(s.p95()))
	}
	fmt.Fprintln(w)
	if r.idleCLI != nil {
		fmt.Fprintf(w, "Idle session of `agentbox exec`, init %s: %s; processes: %s. The `agentbox exec` client process itself, while it waits: %s.\n\n",
			r.idleCLI.init, memLine(r.idleCLI.mem), strings.Join(r.idleCLI.procs, "; "), memLine(r.cliClient))
	}
	if r.idleLib != nil {
		fmt.Fprintf(w, "Idle session with agentbox re-executing itself as init (%s): %s; processes: %s.\n\n", r.idleLib.init, memLine(r.idleLib.mem), strings.Join(r.idleLib.procs, "; "))
	}
	for _, m := range []*manyResult{r.many, r.manyCLI} {
		if m == nil {
			continue
		}
		if len(m.groupsMissed) > 0 {
			fmt.Fprintf(w, "- %d sessions left out of the cgroup peak, e.g.: %v\n", len(m.groupsMissed), m.groupsMissed[0])
		}
		for i, err := range m.failures {
			if i == 5 {
				fmt.Fprintf(w, "- ... and %d more failures\n", len(m.failures)-5)
				break
			}
			fmt.Fprintf(w, "- failure: %v\n", err)
		}
	}
}

func memLine(m procMem) string {
	return fmt.Sprintf("RSS %s, PSS %s (anonymous %s, file %s)", mib(m.RSS), mib(m.PSS), mib(m.PSSAnon), mib(m.PSSFile))
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAvg is the 1-minute load average: on a shared machine it says how
// much the figures were disturbed.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return "unknown RAM"
}

// Markers delimit the generated part of bench/README.md.
const (
	beginMarker = "<!-- bench/native: begin (generated by bench/native/run.sh) -->"
	endMarker   = "<!-- bench/native: end -->"
)

// splice replaces what lies between the markers in doc with body.
func splice(doc, body []byte) ([]byte, error) {
	b := bytes.Index(doc, []byte(beginMarker))
	e := bytes.Index(doc, []byte(endMarker))
	if b < 0 || e < 0 || e < b {
		return nil, errors.New("markers " + beginMarker + " ... " + endMarker + " not found in order")
	}
	var out bytes.Buffer
	out.Write(doc[:b+len(beginMarker)])
	out.WriteString("\n")
	out.Write(bytes.TrimSpace(body))
	out.WriteString("\n")
	out.Write(doc[e:])
	return out.Bytes(), nil
}

// updateReadme writes the report into path between the markers.
func updateReadme(path string, body []byte) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	out, err := splice(doc, body)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}
