// Command execbench measures the docker backend against the docker CLI in
// one run, interleaving the two sides round by round so that engine load
// drifts hit both alike:
//
//   - cold start: `agentbox exec --backend docker -- true` against
//     `docker run --rm --network none IMG true` (and plain `docker run --rm
//     IMG true`, which also sets up a bridge network);
//   - exec in a live session: Session.Exec of `true` against `docker exec
//     CONTAINER true` on the same container, plus a bare Engine API exec
//     (create, attach, inspect: what the docker CLI does, without its
//     process start-up) to show the backend's own overhead.
//
// It prints a Markdown table of p50/p95 and ratios.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

func main() {
	agentbox := flag.String("agentbox", "bin/agentbox", "agentbox binary for the cold-start runs")
	image := flag.String("image", docker.BaseImage, "image to run")
	coldN := flag.Int("cold", 10, "cold-start rounds")
	execN := flag.Int("exec", 40, "exec rounds")
	flag.Parse()
	if err := run(*agentbox, *image, *coldN, *execN); err != nil {
		fmt.Fprintln(os.Stderr, "execbench:", err)
		os.Exit(1)
	}
}

type series struct {
	name string
	d    []time.Duration
}

func (s *series) add(d time.Duration) { s.d = append(s.d, d) }

func (s *series) pct(p float64) time.Duration {
	d := slices.Clone(s.d)
	slices.Sort(d)
	i := int(p*float64(len(d)-1) + 0.5)
	return d[i]
}

func timeCmd(name string, args ...string) (time.Duration, error) {
	cmd := exec.Command(name, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s %v: %w: %s", name, args, err, errb.String())
	}
	return d, nil
}

func run(agentbox, image string, coldN, execN int) error {
	ctx := context.Background()
	c, err := docker.New(docker.Options{Image: image})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.BuildBaseImage(ctx, docker.BuildOptions{}); err != nil && image == docker.BaseImage {
		return err
	}
	fmt.Fprintf(os.Stderr, "engine: %s\n", c.Engine())

	// Cold start.
	coldAB := &series{name: "agentbox exec --backend docker -- true"}
	coldNone := &series{name: "docker run --rm --network none IMG true"}
	coldPlain := &series{name: "docker run --rm IMG true"}
	for i := 0; i < coldN+1; i++ {
		for _, s := range []struct {
			ser  *series
			name string
			args []string
		}{
			{coldAB, agentbox, []string{"exec", "--backend", "docker", "--image", image, "--", "true"}},
			{coldNone, "docker", []string{"run", "--rm", "--network", "none", image, "true"}},
			{coldPlain, "docker", []string{"run", "--rm", image, "true"}},
		} {
			d, err := timeCmd(s.name, s.args...)
			if err != nil {
				return err
			}
			if i > 0 { // the first round warms caches
				s.ser.add(d)
			}
		}
		fmt.Fprintf(os.Stderr, "cold round %d/%d\n", i, coldN)
	}

	// Exec in a live session.
	sess, err := c.Create(ctx, sandbox.Spec{Image: image})
	if err != nil {
		return err
	}
	defer sess.Close(ctx)
	cid, err := docker.ContainerID(sess.State())
	if err != nil {
		return err
	}
	api, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer api.Close()
	execAB := &series{name: "sandbox.Exec(true, Session)"}
	execCLI := &series{name: "docker exec CONTAINER true"}
	execAPI := &series{name: "bare Engine API exec (true)"}
	for i := 0; i < execN+2; i++ {
		start := time.Now()
		res, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			return fmt.Errorf("session exec: %v (exit %d)", err, res.ExitCode)
		}
		dAB := time.Since(start)
		dCLI, err := timeCmd("docker", "exec", cid, "true")
		if err != nil {
			return err
		}
		start = time.Now()
		if err := bareExec(ctx, api, cid); err != nil {
			return err
		}
		dAPI := time.Since(start)
		if i >= 2 {
			execAB.add(dAB)
			execCLI.add(dCLI)
			execAPI.add(dAPI)
		}
	}

	fmt.Printf("| measurement | n | p50 | p95 |\n|---|---|---|---|\n")
	for _, s := range []*series{coldAB, coldNone, coldPlain, execAB, execCLI, execAPI} {
		fmt.Printf("| %s | %d | %s | %s |\n", s.name, len(s.d), ms(s.pct(0.5)), ms(s.pct(0.95)))
	}
	fmt.Printf("\n| ratio | p50 | p95 | target |\n|---|---|---|---|\n")
	ratio := func(name string, a, b *series) {
		fmt.Printf("| %s | %.2fx | %.2fx | <= 1.10x |\n", name,
			float64(a.pct(0.5))/float64(b.pct(0.5)), float64(a.pct(0.95))/float64(b.pct(0.95)))
	}
	ratio("cold start: agentbox / docker run --network none", coldAB, coldNone)
	ratio("cold start: agentbox / docker run", coldAB, coldPlain)
	ratio("exec: Session.Exec / docker exec", execAB, execCLI)
	ratio("exec: Session.Exec / bare API exec", execAB, execAPI)
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// bareExec is what `docker exec` does through the API: create, attach
// (which starts it), drain, inspect the exit code.
func bareExec(ctx context.Context, api *client.Client, cid string) error {
	created, err := api.ExecCreate(ctx, cid, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	att, err := api.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	_, _ = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	att.Close()
	for {
		insp, err := api.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return err
		}
		if !insp.Running {
			if insp.ExitCode != 0 {
				return fmt.Errorf("bare exec exited %d", insp.ExitCode)
			}
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}
