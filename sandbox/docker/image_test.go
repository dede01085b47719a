package docker

import (
	"context"
	"testing"
)

func TestBaseImageBuildIsCached(t *testing.T) {
	c := testClient(t)
	res, err := c.BuildBaseImage(context.Background(), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cached {
		t.Errorf("second build of %s was not cached (content %s)", res.Image, res.Content)
	}
	if res.Files < 100 {
		t.Errorf("base image has only %d files", res.Files)
	}
}
