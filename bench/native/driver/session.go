package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// sessionResult compares a command run through the CLI in a live session
// (`agentbox exec --session ID -- true`) with a bare fork/exec of the same
// command and with `docker exec` into a running container, all as whole
// host commands, interleaved.
type sessionResult struct {
	bare, cli, docker series
	// dockerSkipped says why there is no docker series.
	dockerSkipped string
}

// runSessionCLI makes a detached session (and a container, when an engine
// answers) and times n rounds of the three contenders.
func runSessionCLI(n int, agentbox string) (_ *sessionResult, err error) {
	home, err := os.MkdirTemp("", "bench-native-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	env := []string{"AGENTBOX_HOME=" + home}
	out, err := output(env, agentbox, "session", "create")
	if err != nil {
		return nil, fmt.Errorf("agentbox session create: %w", err)
	}
	id := strings.TrimSpace(out)
	defer func() {
		if _, rerr := output(env, agentbox, "session", "rm", id); rerr != nil && err == nil {
			err = fmt.Errorf("agentbox session rm: %w", rerr)
		}
	}()
	r := &sessionResult{
		bare:   series{name: "bare /bin/true (fork/exec from the driver)"},
		cli:    series{name: "agentbox exec --session ID -- true"},
		docker: series{name: "docker exec CONTAINER true"},
	}
	cmds := []command{
		{argv: []string{"/bin/true"}},
		{argv: []string{agentbox, "exec", "--session", id, "--", "true"}, env: env},
	}
	if cid, why := startContainer(); cid != "" {
		defer exec.Command("docker", "rm", "-f", cid).Run()
		cmds = append(cmds, command{argv: []string{"docker", "exec", cid, "true"}})
	} else {
		r.dockerSkipped = why
	}
	all := []*series{&r.bare, &r.cli, &r.docker}
	for i := 0; i < n+n/10; i++ {
		for j := range cmds {
			k := (i + j) % len(cmds)
			d, err := cmds[k].time()
			if err != nil {
				return nil, err
			}
			if i >= n/10 { // the first tenth warms up
				all[k].add(d)
			}
		}
	}
	return r, nil
}

// startContainer runs a container that waits, from the docker backend's
// base image, and returns its id; or "" and why not.
func startContainer() (string, string) {
	if _, err := exec.LookPath("docker"); err != nil {
		return "", "no docker command"
	}
	out, err := output(nil, "docker", "run", "-d", "--network", "none", "agentbox/base:latest", "sleep", "3600")
	if err != nil {
		return "", fmt.Sprintf("docker run: %v (agentbox image build makes the image)", err)
	}
	return strings.TrimSpace(out), ""
}

// output runs argv with env added and returns its stdout.
func output(env []string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%q: %w: %s", argv, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}
